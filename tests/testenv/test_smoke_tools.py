"""Smoke tests proving helm, kubeconform (offline schemas) and csi-sanity fixtures work."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fixtures.kube import Kubeconform

CHART_YAML = """\
apiVersion: v2
name: smoke
version: 0.1.0
kubeVersion: ">=1.30.0-0"
"""

VALUES_YAML = """\
port: 8080
memory: 64Mi
"""

DEPLOYMENT_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app: smoke}
spec:
  replicas: 1
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: "25%"}
  selector:
    matchLabels: {app: smoke}
  template:
    metadata:
      labels: {app: smoke}
    spec:
      containers:
        - name: app
          image: example.invalid/app:1
          ports: [{containerPort: {{ .Values.port }}}]
          resources:
            limits: {cpu: 1, memory: {{ .Values.memory }}}
          readinessProbe:
            httpGet: {path: /ready, port: {{ .Values.port }}}
"""

CONFIGMAP_YAML = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  config.toml: |
    port = {{ .Values.port }}
"""

# Any attempt to reach the network fails at once instead of silently succeeding on a machine
# that has a route out.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}


def _helm_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **OFFLINE,
        "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
        "HELM_DATA_HOME": str(tmp_path / "helm-data"),
    }


def _chart(tmp_path: Path) -> Path:
    chart = tmp_path / "smoke"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART_YAML)
    (chart / "values.yaml").write_text(VALUES_YAML)
    (chart / "templates" / "deployment.yaml").write_text(DEPLOYMENT_YAML)
    (chart / "templates" / "configmap.yaml").write_text(CONFIGMAP_YAML)
    return chart


def _validate(kubeconform: Kubeconform, manifests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        kubeconform.argv("-"),
        input=manifests,
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE},
        timeout=60,
        check=False,
    )


@pytest.mark.helm
def test_helm_reports_its_pinned_version(helm_bin: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(helm_bin), "version", "--short"],
        capture_output=True,
        text=True,
        env=_helm_env(tmp_path),
        check=True,
    )

    assert result.stdout.startswith("v3.")


@pytest.mark.helm
def test_rendered_chart_validates_against_offline_schemas(
    helm_bin: Path, kubeconform: Kubeconform, tmp_path: Path
) -> None:
    rendered = subprocess.run(
        [str(helm_bin), "template", "smoke", str(_chart(tmp_path))],
        capture_output=True,
        text=True,
        env=_helm_env(tmp_path),
        check=True,
    ).stdout

    result = _validate(kubeconform, rendered)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid: 2" in result.stdout, result.stdout


@pytest.mark.helm
def test_kubeconform_refuses_a_misspelt_field_in_strict_mode(kubeconform: Kubeconform) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndatta: {a: b}\n"

    result = _validate(kubeconform, manifest)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "datta" in result.stdout


@pytest.mark.csi
def test_csi_sanity_prints_its_flags(csi_sanity_bin: Path) -> None:
    result = subprocess.run(
        [str(csi_sanity_bin), "-h"], capture_output=True, text=True, timeout=60, check=False
    )

    assert "csi.endpoint" in result.stdout + result.stderr
