"""``explain``: why a pod gets what it gets, from the very admission that decides it.

:func:`explain_pod` runs :func:`dynconf_k8s.webhook.admission.decide` — the function the
webhook serves — with a :class:`dynconf_k8s.contract.provenance.Provenance` record, and turns
the decision and the record into a report: each ``dynamic-config.rs/*`` key with its value,
the tier that answered (annotation, class, per-store, fleet, built-in), the pin or gate that
decided it, and then the containers, volumes and agent flags the patch adds, or the refusal
as kubectl prints it. Nothing is resolved here; this module only reads and renders.

The report never carries a credential: URLs lose their userinfo, environment values are
never shown (only their names and where they come from), ``agent-env`` shows names only.
It is what ``dynamic-config-webhook explain`` prints and what ``POST /explain`` returns.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import yaml

from dynconf.stores import redact_url_list
from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.contract.provenance import BUILT_IN, Origin, Provenance
from dynconf_k8s.contract.registry import FLEET_KNOBS, PREFIX, REGISTRY, annotation, split_key
from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.classes import ClassMap
from dynconf_k8s.webhook.validate import classes_in, pods_in, read_documents

__all__ = ["USAGE", "WEBHOOK_NAME", "explain_pod", "render_text", "run_explain"]

WEBHOOK_NAME: Final = "inject.dynamic-config.rs"
"""The webhook's name in the MutatingWebhookConfiguration (kubectl quotes it in a refusal)."""

USAGE: Final = (
    "usage: dynamic-config-webhook explain [--output text|json] [--namespace <ns>] "
    "[--classes <classes.yaml>]... <pod.yaml>..."
)
_HIDDEN: Final = "(hidden)"
_FLEET_VALUES: Final = {
    row.fleet_env: f"agent.defaults.{row.document_key}"
    for row in FLEET_KNOBS.values()
    if row.fleet_env and row.document_key
}
"""A fleet variable's chart value, so the report names what the installer wrote."""

Json = dict[str, Any]


def _shown(key: str, value: str) -> str:
    """A value fit to print: URLs without userinfo, ``agent-env`` values hidden."""
    if key == annotation("agent-env"):
        names = [pair.partition("=")[0].strip() for pair in value.split(",") if pair.strip()]
        return ", ".join(f"{name}={_HIDDEN}" for name in names)
    return redact_url_list(value) if "://" in value else value


def _setting(origin: Origin) -> str | None:
    """Where the installer wrote the value that answered: chart value and variable."""
    if origin.setting is None:
        return None
    if origin.tier == "class":
        return f'the class "{origin.setting}"'
    return _spelling(origin.setting)


def _spelling(setting: str) -> str:
    """An installation tier's name (``perStore.vault``, a fleet variable) as the installer
    writes it: the chart value, then the variable."""
    if setting.startswith("perStore."):
        return f"agent.defaults.{setting} (DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS)"
    chart = _FLEET_VALUES.get(setting)
    return f"{chart} ({setting})" if chart else setting


def _builtin_text(key: str) -> str:
    split = split_key(key) if key.startswith(PREFIX) else None
    row = REGISTRY.get(split[0]) if split else None
    return row.default if row is not None else "none"


def _entry(key: str, origin: Origin | None, text: str | None, gates: list[Json]) -> Json:
    if origin is None:
        origin = Origin(key, text, "annotation")
    value = origin.value
    entry: Json = {
        "key": key,
        "value": _shown(key, value) if value is not None else None,
        "tier": origin.tier,
        "from": _setting(origin),
        "pinned": origin.pinned,
        "overrides": _spelling(origin.overrides) if origin.overrides else None,
        "gates": gates,
        "decidedBy": "pin" if origin.pinned else ("gate" if gates else None),
        "note": origin.note,
    }
    if value is None and origin.tier == BUILT_IN:
        entry["default"] = _builtin_text(key)
    return entry


def _keys(annotations: Mapping[str, Any], record: Provenance) -> list[Json]:
    gates: dict[str, list[Json]] = {}
    for check in record.gates:
        detail: Json = {"gate": check.gate, "admitted": check.admitted}
        if check.name is not None:
            detail["name"] = check.name
        gates.setdefault(check.key, []).append(detail)
    ours = [k for k in annotations if isinstance(k, str) and k.startswith(PREFIX)]
    out = []
    for key in ours:
        text = annotations[key]
        out.append(_entry(key, record.origins.get(key), str(text), gates.get(key, [])))
    for key, origin in record.origins.items():
        if key not in annotations:
            out.append(_entry(key, origin, None, gates.get(key, [])))
    return out


def _env(entries: list[Mapping[str, Any]]) -> list[Json]:
    out = []
    for env in entries:
        source = env.get("valueFrom") or {}
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            where = f"secret {ref.get('name')}/{ref.get('key')}"
        elif "fieldRef" in source:
            where = f"field {source['fieldRef'].get('fieldPath')}"
        else:
            where = "value " + _HIDDEN
        out.append({"name": env.get("name"), "from": where})
    return out


def _args(args: list[str]) -> list[str]:
    return [redact_url_list(arg) if "://" in arg else arg for arg in args]


def _injection(pod: Mapping[str, Any], patch: list[Mapping[str, Any]]) -> Json:
    """What the patch adds: the agents (with their flags), the volumes, the mounts."""
    agents, volumes, mounted = [], [], []
    containers = (pod.get("spec") or {}).get("containers") or []
    for op in patch:
        path, value = str(op.get("path", "")), op.get("value")
        if path == "/spec/volumes/-" and isinstance(value, Mapping):
            volumes.append(value.get("name"))
        elif path.endswith("/volumeMounts/-") and path.startswith("/spec/containers/"):
            index = int(path.split("/")[3])
            mounted.append({"container": containers[index].get("name"),
                            "mountPath": value.get("mountPath") if value else None})  # fmt: skip
        elif isinstance(value, Mapping) and "args" in value and "image" in value:
            agents.append(
                {
                    "container": value.get("name"),
                    "list": path.split("/")[2],
                    "watching": "--watch" in value["args"],
                    "image": value.get("image"),
                    "args": _args(list(value["args"])),
                    "env": _env(list(value.get("env") or [])),
                    "mounts": [m.get("mountPath") for m in value.get("volumeMounts") or []],
                }
            )
    return {"agents": agents, "volumes": volumes, "mounts": mounted}


def _kubectl(refusal: Mapping[str, Any], filename: str) -> str:
    """The line ``kubectl apply -f`` prints for this refusal."""
    return (
        f"Error from server ({refusal['reason']}): error when creating {json.dumps(filename)}: "
        f'admission webhook "{WEBHOOK_NAME}" denied the request: {refusal["message"]}'
    )


def explain_pod(
    pod: Mapping[str, Any],
    installation: Installation,
    *,
    namespace: str | None = None,
    classes: ClassMap | None = None,
    filename: str = "pod.yaml",
) -> Json:
    """The report for one pod, judged exactly as admission judges it.

    ``namespace`` stands in for the request's (else the pod's ``metadata.namespace``); the
    gates and classes answer for it. ``filename`` is what kubectl would name in a refusal.
    """
    record = Provenance()
    request: Json = {"uid": "explain", "object": pod}
    if namespace:
        request["namespace"] = namespace
    decision = decide({"request": request}, installation, classes, record)
    response = decision.response["response"]
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    annotations = (metadata or {}).get("annotations") if isinstance(metadata, Mapping) else None
    report: Json = {
        "pod": decision.pod or None,
        "namespace": decision.namespace or None,
        "outcome": decision.outcome,
        "keys": _keys(annotations if isinstance(annotations, Mapping) else {}, record),
        "warnings": list(decision.warnings),
        "refusal": None,
        "injection": None,
    }
    if decision.outcome == "refused":
        status = response["status"]
        refusal = {"reason": status["reason"], "code": status["code"],
                   "message": status["message"]}  # fmt: skip
        refusal["kubectl"] = _kubectl(refusal, filename)
        report["refusal"] = refusal
    elif decision.outcome == "patched":
        patch = json.loads(base64.b64decode(response["patch"]))
        report["injection"] = _injection(pod, patch)
    return report


def _describe(entry: Mapping[str, Any]) -> str:
    parts = [entry["tier"]]
    if entry["from"]:
        parts[0] += f": {entry['from']}"
    if entry["pinned"]:
        parts.append("pinned")
    if entry["overrides"]:
        parts.append(f"overrides {entry['overrides']}")
    for gate in entry["gates"]:
        name = f" {gate['name']}" if "name" in gate else ""
        parts.append(f"{gate['gate']}{name} {'admits' if gate['admitted'] else 'refuses'}")
    if entry["note"]:
        parts.append(entry["note"])
    return "; ".join(parts)


def render_text(report: Mapping[str, Any], label: str) -> str:
    """The report for a person: one line per key, then what the injection adds."""
    outcome = report["outcome"]
    head = {
        "patched": "admitted, and the webhook would inject:",
        "refused": "refused",
        "skipped": "admitted untouched — nothing to inject",
    }[outcome]
    lines = [f"{label}: {head}"]
    if report["namespace"]:
        lines.append(f"  namespace: {report['namespace']}")
    keys = report["keys"]
    if keys:
        lines.append("  keys (value  [tier: where; what decided it]):")
        width = max(len(entry["key"]) for entry in keys)
        for entry in keys:
            value = entry["value"]
            shown = _quoted_value(value) if value is not None else f"({entry['default']})"
            lines.append(f"    {entry['key']:<{width}}  {shown}  [{_describe(entry)}]")
    injection = report["injection"]
    if injection:
        for agent in injection["agents"]:
            kind = "watching" if agent["watching"] else "init"
            lines.append(f"  {agent['container']} ({kind}, in {agent['list']}): {agent['image']}")
            lines.append("    flags: " + " ".join(_quoted(arg) for arg in agent["args"]))
            for env in agent["env"]:
                lines.append(f"    env {env['name']}: {env['from']}")
        if injection["volumes"]:
            lines.append("  volumes added: " + ", ".join(injection["volumes"]))
        for mount in injection["mounts"]:
            lines.append(f"  container {mount['container']} mounts {mount['mountPath']}")
    for warning in report["warnings"]:
        lines.append(f"  warning: {warning}")
    refusal = report["refusal"]
    if refusal:
        lines.append(f"  {refusal['kubectl']}")
    return "\n".join(lines) + "\n"


def _quoted_value(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _quoted(arg: str) -> str:
    return json.dumps(arg, ensure_ascii=False) if any(c in arg for c in " \t\n\"'") else arg


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dynamic-config-webhook explain", add_help=False)
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    parser.add_argument("--namespace", "-n")
    parser.add_argument("--classes", action="append", default=[])
    parser.add_argument("paths", nargs="*")
    return parser


def run_explain(args: Sequence[str], installation: Installation, out: TextIO, err: TextIO) -> int:
    """``explain`` over files; 0 when no pod would be refused, 1 when one would, 2 on usage."""
    try:
        options, unknown = _parser().parse_known_args(list(args))
    except SystemExit:
        err.write(USAGE + "\n")
        return 2
    if unknown or not options.paths:
        err.write(USAGE + "\n")
        return 2
    read: dict[str, list[Any]] = {}
    failed = False
    for raw in [*options.classes, *options.paths]:
        try:
            read[raw] = read_documents(Path(raw))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            err.write(f"{raw}: cannot be read as JSON or YAML ({type(exc).__name__})\n")
            failed = True
    classes = classes_in([document for documents in read.values() for document in documents])
    reports: list[Json] = []
    texts: list[str] = []
    for raw in options.paths:
        found = [pod for document in read.get(raw, []) for pod in pods_in(document)]
        if raw in read and not found:
            err.write(f"{raw}: no pod or pod template in this file\n")
            failed = True
        for label, pod in found:
            report = explain_pod(
                pod, installation, namespace=options.namespace, classes=classes, filename=raw
            )
            report["file"] = raw
            report["manifest"] = label
            reports.append(report)
            texts.append(render_text(report, raw if len(found) == 1 else f"{raw} ({label})"))
    if options.output == "json":
        out.write(json.dumps(reports, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write("\n".join(texts))
    refused = any(report["outcome"] == "refused" for report in reports)
    return 1 if refused or failed else 0
