"""Rendering and validating the chart and the kustomize trees, offline, for the chart tests."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.fixtures.kube import Kubeconform

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dynamic-config"
KUSTOMIZE = REPO / "deploy" / "kustomize"
CRD_DIRS = (CHART / "crds", REPO / "deploy" / "crds")
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
"""Any accidental download goes to a closed port instead of the network."""

THIRD_PARTY_KINDS = ("Certificate", "ServiceMonitor")
"""cert-manager's and prometheus-operator's kinds: no offline schema, so kubeconform skips them."""

Manifest = dict[str, Any]


def tool_env(scratch: Path) -> dict[str, str]:
    """An environment with helm's homes in ``scratch`` and no way out to the network."""
    return {
        **os.environ,
        **OFFLINE,
        "HELM_CACHE_HOME": str(scratch / "helm-cache"),
        "HELM_CONFIG_HOME": str(scratch / "helm-config"),
        "HELM_DATA_HOME": str(scratch / "helm-data"),
    }


def helm_template(
    helm: Path,
    scratch: Path,
    *sets: str,
    namespace: str = "dynamic-config",
    values: Mapping[str, Any] | None = None,
    flags: Sequence[str] = (),
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart with ``--set`` pairs, an optional values document and
    other ``helm template`` ``flags``."""
    argv = [str(helm), "template", "dc", str(CHART), "--namespace", namespace, *flags]
    for pair in sets:
        argv += ["--set", pair]
    if values is not None:
        path = scratch / "values-override.yaml"
        path.write_text(yaml.safe_dump(dict(values)))
        argv += ["--values", str(path)]
    result = subprocess.run(
        argv, capture_output=True, text=True, env=tool_env(scratch), timeout=120, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm template {' '.join(sets)} failed:\n{result.stderr}")
    return result


def documents(text: str) -> list[Manifest]:
    """The non-empty YAML documents of a multi-document stream."""
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]


def by_kind(docs: Iterable[Manifest], kind: str) -> list[Manifest]:
    return [doc for doc in docs if doc.get("kind") == kind]


def one(docs: Iterable[Manifest], kind: str, name: str | None = None) -> Manifest:
    matches = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def pod_specs(docs: Iterable[Manifest]) -> Iterator[tuple[str, Manifest]]:
    """``(kind/name, pod spec)`` of every workload."""
    for doc in docs:
        if doc.get("kind") in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            yield f"{doc['kind']}/{doc['metadata']['name']}", doc["spec"]["template"]["spec"]
        elif doc.get("kind") == "Pod":
            yield f"Pod/{doc['metadata']['name']}", doc["spec"]


def env_of(container: Manifest) -> dict[str, str]:
    """A container's literal environment (valueFrom entries map to "")."""
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _strict(schema: Any) -> Any:
    """A CRD schema with unknown fields refused (kubeconform's -strict for built-in kinds)."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_documents() -> list[Manifest]:
    """The CRDs the operator generated (``crds/`` of the chart, else ``deploy/crds``)."""
    for directory in CRD_DIRS:
        if directory.is_dir():
            found: list[Manifest] = []
            for path in sorted(directory.iterdir()):
                if path.suffix in (".json", ".yaml", ".yml"):
                    found += documents(path.read_text())
            if found:
                return found
    return []


def crd_schema_dir(scratch: Path) -> Path | None:
    """kubeconform schemas (``<kind>-<group>-<version>.json``) generated from the CRDs, if any."""
    crds = crd_documents()
    if not crds:
        return None
    out = scratch / "crd-schemas"
    out.mkdir(exist_ok=True)
    for crd in crds:
        spec = crd["spec"]
        group = spec["group"].split(".")[0]
        kind = spec["names"]["kind"].lower()
        for version in spec["versions"]:
            schema = _strict(version["schema"]["openAPIV3Schema"])
            properties = schema.setdefault("properties", {})
            properties.setdefault("apiVersion", {"type": "string"})
            properties.setdefault("kind", {"type": "string"})
            properties["metadata"] = {"type": "object"}
            (out / f"{kind}-{group}-{version['name']}.json").write_text(json.dumps(schema))
    return out


def kubeconform_check(
    kubeconform: Kubeconform, manifests: str, scratch: Path
) -> subprocess.CompletedProcess[str]:
    """Validate a stream strictly against the offline schemas (+ the CRDs' own schemas)."""
    argv = kubeconform.argv("-")
    crd_dir = crd_schema_dir(scratch)
    skip = list(THIRD_PARTY_KINDS)
    if crd_dir is not None:
        argv[1:1] = [
            "-schema-location",
            str(crd_dir) + "/{{ .ResourceKind }}{{ .KindSuffix }}.json",
        ]
    else:
        skip += ["DynamicConfigClass", "ClusterDynamicConfigClass", "DynamicConfigRender"]
    argv[1:1] = ["-skip", ",".join(skip)]
    return subprocess.run(
        argv,
        input=manifests,
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE},
        timeout=120,
        check=False,
    )


def assert_valid(kubeconform: Kubeconform, manifests: str, scratch: Path) -> None:
    result = kubeconform_check(kubeconform, manifests, scratch)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Invalid: 0" in result.stdout and "Errors: 0" in result.stdout, result.stdout
