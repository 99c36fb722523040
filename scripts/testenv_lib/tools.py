"""Tools the chart, CSI, alert and release tests run: helm, kubeconform, csi-sanity, promtool,
kube schemas, crane (the loopback OCI registry) and cosign (signatures).

Each tool is ``go install``ed from the Go module proxy at a pinned version into
``<cache>/tools/<name>-<version>/`` and linked as ``<cache>/bin/<name>``; a present versioned
binary is never rebuilt, and bumping a version below installs the new one beside the old.

kubeconform normally downloads JSON schemas from a public host, which tests here must never reach.
``kube-schemas`` instead generates them from the test apiserver's own ``/openapi/v2`` document
(so they match the Kubernetes release we test against, and include any CRDs installed at the
time), in kubeconform's directory layout, cached per Kubernetes version.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import Context, TestenvError, log, stop_pids


@dataclass(frozen=True)
class GoTool:
    """One ``go install``able command at a pinned version."""

    name: str
    package: str
    version: str
    ldflags: str = "-s -w"
    tags: str = ""
    """Go build tags (``-tags``), e.g. to leave out parts a test never runs."""
    go: str = "1.25"
    """The ``go`` line of the tool's go.mod at ``version``: the oldest toolchain that builds it
    (``GOTOOLCHAIN=local`` refuses an older one rather than fetching a newer)."""


HELM = GoTool(
    "helm",
    "helm.sh/helm/v3/cmd/helm",
    "v3.22.0",
    # as helm's own Makefile does: the exact version, and the Kubernetes version its client-go
    # (v0.37) speaks as the default `.Capabilities.KubeVersion` (otherwise v1.20)
    "-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0"
    " -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    " -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1"
    " -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
    " -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1"
    " -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37",
    go="1.26.0",
)
KUBECONFORM = GoTool(
    "kubeconform",
    "github.com/yannh/kubeconform/cmd/kubeconform",
    "v0.7.0",
    "-s -w -X main.version=v0.7.0",
    go="1.24",
)
CSI_SANITY = GoTool(
    "csi-sanity",
    "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity",
    "v5.4.0",
    "-s -w -X main.VERSION=v5.4.0",
    go="1.23.0",
)
PROMTOOL = GoTool(
    "promtool",
    "github.com/prometheus/prometheus/cmd/promtool",
    # Prometheus v3.16.0: the v3 tags are published as Go module versions v0.3XX.y (the module
    # path has no /v3 suffix); its go.mod has no replace directives, so `go install @version` works
    "v0.316.0",
    "-s -w -X github.com/prometheus/common/version.Version=3.16.0"
    " -X github.com/prometheus/common/version.Branch=HEAD",
    # without the cloud service-discovery plugins (AWS, Azure, GCE, ... SDKs): `test rules` and
    # `check rules` need none, and they are most of a cold build (45 min -> see docs/testing.md)
    tags="remove_all_sd",
    go="1.26.7",
)
"""promtool for ``promtool test rules`` on deploy/observability's alert rules."""
TOOLS = {tool.name: tool for tool in (HELM, KUBECONFORM, CSI_SANITY, PROMTOOL)}


def tool_path(ctx: Context, name: str) -> Path:
    """The stable path of an installed tool (``<cache>/bin/<name>``)."""
    return ctx.cache / "bin" / name


def install_tool(ctx: Context, tool: GoTool) -> Path:
    """``go install`` one tool into its versioned directory and point ``<cache>/bin`` at it."""
    from .kube import go_parallelism, run_go

    versioned_dir = ctx.cache / "tools" / f"{tool.name}-{tool.version}"
    binary = versioned_dir / tool.name
    if not binary.is_file():
        log(f"go install {tool.package}@{tool.version}")
        took = run_go(
            ctx,
            ["install", "-p", go_parallelism(), "-ldflags", tool.ldflags,
             *(["-tags", tool.tags] if tool.tags else []), f"{tool.package}@{tool.version}"],
            cwd=ctx.cache,
            log_path=versioned_dir.parent / f"{tool.name}-{tool.version}.build.log",
            extra_env={"GOBIN": str(versioned_dir)},
        )  # fmt: skip
        if not binary.is_file():
            raise TestenvError(f"go install succeeded but {binary} is missing")
        size = binary.stat().st_size
        info = {"version": tool.version, "seconds": round(took, 1), "bytes": size}
        (versioned_dir / "build.json").write_text(json.dumps(info) + "\n")
        log(f"built {tool.name} {tool.version} in {took:.0f} s ({size / 2**20:.0f} MiB)")
    link = tool_path(ctx, tool.name)
    link.parent.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and link.resolve() == binary.resolve()):
        link.unlink(missing_ok=True)
        link.symlink_to(binary)
    return link


# ---------------------------------------------------------------------------- schemas
SCHEMA_ROOT = "kube-schemas"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
SCHEMA_KEYWORDS_ONE = ("additionalProperties", "items", "not")
SCHEMA_KEYWORDS_LIST = ("allOf", "anyOf", "oneOf")
SCHEMA_KEYWORDS_MAP = ("properties", "patternProperties")


def schemas_dir(ctx: Context) -> Path:
    """Where the schemas of the pinned Kubernetes version live (built-in kinds only)."""
    from .kube import k8s_version

    return ctx.cache / SCHEMA_ROOT / k8s_version()


def schema_location(root: Path) -> str:
    """The ``-schema-location`` template for a schema tree written by :func:`write_schemas`."""
    return str(root) + "/standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"


def file_name(kind: str, group: str, version: str) -> str:
    """kubeconform's name for a kind (``registry.schemaPath``): ``deployment-apps-v1.json``.

    Only the first label of the group is kept, lower-cased (``rbac.authorization.k8s.io/v1`` ->
    ``-rbac-v1``); the core group has none (``configmap-v1.json``).
    """
    first_label = group.split(".", maxsplit=1)[0].lower()
    suffix = f"-{first_label}-{version.lower()}" if group else f"-{version.lower()}"
    return f"{kind.lower()}{suffix}.json"


def _convert(node: Any, *, strict: bool) -> Any:
    """Turn one OpenAPI v2 schema node into JSON Schema as Kubernetes objects really are written.

    - ``format: int-or-string`` (ports, maxSurge) accepts an integer or a string;
    - optional fields with a type also accept ``null`` (templates often render ``key: null``,
      which the apiserver treats as absent);
    - with ``strict``, objects with declared properties refuse unknown ones, which is what
      kubeconform ``-strict`` selects.
    Only schema-valued keywords are walked, so a property named ``properties`` or ``format``
    (CRD's JSONSchemaProps has both) is never mistaken for a keyword.
    """
    if not isinstance(node, dict):
        return node
    if node.get("format") == "int-or-string":
        out: dict[str, Any] = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        if "description" in node:
            out["description"] = node["description"]
        return out
    out = dict(node)
    for key in SCHEMA_KEYWORDS_ONE:
        if isinstance(out.get(key), dict):
            out[key] = _convert(out[key], strict=strict)
    for key in SCHEMA_KEYWORDS_LIST:
        if isinstance(out.get(key), list):
            out[key] = [_convert(item, strict=strict) for item in out[key]]
    if isinstance(out.get("items"), list):
        out["items"] = [_convert(item, strict=strict) for item in out["items"]]
    for key in SCHEMA_KEYWORDS_MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: _convert(sub, strict=strict) for name, sub in out[key].items()}
    if isinstance(out.get("properties"), dict):
        required = set(out.get("required", []))
        for name, sub in out["properties"].items():
            if name not in required and isinstance(sub, dict) and isinstance(sub.get("type"), str):
                sub["type"] = [sub["type"], "null"]
        if (
            strict
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
    return out


def _refs(node: Any, found: set[str]) -> None:
    """Collect every ``#/definitions/X`` name referenced anywhere in ``node``."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            found.add(ref.removeprefix("#/definitions/"))
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _closure(name: str, definitions: dict[str, Any]) -> list[str]:
    """The definitions ``name`` needs, transitively (itself excluded)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        found: set[str] = set()
        _refs(definitions[todo.pop()], found)
        for ref in found - seen:
            if ref in definitions:
                seen.add(ref)
                todo.append(ref)
    seen.discard(name)
    return sorted(seen)


def write_schemas(openapi: dict[str, Any], root: Path) -> int:
    """Write kubeconform's layout for every kind in an OpenAPI v2 document; returns files written.

    Each file is standalone: the kind's schema plus a ``definitions`` section holding exactly
    the definitions it references, so local ``$ref``s resolve and recursive types
    (JSONSchemaProps) need no unrolling.  ``root/standalone`` and ``root/standalone-strict``
    match :func:`schema_location`.
    """
    raw = openapi.get("definitions")
    if not isinstance(raw, dict) or not raw:
        raise TestenvError("the OpenAPI document has no definitions (is it /openapi/v2?)")
    definitions: dict[str, Any] = copy.deepcopy(raw)
    if QUANTITY in definitions:
        # "500m" or 2: the apiserver accepts both spellings of a quantity
        definitions[QUANTITY] = {
            "oneOf": [{"type": "string"}, {"type": "number"}],
            "description": definitions[QUANTITY].get("description", ""),
        }
    written = 0
    for strict, sub in ((False, "standalone"), (True, "standalone-strict")):
        converted = {name: _convert(schema, strict=strict) for name, schema in definitions.items()}
        out_dir = root / sub
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, schema in sorted(definitions.items()):
            gvks = (
                schema.get("x-kubernetes-group-version-kind") if isinstance(schema, dict) else None
            )
            if not gvks:
                continue
            document = dict(converted[name])
            needed = _closure(name, definitions)
            if needed:
                document["definitions"] = {ref: converted[ref] for ref in needed}
            text = json.dumps(document, indent=1, sort_keys=True) + "\n"
            for gvk in gvks:
                path = out_dir / file_name(gvk["kind"], gvk.get("group", ""), gvk["version"])
                # meta/v1 kinds (DeleteOptions, WatchEvent) list every group; the first wins
                if not path.exists():
                    path.write_text(text)
                    written += 1
    return written


def ensure_schemas_from(ctx: Context, server: str, certs: Path) -> Path:
    """Generate the cached schemas from a running test apiserver, unless already there."""
    from .kube import admin_get

    root = schemas_dir(ctx)
    if (root / ".done").is_file():
        return root
    log(f"generating kubeconform schemas from {server}/openapi/v2")
    openapi = json.loads(admin_get(server, certs, "/openapi/v2", timeout=60))
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".schemas-", dir=root.parent))
    try:
        count = write_schemas(openapi, tmp)
        (tmp / "openapi-v2.json").write_text(json.dumps(openapi, sort_keys=True))
        (tmp / ".done").write_text(f"{count}\n")
        if root.exists() and not (root / ".done").is_file():
            shutil.rmtree(root)  # an interrupted earlier attempt
        try:
            tmp.rename(root)
        except OSError:
            # another start finished first: its identical tree is kept
            if not (root / ".done").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {count} kubeconform schemas to {root}")
    return root


def install_kube_schemas(ctx: Context) -> None:
    """Schemas from a throwaway control plane (or the running one), so later runs need none."""
    if (schemas_dir(ctx) / ".done").is_file():
        return
    from .kube import install_kube, start_control_plane

    published = ctx.published("kube")
    if published.get("DYNCONF_TEST_KUBE_APISERVER"):
        certs = Path(published["DYNCONF_TEST_KUBE_CA"]).parent
        ensure_schemas_from(ctx, published["DYNCONF_TEST_KUBE_APISERVER"], certs)
        return
    install_kube(ctx)
    scratch = Context(
        cache=ctx.cache, run=Path(tempfile.mkdtemp(prefix="kube-schemas-", dir=ctx.cache))
    )
    try:
        start_control_plane(scratch, controller_manager=False)
    finally:
        pids = {p.stem: int(p.read_text()) for p in (scratch.run / "pids").glob("*.pid")}
        stop_pids(pids)
        shutil.rmtree(scratch.run, ignore_errors=True)
    if not (schemas_dir(ctx) / ".done").is_file():
        raise TestenvError("the throwaway control plane started but wrote no schemas")


def _installer(tool: GoTool) -> Callable[[Context], None]:
    def install(ctx: Context) -> None:
        install_tool(ctx, tool)

    return install


KUSTOMIZE = GoTool(
    "kustomize",
    "sigs.k8s.io/kustomize/kustomize/v5",
    "v5.8.1",
    # what `kustomize version` prints; the chart tests render deploy/kustomize/* with it offline
    "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v5.8.1",
    go="1.24.0",
)
"""kustomize for the deploy/kustomize base and overlays (the tests never need kubectl)."""

CRANE = GoTool(
    "crane",
    "github.com/google/go-containerregistry/cmd/crane",
    "v0.22.1",
    "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=v0.22.1",
    go="1.25.0",
)
"""crane, for ``crane registry serve`` (the loopback OCI registry) and ``crane push``."""
COSIGN = GoTool(
    "cosign",
    "github.com/sigstore/cosign/v2/cmd/cosign",
    # v2, not v3: v3 signs through a signing config fetched from the public TUF root by
    # default; v2's `--key … --tlog-upload=false` and `--insecure-ignore-tlog` need no network
    "v2.6.5",
    "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=v2.6.5"
    " -X sigs.k8s.io/release-utils/version.gitTreeState=clean",
    go="1.25.0",
)
"""cosign, for the release's offline-key signatures and SBOM attestations. Built as upstream
ships it: a main of our own without the four KMS providers (AWS, Azure, GCP, Vault) was tried
and saves about 7 % of the packages (1,754 -> 1,624), 0.1 GB of the 1.8 GB of modules and 6.5 MB
of the binary, but no build time that a loaded machine could measure (docs/testing.md)."""


def start_registry(ctx: Context) -> dict[str, str]:
    """``crane registry serve`` on 127.0.0.1 with its blobs on this run's disk.

    The registry keeps manifests in memory and blobs under ``data/registry``; both go with the
    process (``stop``). Plain HTTP on loopback: helm takes ``--plain-http``, and cosign, crane
    and containerd speak HTTP to a loopback registry by default.
    """
    crane = install_tool(ctx, CRANE)
    port = ctx.free_ports(1)[0]
    disk = ctx.data_dir("registry", fresh=True)
    ctx.spawn("registry", [str(crane), "registry", "serve", "--address", f"127.0.0.1:{port}",
                           "--disk", str(disk)])  # fmt: skip
    ctx.wait_http(f"http://127.0.0.1:{port}/v2/", 30, proc="registry")
    return {"DYNCONF_TEST_REGISTRY": f"127.0.0.1:{port}"}


INSTALLERS: dict[str, Callable[[Context], None]] = {
    **{name: _installer(tool) for name, tool in TOOLS.items()},
    "kube-schemas": install_kube_schemas,
    "kustomize": _installer(KUSTOMIZE),
    "crane": _installer(CRANE),
    "cosign": _installer(COSIGN),
}
ALL_TOOLS: tuple[GoTool, ...] = (*TOOLS.values(), KUSTOMIZE, CRANE, COSIGN)
"""Every tool the testenv ``go install``s (the doctor takes the newest Go any of them needs)."""
SLOW: dict[str, int] = {
    "kube-schemas": 20,
    "helm": 30,  # the e2e ladder installs the chart: before the node and the images
    "crane": 52,  # the release leg (tests/e2e/test_release.py): after the images
    "cosign": 55,
    "kustomize": 60,
    "csi-sanity": 70,
    "promtool": 80,
}
"""Ranks in the background worker's order (kubeconform stays in the foreground: seconds)."""
SERVERS: dict[str, Callable[[Context], dict[str, str]]] = {"registry": start_registry}
NEEDS: dict[str, list[str]] = {"registry": ["crane"]}
OPT_IN: list[str] = ["crane", "cosign"]
"""Only the registry test and the release leg use them, and the leg needs the images: built with
``DYNCONF_E2E=1``."""
GATED: dict[str, str] = {"cosign": "DYNCONF_RELEASE"}
"""``DYNCONF_RELEASE=0`` leaves cosign out of a bare install (and the release leg out of the
run), for a machine that runs the rest of the ladder only."""
