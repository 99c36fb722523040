"""``dynamic-config-webhook validate FILE…``: the admission decision without a cluster.

Each file is JSON or YAML, possibly several documents; Pods are judged as they are, and
Deployments, StatefulSets, ReplicaSets, DaemonSets, Jobs and CronJobs through their pod
template — a user validates what they apply. Each pod is wrapped in a review with uid
``validate`` and no namespace and judged by the same :func:`decide` admission uses, with the
process's own installation, so the reasons printed are the reasons the cluster would give.

A pod naming a ``dynamic-config.rs/class`` is judged against the DynamicConfigClass and
ClusterDynamicConfigClass documents among the files given (``--classes FILE`` adds files
that hold only classes, such as the platform's), the same way the poller would list them;
``--namespace NS`` judges every pod as if created in ``NS`` (else its own
``metadata.namespace``), which a namespaced class and a cluster class's allowlist need.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import yaml

from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.classes import ClassEntry, entries_from_lists

__all__ = ["STDIN", "classes_in", "pods_in", "read_documents", "run_validate", "split_args"]

USAGE = (
    "usage: dynamic-config-webhook validate <pod.yaml>...\n"
    "       options: --classes <classes.yaml> (repeatable), --namespace <ns>\n"
    "       a <pod.yaml> of - is read from stdin"
)
_CLASS_KINDS = {"DynamicConfigClass": 0, "ClusterDynamicConfigClass": 1}
_TEMPLATED = {
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "DaemonSet",
    "Job",
    "ReplicationController",
}


def pods_in(document: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(label, pod)`` for every pod a manifest carries (lists and templates included)."""
    if not isinstance(document, Mapping):
        return
    kind = document.get("kind")
    if not isinstance(kind, str):
        return
    name = _field(document, "metadata", "name")
    label = f"{kind}/{name}" if isinstance(name, str) and name else kind
    if kind.endswith("List"):
        items = document.get("items")
        for item in items if isinstance(items, list) else []:
            yield from pods_in(item)
    elif kind == "Pod":
        # Judged as written: a malformed pod is admission's to refuse, naming the field.
        yield label, document
    elif kind in _TEMPLATED:
        template = _field(document, "spec", "template")
        if isinstance(template, Mapping):
            yield label, template
    elif kind == "CronJob":
        template = _field(document, "spec", "jobTemplate", "spec", "template")
        if isinstance(template, Mapping):
            yield label, template


def _field(document: Mapping[str, Any], *path: str) -> Any:
    """``document[path…]``, or ``None`` where a step is missing or not a mapping."""
    value: Any = document
    for step in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def classes_in(documents: list[Any]) -> dict[tuple[str | None, str], ClassEntry]:
    """The class map the poller would build from these documents' classes."""
    lists: tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]] = ([], [])
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") in _CLASS_KINDS:
            lists[_CLASS_KINDS[document["kind"]]].append(document)
    return entries_from_lists(*lists)


def split_args(args: list[str]) -> tuple[list[str], list[str], str | None] | None:
    """``(paths, class_files, namespace)`` from the command line; None when it is malformed."""
    paths: list[str] = []
    class_files: list[str] = []
    namespace: str | None = None
    rest = iter(args)
    for arg in rest:
        if arg in ("--classes", "--namespace"):
            value = next(rest, None)
            if value is None:
                return None
            if arg == "--classes":
                class_files.append(value)
            else:
                namespace = value
        elif arg.startswith("--"):
            return None
        else:
            paths.append(arg)
    return paths, class_files, namespace


STDIN: Final = "-"
"""The file name that means the process's standard input (``kubectl exec -i … validate -``)."""


def read_documents(path: Path, stdin: TextIO | None = None) -> list[Any]:
    """Every document of a JSON or YAML file (``explain`` reads its files the same way);
    :data:`STDIN` reads ``stdin`` (default: the process's) to its end instead.
    """
    if str(path) == STDIN:
        text = (sys.stdin if stdin is None else stdin).read()
        return [d for d in yaml.safe_load_all(text) if d is not None]
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [json.loads(text)]
    return [d for d in yaml.safe_load_all(text) if d is not None]


def run_validate(
    paths: list[str],
    installation: Installation,
    out: TextIO,
    err: TextIO,
    *,
    class_files: Sequence[str] = (),
    namespace: str | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Judge every pod in ``paths`` (``-``: ``stdin``); 0 when none would be refused, else 1."""
    if not paths:
        err.write(USAGE + "\n")
        return 2
    total = refused = 0
    read: dict[str, list[Any]] = {}
    for raw in [*class_files, *paths]:
        try:
            read[raw] = read_documents(Path(raw), stdin)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            err.write(f"{raw}: cannot be read as JSON or YAML ({type(exc).__name__})\n")
            total += 1
            refused += 1
    classes = classes_in([document for documents in read.values() for document in documents])
    for raw in paths:
        if raw not in read:
            continue
        documents = read[raw]
        found = [pod for document in documents for pod in pods_in(document)]
        if not found:
            out.write(f"{raw}: no pod or pod template in this file\n")
        for label, pod in found:
            shown = raw if len(found) == 1 else f"{raw} ({label})"
            request: dict[str, Any] = {"uid": "validate", "object": pod}
            if namespace:
                request["namespace"] = namespace
            decision = decide({"request": request}, installation, classes)
            total += 1
            response = decision.response["response"]
            if decision.outcome == "refused":
                refused += 1
                status = response["status"]
                err.write(f"{shown}: refused ({status['reason']})\n  {status['message']}\n")
            elif decision.outcome == "patched":
                out.write(f"{shown}: allowed, and an agent would be injected\n")
                for warning in response.get("warnings", []):
                    out.write(f"  warning: {warning}\n")
            else:
                out.write(f"{shown}: allowed — nothing to inject\n")
    if refused:
        err.write(f"{refused} of {total} manifests would be refused\n")
        return 1
    return 0
