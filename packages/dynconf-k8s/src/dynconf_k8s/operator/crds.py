"""The CRD manifests, generated from the types in :mod:`dynconf_k8s.operator.types`.

``dynamic-config-operator --crds`` prints every shipped CRD (pretty JSON, documents separated
by ``\\n---\\n``, as the contract says: its three, then the installation); ``--write-crds
DIR`` writes the YAML copies shipped in ``deploy/crds/`` and ``charts/dynamic-config/crds/``
(``dynamic-config.rs_<plural>.yaml``), and a test fails when a shipped copy differs from what
the types generate.

Pydantic's JSON Schema is turned into a Kubernetes *structural* schema here: references are
inlined (CRDs accept no ``$ref``), optional fields lose their ``null`` branch (absent is how
Kubernetes spells "not set"), titles are dropped, and defaults stay so the API server applies
them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel

from dynconf_k8s.operator.types import (
    CLASS_KIND,
    CLUSTER_CLASS_KIND,
    GROUP,
    INSTALLATION_KIND,
    INSTALLATION_PLURAL,
    PLURALS,
    RENDER_KIND,
    VERSION,
    ClassSpec,
    ClusterClassSpec,
    InstallationSpec,
    InstallationStatus,
    RenderSpec,
    RenderStatus,
)

__all__ = [
    "crd_file_name",
    "crd_manifests",
    "crd_yaml",
    "crds_json",
    "installation_crd",
    "shipped_crds",
    "structural_schema",
    "write_crds",
]

_KEEP: Final = (
    "type", "format", "description", "default", "enum", "minimum",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
)  # fmt: skip


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model`` (by alias), refs inlined."""
    raw = model.model_json_schema(by_alias=True)
    return _structural(raw, raw.get("$defs", {}))


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in node:
        branches = [branch for branch in node["anyOf"] if branch.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError("a CRD field must have one non-null type")
        merged = _structural(branches[0], defs)
        merged.update({key: node[key] for key in _KEEP if key in node})
        if merged.get("default", ...) is None:
            del merged["default"]
        return merged
    out: dict[str, Any] = {key: node[key] for key in _KEEP if key in node}
    if node.get("type") == "object" and "properties" in node:
        out["properties"] = {
            name: _structural(child, defs) for name, child in node["properties"].items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])
    elif node.get("type") == "array":
        out["items"] = _structural(node.get("items", {}), defs)
    if "enum" in node and "type" not in out:
        out["type"] = "string"
    if out.get("default") == []:
        del out["default"]
    return out


def _crd(
    kind: str,
    scope: str,
    spec: type[BaseModel],
    status: type[BaseModel] | None,
    plural: str | None = None,
) -> dict[str, Any]:
    plural = plural or PLURALS[kind]
    properties: dict[str, Any] = {"spec": structural_schema(spec)}
    if status is not None:
        properties["status"] = structural_schema(status)
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": (spec.__doc__ or "").strip().splitlines()[0],
                "properties": properties,
                "required": ["spec"],
            }
        },
    }
    if status is not None:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "scope": scope,
            "versions": [version],
        },
    }


def crd_manifests() -> list[dict[str, Any]]:
    """The three CRDs, in the contract's order: class, cluster class, render."""
    return [
        _crd(CLASS_KIND, "Namespaced", ClassSpec, None),
        _crd(CLUSTER_CLASS_KIND, "Cluster", ClusterClassSpec, None),
        _crd(RENDER_KIND, "Namespaced", RenderSpec, RenderStatus),
    ]


def installation_crd() -> dict[str, Any]:
    """Ours, beside the contract's three: the cluster-scoped installation (status subresource)."""
    return _crd(
        INSTALLATION_KIND, "Cluster", InstallationSpec, InstallationStatus, INSTALLATION_PLURAL
    )


def shipped_crds() -> list[dict[str, Any]]:
    """Every CRD the chart and ``deploy/crds`` ship: the three, then the installation."""
    return [*crd_manifests(), installation_crd()]


def crds_json() -> str:
    """What ``--crds`` prints: each shipped CRD as pretty JSON, separated by ``\\n---\\n``."""
    return "\n---\n".join(json.dumps(crd, indent=2) for crd in shipped_crds()) + "\n"


def crd_file_name(crd: dict[str, Any]) -> str:
    """``dynamic-config.rs_<plural>.yaml``, the name a shipped copy carries."""
    return f"{GROUP}_{crd['spec']['names']['plural']}.yaml"


def crd_yaml(crd: dict[str, Any]) -> str:
    """One CRD as the YAML file shipped in ``deploy/crds/`` and the chart's ``crds/``."""
    body = yaml.safe_dump(
        crd, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True
    )
    return "# Generated by `dynamic-config-operator --write-crds`; do not edit.\n" + body


def write_crds(directory: Path) -> list[Path]:
    """Write every CRD into ``directory`` (created when missing); returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for crd in shipped_crds():
        path = directory / crd_file_name(crd)
        path.write_text(crd_yaml(crd), encoding="utf-8")
        written.append(path)
    return written
