"""`helm install` and `helm upgrade` into the real test API server: every object is created, and
the chart-minted CA survives the upgrade (Helm's `lookup` sees the live Secret)."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.chart.support import CHART, tool_env
from tests.fixtures.kube import KubeControlPlane

pytestmark = [pytest.mark.helm, pytest.mark.k8s, pytest.mark.slow]


def _helm(
    helm: Path, plane: KubeControlPlane, scratch: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(helm), "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        env=tool_env(scratch),
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def test_install_then_upgrade_keeps_the_chart_minted_ca(
    helm_bin: Path, kube_control_plane: KubeControlPlane, kube_client: object, tmp_path: Path
) -> None:
    from kubernetes import client  # type: ignore[import-untyped]

    namespace = f"dc-install-{uuid.uuid4().hex[:6]}"
    release = "dc"
    # Namespace gating keeps this webhook configuration away from every other test's pods: no
    # namespace carries the label, so the API server never calls the (un-run) webhook.
    common = (
        "--namespace", namespace, "--skip-crds",
        "--set", "webhook.namespaceGating=true",
        "--set", "operator.enabled=true",
        "--set", "agent.events.enabled=true",
        "--set", f"agent.events.namespaces={{{namespace}}}",
    )  # fmt: skip
    core = client.CoreV1Api(kube_client)
    admission = client.AdmissionregistrationV1Api(kube_client)
    apps = client.AppsV1Api(kube_client)
    try:
        _helm(helm_bin, kube_control_plane, tmp_path, "install", release, str(CHART),
              "--create-namespace", *common)  # fmt: skip
        first = core.read_namespaced_secret("dynamic-config-webhook-tls", namespace).data
        mwc = admission.read_mutating_webhook_configuration("dynamic-config")
        assert mwc.webhooks[0].client_config.ca_bundle == first["ca.crt"]
        assert (
            apps.read_namespaced_deployment("dynamic-config-webhook", namespace).spec.replicas == 2
        )
        assert apps.read_namespaced_deployment("dynamic-config-operator", namespace)
        core.read_namespaced_service("dynamic-config-webhook", namespace)
        client.RbacAuthorizationV1Api(kube_client).read_namespaced_role(
            "dynamic-config-agent-events", namespace
        )
        client.PolicyV1Api(kube_client).read_namespaced_pod_disruption_budget(
            "dynamic-config-webhook", namespace
        )

        _helm(helm_bin, kube_control_plane, tmp_path, "upgrade", release, str(CHART),
              *common, "--set", "webhook.replicas=3")  # fmt: skip

        second = core.read_namespaced_secret("dynamic-config-webhook-tls", namespace).data
        assert second == first, "the upgrade re-minted the webhook's CA"
        mwc = admission.read_mutating_webhook_configuration("dynamic-config")
        assert mwc.webhooks[0].client_config.ca_bundle == first["ca.crt"]
        deployment = apps.read_namespaced_deployment("dynamic-config-webhook", namespace)
        assert deployment.spec.replicas == 3
        pem = base64.b64decode(second["tls.crt"]).decode()
        assert pem.startswith("-----BEGIN CERTIFICATE-----")
        status = json.loads(
            _helm(
                helm_bin, kube_control_plane, tmp_path,
                "status", release, "--namespace", namespace, "-o", "json",
            ).stdout
        )  # fmt: skip
        assert status["version"] == 2
        assert status["info"]["status"] == "deployed"
    finally:
        subprocess.run(
            [str(helm_bin), "--kubeconfig", str(kube_control_plane.kubeconfig), "uninstall",
             release, "--namespace", namespace, "--wait", "--timeout", "60s"],
            capture_output=True, env=tool_env(tmp_path), timeout=120, check=False,
        )  # fmt: skip
        with contextlib.suppress(client.exceptions.ApiException):
            core.delete_namespace(namespace)
