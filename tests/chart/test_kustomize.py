"""deploy/kustomize: the base and every overlay build with the pinned kustomize binary (what
`kubectl kustomize` runs) and pass kubeconform -strict offline; the live-installation overlays
change what the chart's ``webhook.installation.reload`` modes change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dynconf_k8s.operator.crds import shipped_crds
from tests.chart.support import (
    KUSTOMIZE,
    OFFLINE,
    REPO,
    Manifest,
    assert_valid,
    by_kind,
    documents,
    helm_template,
    one,
    pod_specs,
)
from tests.chart.test_chart_live_installation import _installation
from tests.fixtures.kube import Kubeconform, _tool

pytestmark = pytest.mark.helm

OVERLAYS = (
    "base",
    "overlays/cert-manager",
    "overlays/own-cert",
    "overlays/selfrotate",
    "overlays/selfrotate/bootstrap",
    "overlays/with-operator",
    "overlays/live-document",
    "overlays/live-resource",
)
LIVE = ("document", "resource")
"""The chart's live ``webhook.installation.reload`` modes; each has ``components/live-<mode>``."""


@pytest.fixture(scope="session")
def kustomize_bin() -> Path:
    """The pinned kustomize binary (`scripts/testenv install kustomize`)."""
    return _tool("kustomize", "kustomize")


def _own_pair(directory: Path) -> None:
    """A throwaway CA and serving pair where the own-cert overlay expects them."""
    from tests.fixtures.certs import Authority

    authority = Authority("dynamic-config-webhook-ca")
    leaf = authority.issue("dynamic-config-webhook", ["dynamic-config-webhook.dynamic-config.svc"])
    leaf.write(directory / "tls.crt", directory / "tls.key")
    (directory / "ca.crt").write_bytes(authority.cert_pem())


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/ (the base reaches ../../crds) with own-cert's PEM files in place."""
    root = tmp_path_factory.mktemp("deploy") / "deploy"
    shutil.copytree(REPO / "deploy", root)
    _own_pair(root / "kustomize" / "overlays" / "own-cert")
    return root / "kustomize"


def _build(kustomize_bin: Path, tree: Path, overlay: str) -> str:
    result = subprocess.run(
        [str(kustomize_bin), "build", str(tree / overlay)],
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_builds_and_passes_kubeconform(
    overlay: str, kustomize_bin: Path, kubeconform: Kubeconform, tree: Path, tmp_path: Path
) -> None:
    rendered = _build(kustomize_bin, tree, overlay)

    assert_valid(kubeconform, rendered, tmp_path)


def test_the_repository_tree_is_what_the_tests_build() -> None:
    assert (KUSTOMIZE / "base" / "kustomization.yaml").is_file()
    ignored = (KUSTOMIZE / "overlays" / "own-cert" / ".gitignore").read_text()
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(ignored.split())


def test_base_carries_an_empty_commented_installation_document(
    kustomize_bin: Path, tree: Path
) -> None:
    import yaml

    docs = documents(_build(kustomize_bin, tree, "base"))

    config_map = one(docs, "ConfigMap", "dynamic-config-webhook-installation")
    text = config_map["data"]["installation.yaml"]
    assert yaml.safe_load(text) is None, "the shipped document must be all comments"
    assert "storeDefaults" in text and "sourceAllow" in text
    shipped = {crd["metadata"]["name"] for crd in shipped_crds()}
    assert {crd["metadata"]["name"] for crd in by_kind(docs, "CustomResourceDefinition")} == shipped
    (hook,) = one(docs, "MutatingWebhookConfiguration", "dynamic-config")["webhooks"]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "kube-node-lease",
        "dynamic-config",
    ]
    assert hook["failurePolicy"] == "Ignore"


def test_base_installation_document_starts_the_webhook(kustomize_bin: Path, tree: Path,
                                                       tmp_path: Path) -> None:  # fmt: skip
    import sys

    docs = documents(_build(kustomize_bin, tree, "base"))
    webhook = Path(sys.executable).with_name("dynamic-config-webhook")
    if not webhook.exists():
        pytest.skip("dynamic-config-webhook is not installed")
    document = tmp_path / "installation.yaml"
    document.write_text(one(docs, "ConfigMap")["data"]["installation.yaml"])
    pod = REPO / "examples" / "consul-anonymous.yaml"

    result = subprocess.run(
        [str(webhook), "validate", str(pod)],
        capture_output=True,
        text=True,
        env={**os.environ, "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(document)},
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_own_cert_copies_the_ca_into_the_webhook_configuration(
    kustomize_bin: Path, tree: Path
) -> None:
    docs = documents(_build(kustomize_bin, tree, "overlays/own-cert"))

    secret = one(docs, "Secret", "dynamic-config-webhook-tls")
    (hook,) = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert secret["type"] == "kubernetes.io/tls"


def test_cert_manager_and_selfrotate_overlays_wire_their_mode(
    kustomize_bin: Path, tree: Path
) -> None:
    cert_manager = documents(_build(kustomize_bin, tree, "overlays/cert-manager"))
    rotating = documents(_build(kustomize_bin, tree, "overlays/selfrotate"))

    mwc = one(cert_manager, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "dynamic-config/dynamic-config-webhook"
    )
    one(cert_manager, "Certificate", "dynamic-config-webhook")
    deployment = one(rotating, "Deployment", "dynamic-config-webhook")
    spec = deployment["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is True
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE"] == "1"
    assert env["DYNAMIC_CONFIG_WEBHOOK_MWC"] == "dynamic-config"
    assert not by_kind(rotating, "Secret"), "the empty Secret lives in bootstrap/ only"
    one(rotating, "Role", "dynamic-config-webhook-selfrotate")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_kustomize_pod_is_restricted(overlay: str, kustomize_bin: Path, tree: Path) -> None:
    docs: list[Manifest] = documents(_build(kustomize_bin, tree, overlay))

    for where, spec in pod_specs(docs):
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where


def _own(tree: Path, overlay: str, mode: str) -> str:
    """A kustomization of one's own: ``overlay`` plus the live component of ``mode``."""
    directory = tree / f"{overlay}-live-{mode}"
    directory.mkdir(exist_ok=True)
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [../overlays/{overlay}]\n"
        f"components: [../components/live-{mode}]\n"
    )
    return directory.name


def _pod_facts(docs: list[Manifest], deployment: str) -> dict[str, Any]:
    """What a live mode may change in a Deployment: env, mounts, volumes, token, memory."""
    spec = one(docs, "Deployment", deployment)["spec"]["template"]["spec"]
    [container] = spec["containers"]
    facts: dict[str, Any] = {
        f"env {e['name']}": e.get("value", json.dumps(e.get("valueFrom"))) for e in container["env"]
    }
    facts |= {f"mount {m['name']}": m["mountPath"] for m in container.get("volumeMounts", [])}
    facts |= {f"volume {v['name']}": json.dumps(v, sort_keys=True) for v in spec.get("volumes", [])}
    facts["automountServiceAccountToken"] = spec.get("automountServiceAccountToken")
    for bound in ("requests", "limits"):
        facts[f"memory {bound}"] = container["resources"].get(bound, {}).get("memory")
    return facts


def _change(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def _installation_rbac(docs: list[Manifest]) -> list[tuple[str, str, str | None, str]]:
    """The RBAC objects a live mode adds, by kind, name and namespace, with what they grant."""
    kinds = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    return sorted(
        (
            doc["kind"],
            doc["metadata"]["name"],
            doc["metadata"].get("namespace"),
            json.dumps({k: doc.get(k) for k in ("rules", "roleRef", "subjects")}, sort_keys=True),
        )
        for doc in docs
        if doc["kind"] in kinds and "installation" in doc["metadata"]["name"]
    )


@pytest.mark.parametrize("mode", LIVE)
def test_a_live_overlay_changes_what_the_charts_mode_changes(
    mode: str, kustomize_bin: Path, helm_bin: Path, tree: Path, tmp_path: Path
) -> None:
    chart = {
        m: documents(helm_template(
            helm_bin, tmp_path, f"webhook.installation.reload={m}", "operator.enabled=true"
        ).stdout)
        for m in ("restart", mode)
    }  # fmt: skip
    kustomized = {
        "restart": documents(_build(kustomize_bin, tree, "overlays/with-operator")),
        mode: documents(_build(kustomize_bin, tree, _own(tree, "with-operator", mode))),
    }

    for deployment in ("dynamic-config-webhook", "dynamic-config-operator"):
        ours = {m: _pod_facts(kustomized[m], deployment) for m in ("restart", mode)}
        charts = {m: _pod_facts(chart[m], deployment) for m in ("restart", mode)}
        # whatever either side's mode changes (the base always mounts a document; the chart's
        # restart mode only when the installation has a map), it ends the same on both
        touched = _change(ours["restart"], ours[mode]) | _change(charts["restart"], charts[mode])
        assert touched, deployment
        assert {k: ours[mode].get(k) for k in touched} == {
            k: charts[mode].get(k) for k in touched
        }, deployment
    assert _installation(kustomized[mode], mode) == _installation(chart[mode], mode)
    assert _installation_rbac(kustomized[mode]) == _installation_rbac(chart[mode])
    assert _installation_rbac(kustomized["restart"]) == []
    one(
        kustomized[mode], "CustomResourceDefinition", "dynamicconfiginstallations.dynamic-config.rs"
    )


@pytest.mark.parametrize("mode", LIVE)
def test_a_live_overlay_keeps_one_installation_source(
    mode: str, kustomize_bin: Path, tree: Path
) -> None:
    docs = documents(_build(kustomize_bin, tree, f"overlays/live-{mode}"))

    maps = [d for d in by_kind(docs, "ConfigMap") if "installation.yaml" in d.get("data", {})]
    resources = by_kind(docs, "DynamicConfigInstallation")
    assert (len(maps), len(resources)) == ((1, 0) if mode == "document" else (0, 1))


@pytest.mark.parametrize("mode", LIVE)
def test_a_live_component_stacks_on_a_tls_overlay(
    mode: str, kustomize_bin: Path, kubeconform: Kubeconform, tree: Path, tmp_path: Path
) -> None:
    rendered = _build(kustomize_bin, tree, _own(tree, "cert-manager", mode))
    docs = documents(rendered)

    assert_valid(kubeconform, rendered, tmp_path)
    one(docs, "Certificate", "dynamic-config-webhook")
    webhook = one(docs, "Deployment", "dynamic-config-webhook")["spec"]["template"]["spec"]
    names = {e["name"] for e in webhook["containers"][0]["env"]}
    live = (
        "DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS"
        if mode == "document"
        else ("DYNAMIC_CONFIG_WEBHOOK_INSTALLATION")
    )
    assert live in names
