"""The shipped CRD copies and the chart's ClusterRole agree with the code that uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf_k8s.operator.crds import crd_file_name, crd_yaml, shipped_crds
from dynconf_k8s.operator.podaudit import (
    INTERVAL_ENV,
    POD_AUDIT_ENV,
    WEBHOOK_CONFIGURATION_ENV,
    pod_audit_settings,
)
from dynconf_k8s.operator.rbac import AUDIT_RULES, RESTART_RULES, RULES
from dynconf_k8s.operator.restarts import SettingsError

REPO = Path(__file__).resolve().parents[4]
OPERATOR = Path(sys.executable).with_name("dynamic-config-operator")


@pytest.mark.parametrize("where", ["deploy/crds", "charts/dynamic-config/crds"])
def test_shipped_crds_equal_the_generator(where: str) -> None:
    directory = REPO / where
    expected = {crd_file_name(crd): crd_yaml(crd) for crd in shipped_crds()}
    shipped = {path.name: path.read_text() for path in directory.glob("dynamic-config.rs_*.yaml")}
    assert shipped == expected, (
        f"{where} drifted from the types; run `dynamic-config-operator --write-crds {where}`"
    )


def test_crds_flag_prints_every_shipped_crd_as_json_documents() -> None:
    out = subprocess.run(
        [str(OPERATOR), "--crds"], capture_output=True, text=True, check=True
    ).stdout
    documents = [json.loads(part) for part in out.split("\n---\n")]
    assert documents == shipped_crds()
    kinds = [(d["spec"]["names"]["kind"], d["spec"]["scope"]) for d in documents]
    assert kinds == [
        ("DynamicConfigClass", "Namespaced"),
        ("ClusterDynamicConfigClass", "Cluster"),
        ("DynamicConfigRender", "Namespaced"),
        ("DynamicConfigInstallation", "Cluster"),
    ]
    render = documents[2]["spec"]["versions"][0]
    assert render["subresources"] == {"status": {}}
    assert documents[0]["spec"]["group"] == "dynamic-config.rs"
    assert render["name"] == "v1alpha1"


def test_crds_flag_prints_what_the_chart_and_deploy_ship() -> None:
    out = subprocess.run(
        [str(OPERATOR), "--crds"], capture_output=True, text=True, check=True
    ).stdout
    printed = {crd_file_name(json.loads(part)) for part in out.split("\n---\n")}
    shipped = {path.name for path in (REPO / "deploy/crds").glob("dynamic-config.rs_*.yaml")}
    assert printed == shipped


def _rules(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _operator(helm_bin: Path, *sets: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The chart's operator ClusterRole and its container's literal env, rendered by helm."""
    argv = [str(helm_bin), "template", "t", str(REPO / "charts" / "dynamic-config")]
    for value in ("operator.enabled=true", *sets):
        argv += ["--set", value]
    rendered = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    roles = [
        doc
        for doc in docs
        if doc.get("kind") == "ClusterRole" and doc["metadata"]["name"].endswith("-operator")
    ]
    assert len(roles) == 1, "the chart renders no operator ClusterRole"
    (deployment,) = [
        doc
        for doc in docs
        if doc.get("kind") == "Deployment" and doc["metadata"]["name"].endswith("-operator")
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    return roles[0], env


def test_chart_cluster_role_grants_exactly_what_the_code_uses(helm_bin: Path) -> None:
    role, env = _operator(helm_bin)
    assert _rules(role["rules"]) == _rules([*RULES, *AUDIT_RULES])  # the pod audit is on
    assert not any(name.startswith("DYNAMIC_CONFIG_OPERATOR_RESTART") for name in env)


def test_chart_pod_audit_reads_only_its_own_webhook_registration(helm_bin: Path) -> None:
    role, env = _operator(helm_bin, "operator.podAudit.intervalSeconds=45s")

    (registration,) = [
        rule for rule in role["rules"] if "mutatingwebhookconfigurations" in rule["resources"]
    ]
    assert registration["resourceNames"] == ["dynamic-config"]
    assert {name: env[name] for name in env if "POD_AUDIT" in name} == {INTERVAL_ENV: "45s"}
    assert env[WEBHOOK_CONFIGURATION_ENV] == "dynamic-config"
    assert pod_audit_settings(env) is not None


def test_chart_pod_audit_switched_off_grants_no_pod_rule_and_says_so(helm_bin: Path) -> None:
    role, env = _operator(helm_bin, "operator.podAudit.enabled=false")

    assert _rules(role["rules"]) == _rules(list(RULES))
    assert env[POD_AUDIT_ENV] == "false"
    assert WEBHOOK_CONFIGURATION_ENV not in env
    assert pod_audit_settings(env) is None


def test_pod_audit_settings_are_on_by_default_and_refuse_a_bad_interval() -> None:
    settings = pod_audit_settings({})
    assert settings is not None
    assert (settings.interval, settings.registration) == (30.0, None)
    with pytest.raises(SettingsError, match=INTERVAL_ENV):
        pod_audit_settings({INTERVAL_ENV: "soon"})
    with pytest.raises(SettingsError, match=POD_AUDIT_ENV):
        pod_audit_settings({POD_AUDIT_ENV: "yes"})


def test_chart_restarts_add_the_workload_rules_and_the_settings(helm_bin: Path) -> None:
    role, env = _operator(
        helm_bin,
        "operator.restarts.enabled=true",
        "operator.restarts.minIntervalSeconds=90",
        "operator.restarts.settleSeconds=2m",
    )

    assert _rules(role["rules"]) == _rules([*RULES, *RESTART_RULES, *AUDIT_RULES])
    assert {name: env[name] for name in env if "RESTART" in name} == {
        "DYNAMIC_CONFIG_OPERATOR_RESTARTS": "true",
        "DYNAMIC_CONFIG_OPERATOR_RESTART_MIN_INTERVAL": "90",
        "DYNAMIC_CONFIG_OPERATOR_RESTART_SETTLE": "2m",
    }


def test_chart_refuses_a_restart_interval_that_is_not_a_length_of_time(helm_bin: Path) -> None:
    argv = [str(helm_bin), "template", "t", str(REPO / "charts" / "dynamic-config")]
    for value in ("operator.enabled=true", "operator.restarts.minIntervalSeconds=soon"):
        argv += ["--set", value]
    result = subprocess.run(argv, capture_output=True, text=True)

    assert result.returncode != 0
    assert "minIntervalSeconds" in result.stderr
