"""The shipped CRD copies and the chart's ClusterRole agree with the code that uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf_k8s.operator.crds import crd_file_name, crd_manifests, crd_yaml
from dynconf_k8s.operator.rbac import RULES

REPO = Path(__file__).resolve().parents[4]
OPERATOR = Path(sys.executable).with_name("dynamic-config-operator")


@pytest.mark.parametrize("where", ["deploy/crds", "charts/dynamic-config/crds"])
def test_shipped_crds_equal_the_generator(where: str) -> None:
    directory = REPO / where
    expected = {crd_file_name(crd): crd_yaml(crd) for crd in crd_manifests()}
    shipped = {path.name: path.read_text() for path in directory.glob("dynamic-config.rs_*.yaml")}
    assert shipped == expected, (
        f"{where} drifted from the types; run `dynamic-config-operator --write-crds {where}`"
    )


def test_crds_flag_prints_the_three_crds_as_json_documents() -> None:
    out = subprocess.run(
        [str(OPERATOR), "--crds"], capture_output=True, text=True, check=True
    ).stdout
    documents = [json.loads(part) for part in out.split("\n---\n")]
    assert documents == crd_manifests()
    kinds = [(d["spec"]["names"]["kind"], d["spec"]["scope"]) for d in documents]
    assert kinds == [
        ("DynamicConfigClass", "Namespaced"),
        ("ClusterDynamicConfigClass", "Cluster"),
        ("DynamicConfigRender", "Namespaced"),
    ]
    render = documents[2]["spec"]["versions"][0]
    assert render["subresources"] == {"status": {}}
    assert documents[0]["spec"]["group"] == "dynamic-config.rs"
    assert render["name"] == "v1alpha1"


def _rules(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_chart_cluster_role_grants_exactly_what_the_code_uses(helm_bin: Path) -> None:
    rendered = subprocess.run(
        [
            str(helm_bin),
            "template",
            "t",
            str(REPO / "charts" / "dynamic-config"),
            "--set",
            "operator.enabled=true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    roles = [
        doc
        for doc in yaml.safe_load_all(rendered)
        if doc
        and doc.get("kind") == "ClusterRole"
        and doc["metadata"]["name"].endswith("-operator")
    ]
    assert len(roles) == 1, "the chart renders no operator ClusterRole"
    assert _rules(roles[0]["rules"]) == _rules(list(RULES))
