"""webhook.installation.reload: the three ways an edited installation takes effect, rendered.

Whatever the mode, the webhook must admit with the same installation: the document (or the
resource's spec) plus the variables the chart sets parse, with the one parser, to what the
restart mode gives. Only restart rolls the pods on the document's checksum.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dynconf_k8s.contract import merge_environment, parse_installation
from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.inforce.resource import EVENT_NAMESPACE, EVENT_RULES, RULES
from tests.chart.support import Manifest, assert_valid, documents, env_of, helm_template, one
from tests.chart.test_chart_render import MAP_INSTALLATION, TOGGLES
from tests.fixtures.kube import Kubeconform

pytestmark = pytest.mark.helm

MODES = ("restart", "document", "resource")


def _render(helm: Path, tmp: Path, mode: str, *sets: str, **kw: Any) -> list[Manifest]:
    argv = (f"webhook.installation.reload={mode}", "operator.enabled=true", *sets)
    return documents(helm_template(helm, tmp, *argv, **kw).stdout)


def _container(docs: list[Manifest], deployment: str, name: str) -> Manifest:
    pod = one(docs, "Deployment", deployment)["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == name)


def _document(docs: list[Manifest], mode: str) -> str | None:
    """What the webhook reads as its document: the ConfigMap's file, or the resource's spec."""
    if mode == "resource":
        return json.dumps(one(docs, "DynamicConfigInstallation")["spec"])
    maps = [d for d in docs if d.get("kind") == "ConfigMap" and "installation.yaml" in d["data"]]
    return maps[0]["data"]["installation.yaml"] if maps else None


def _installation(docs: list[Manifest], mode: str) -> Installation:
    env = env_of(_container(docs, "dynamic-config-webhook", "webhook"))
    env = {k: v for k, v in env.items() if k.startswith("DYNAMIC_CONFIG_")}
    return parse_installation(merge_environment(env, _document(docs, mode), origin="rendered"))


@pytest.mark.parametrize("values", ["string", "map"])
def test_every_mode_admits_with_the_same_installation(
    values: str, helm_bin: Path, tmp_path: Path
) -> None:
    sets = TOGGLES["string-installation"] if values == "string" else ()
    extra = {"values": MAP_INSTALLATION} if values == "map" else {}
    installations = {
        mode: _installation(_render(helm_bin, tmp_path, mode, *sets, **extra), mode)
        for mode in MODES
    }
    assert installations["document"] == installations["restart"]
    assert installations["resource"] == installations["restart"]


def test_only_restart_rolls_the_webhook_on_the_document(helm_bin: Path, tmp_path: Path) -> None:
    annotations = {}
    for mode in MODES:
        docs = _render(helm_bin, tmp_path, mode, values=MAP_INSTALLATION)
        template = one(docs, "Deployment", "dynamic-config-webhook")["spec"]["template"]
        annotations[mode] = template["metadata"]["annotations"]
    assert "checksum/installation" in annotations["restart"]
    assert "checksum/installation" not in annotations["document"]
    assert "checksum/installation" not in annotations["resource"]


def test_document_mode_reloads_the_mounted_document_in_the_webhook_and_operator(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, "document", "webhook.installation.pollSeconds=3")
    webhook = env_of(_container(docs, "dynamic-config-webhook", "webhook"))
    operator = env_of(_container(docs, "dynamic-config-operator", "operator"))

    assert webhook["DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS"] == "3"
    assert "DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT" not in webhook, "a live default is no variable"
    assert "DYNAMIC_CONFIG_AGENT_IMAGE" in webhook, "the image needs a rollout in every mode"
    assert (
        operator["DYNAMIC_CONFIG_OPERATOR_INSTALLATION_FILE"]
        == (webhook["DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"])
    )
    assert "DYNAMIC_CONFIG_STORE_BUDGETS" not in operator
    pod = one(docs, "Deployment", "dynamic-config-operator")["spec"]["template"]["spec"]
    assert {
        "name": "installation",
        "configMap": {"name": "dynamic-config-webhook-installation"},
    } in (pod["volumes"])


def test_resource_mode_renders_the_resource_and_only_the_rules_a_follower_needs(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, "resource", values=MAP_INSTALLATION)
    resource = one(docs, "DynamicConfigInstallation")
    name = resource["metadata"]["name"]
    webhook = _container(docs, "dynamic-config-webhook", "webhook")
    operator = env_of(_container(docs, "dynamic-config-operator", "operator"))

    assert env_of(webhook)["DYNAMIC_CONFIG_WEBHOOK_INSTALLATION"] == name
    assert "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE" not in env_of(webhook)
    assert operator["DYNAMIC_CONFIG_OPERATOR_INSTALLATION"] == name
    assert not [d for d in docs if d.get("kind") == "ConfigMap" and "installation.yaml" in
                d.get("data", {})], "one source: no document beside the resource"  # fmt: skip
    pod = one(docs, "Deployment", "dynamic-config-webhook")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    role = one(docs, "ClusterRole", "dynamic-config-webhook-installation")
    assert role["rules"] == [{**rule, "resourceNames": [name]} for rule in RULES]
    events = one(docs, "Role", "dynamic-config-webhook-installation-events")
    assert events["metadata"]["namespace"] == EVENT_NAMESPACE
    assert events["rules"] == list(EVENT_RULES)
    binding = one(docs, "ClusterRoleBinding", "dynamic-config-webhook-installation")
    assert {s["name"] for s in binding["subjects"]} == {
        "dynamic-config-webhook", "dynamic-config-operator",
    }  # fmt: skip


@pytest.mark.parametrize("mode", ["document", "resource"])
def test_live_modes_render_objects_kubeconform_accepts(
    mode: str, helm_bin: Path, kubeconform: Kubeconform, tmp_path: Path
) -> None:
    argv = (f"webhook.installation.reload={mode}", "operator.enabled=true")
    rendered = helm_template(helm_bin, tmp_path, *argv, values=MAP_INSTALLATION).stdout

    assert_valid(kubeconform, rendered, tmp_path)


def test_an_unknown_reload_mode_fails_the_render(helm_bin: Path, tmp_path: Path) -> None:
    result = helm_template(helm_bin, tmp_path, "webhook.installation.reload=often", check=False)
    assert result.returncode != 0
    assert "restart" in result.stderr and "resource" in result.stderr
