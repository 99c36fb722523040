"""``dynconf explain | check | diff``: a running service's configuration, seen from a shell.

A shell cannot reach into the service's memory, so these commands work from the two things
a service built on :class:`~dynconf.config.DynamicConfig` leaves where an operator can read
them:

* **its sources** — the very ``DynamicConfig`` the service builds, named by
  ``--model module:attr`` (a ``DynamicConfig`` object, a ``@dynamic_config`` class, or a
  model class with ``--spec FILE`` for the sources), read again now: the same files and
  *this shell's* environment (run it where the service runs, e.g. ``kubectl exec``);
* **its snapshot file** — the last-known-good cache the service rewrites after every
  install from its sources (``cache(path, mode)``), which is what it is running on.

``explain PATH`` says which layer supplies a path now and whether the running snapshot
agrees; ``check`` says whether a reload now would install (every refused field with the
layer that supplied it, every key the model does not declare); ``diff`` lists the leaf paths
where a fresh load differs from the running snapshot. Values are never printed unless
``--show-values`` asks, and a secret path is ``***`` even then.

Exit codes: 0 — nothing to report; 1 — a problem or a difference (the answer the operator
asked for); 2 — the command could not run as asked (flags, a ``--model`` that does not
import, a snapshot file that is missing or is not a cache).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dynconf.cache import CacheDrift, CacheMode, LastKnownGood, Stored
from dynconf.config import DynamicConfig
from dynconf.document import Document, Value, get_path, split_path
from dynconf.errors import DynconfError
from dynconf.resolve import MASK

__all__ = ["EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "Answer", "Target", "UsageError", "run"]

EXIT_OK: Final = 0
EXIT_PROBLEM: Final = 1
EXIT_USAGE: Final = 2


class UsageError(Exception):
    """The command cannot run as asked (exit 2); the message names the flag and the fix."""


@dataclass(frozen=True)
class Answer:
    """One command's result: the exit code, the answer as data (``--json``) and as text."""

    code: int
    data: dict[str, Any]
    text: str


@dataclass(frozen=True)
class Target:
    """What the commands look at: the service's configuration, and its snapshot file."""

    config: DynamicConfig[Any]
    snapshot: LastKnownGood | None


def _import(reference: str) -> Any:
    module_name, colon, attribute = reference.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(
            f"--model takes module:attribute (such as myapp.settings:config), not {reference!r}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the service's own modules
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as error:  # the user's module: any failure is a usage answer
        raise UsageError(
            f"--model {reference}: the module {module_name} cannot be imported "
            f"({type(error).__name__}); run from the service's directory or set PYTHONPATH"
        ) from None
    for name in attribute.split("."):
        try:
            found = getattr(found, name)
        except AttributeError:
            raise UsageError(
                f"--model {reference}: {module_name} has no attribute `{attribute}`; name "
                "a DynamicConfig, a @dynamic_config class or a model class"
            ) from None
    return found


def target_from(
    model: str | None, spec: Path | None, snapshot: Path | None, secrets: list[str]
) -> Target:
    """Build the target from the flags: ``--model`` brings a whole configuration (a
    ``DynamicConfig`` or a decorated class) or only a model for ``--spec``'s sources."""
    found = _import(model) if model is not None else None
    config = found if isinstance(found, DynamicConfig) else getattr(found, "config", None)
    if isinstance(config, DynamicConfig):
        if spec is not None:
            raise UsageError(
                f"--model {model} already names its sources; drop --spec, or name a plain "
                "model class"
            )
        if secrets:
            raise UsageError("--secret is for --spec; the model already says what is secret")
    elif spec is None:
        what = "" if model is None else f"{model} has no sources of its own; "
        raise UsageError(
            f"{what}name the service's configuration with --model module:config (a "
            "DynamicConfig or a @dynamic_config class), or give --spec FILE"
        )
    else:
        if found is not None and not isinstance(found, type):
            raise UsageError(
                f"--model {model} is a {type(found).__name__}, not a model class or a DynamicConfig"
            )
        try:
            config = DynamicConfig.from_spec_file(spec, found, secrets=secrets)
        except DynconfError as error:
            raise UsageError(str(error)) from None
    cache = config.last_known_good
    if snapshot is not None:
        try:
            cache = LastKnownGood(snapshot, CacheMode.REDACTED, config.secret_paths)
        except DynconfError as error:
            raise UsageError(f"--snapshot: {error}") from None
    return Target(config, cache)


def _fetch_remote(config: DynamicConfig[Any]) -> None:
    """A fresh load includes the store: fetch it, as the service's init does."""
    if config.remote_description is None:
        return
    import anyio

    anyio.run(config.refresh_remote_async)


def _stored(target: Target, required: bool) -> Stored | None:
    if target.snapshot is None:
        if required:
            raise UsageError(
                "diff needs the running snapshot: give --snapshot FILE (the path the service "
                "passes to cache(path, mode)), or a --model whose DynamicConfig has cache()"
            )
        return None
    try:
        return target.snapshot.stored()
    except DynconfError as error:
        raise UsageError(f"--snapshot: {error}") from None


def _age(path: Path) -> str:
    try:
        seconds = max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return "age unknown"
    return f"written {seconds:.0f} s ago"


_ABSENT: Final = object()


def _value(document: Document, path: str) -> Any:
    try:
        return get_path(document, path)
    except (KeyError, TypeError):
        return _ABSENT


def _is_secret(path: str, secrets: frozenset[str]) -> bool:
    segments = split_path(path)
    return any(".".join(segments[:end]) in secrets for end in range(1, len(segments) + 1))


def _masked(path: str, value: Value, secrets: frozenset[str]) -> Value:
    return MASK if _is_secret(path, secrets) else value


def _show(value: Value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


# ---------------------------------------------------------------------------- explain
def explain(target: Target, path: str, show_values: bool) -> Answer:
    config = target.config
    try:
        split_path(path)
    except DynconfError as error:
        raise UsageError(f"PATH: {error}") from None
    stored = _stored(target, required=False)
    _fetch_remote(config)
    explanation = config.resolve().explain(path, secrets=config.secret_paths)
    answer: dict[str, Any] = {
        "path": path,
        "set": explanation.found,
        "origin": None if explanation.origin is None else str(explanation.origin),
        "layers": [
            {
                "layer": s.layer,
                "origin": str(s.origin),
                **({"value": s.value} if show_values else {}),
            }
            for s in explanation.supplied
        ],
        "absent_from": [
            {"layer": layer, "origin": str(origin)} for layer, origin in explanation.absent
        ],
    }
    if explanation.alias_of is not None:
        answer["alias_of"] = explanation.alias_of
    if show_values and explanation.found:
        answer["value"] = explanation.value
    if stored is not None and target.snapshot is not None:
        answer["snapshot"] = {
            "file": str(target.snapshot.path),
            "mode": stored.mode.value,
            "agrees": _agrees(target, stored, path),
        }
    return Answer(EXIT_OK if explanation.found else EXIT_PROBLEM, answer, render_explain(answer))


def _agrees(target: Target, stored: Stored, path: str) -> str:
    """How the running snapshot's value at ``path`` compares with a fresh load's."""
    if stored.section is None:
        return "not recorded (a fingerprint cache holds no values)"
    assert target.snapshot is not None
    fresh = target.snapshot.visible(target.config.resolve().section, stored.mode)
    if stored.mode is CacheMode.REDACTED and _is_secret(path, target.config.secret_paths):
        return "not recorded (a secret path; the cache is redacted)"
    before, after = _value(stored.section, path), _value(fresh, path)
    if before is _ABSENT and after is _ABSENT:
        return "not set in either"
    if before is _ABSENT:
        return "not set in the running snapshot"
    if after is _ABSENT:
        return "set in the running snapshot, not in a fresh load"
    return "the same value" if before == after else "a different value"


def render_explain(answer: dict[str, Any]) -> str:
    path = answer["path"]
    if not answer["set"]:
        lines = [f"{path} is not set by any layer"]
    elif "value" in answer:
        lines = [f"{path} = {_show(answer['value'])} ({answer['origin']})"]
    else:
        lines = [f"{path} {answer['origin']}"]
    if "alias_of" in answer:
        lines.append(f"  copied by an alias from {answer['alias_of']}")
    for supply in answer["layers"]:
        shown = f" = {_show(supply['value'])}" if "value" in supply else ""
        lines.append(f"  {supply['layer']}{shown} ({supply['origin']})")
    lines.extend(f"  {a['layer']}: not set ({a['origin']})" for a in answer["absent_from"])
    if "snapshot" in answer:
        snapshot = answer["snapshot"]
        lines.append(
            f"  running snapshot ({snapshot['file']}, {snapshot['mode']}): {snapshot['agrees']}"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- check
def check(target: Target) -> Answer:
    _fetch_remote(target.config)
    report = target.config.check()
    answer: dict[str, Any] = {
        "key": report.key,
        "would_load": report.would_load,
        "failure": report.failure,
        "failure_path": report.failure_path,
        "field_errors": [
            {
                "path": e.path,
                "message": e.message,
                "origin": None if e.origin is None else str(e.origin),
            }
            for e in report.field_errors
        ],
        "unknown": [{"path": u.path, "suggestion": u.suggestion} for u in report.unknown],
        "unknown_checked": report.unknown_checked,
        "resolved": [
            {"path": leaf.path, "origin": None if leaf.origin is None else str(leaf.origin)}
            for leaf in report.resolved
        ],
    }
    return Answer(EXIT_OK if report.is_clean else EXIT_PROBLEM, answer, f"{report}\n")


# ---------------------------------------------------------------------------- diff
def diff(target: Target, show_values: bool) -> Answer:
    stored = _stored(target, required=True)
    assert stored is not None
    assert target.snapshot is not None
    config = target.config
    answer: dict[str, Any] = {
        "snapshot": str(target.snapshot.path),
        "mode": stored.mode.value,
        "age": _age(target.snapshot.path),
    }
    _fetch_remote(config)
    report = config.check()
    if not report.would_load:
        answer["refused"] = report.failure
        answer["changes"] = []
        return Answer(EXIT_PROBLEM, answer, render_diff(answer, show_values))
    section = config.resolve().section
    drift: CacheDrift = target.snapshot.compare(stored, section)
    fresh = target.snapshot.visible(section, stored.mode)
    changes: list[dict[str, Any]] = []
    for change in drift.changes:
        entry: dict[str, Any] = {"path": change.path, "kind": change.kind}
        if show_values and stored.section is not None:
            secrets = config.secret_paths
            if change.kind != "added":
                entry["before"] = _masked(change.path, _value(stored.section, change.path), secrets)
            if change.kind != "removed":
                entry["after"] = _masked(change.path, _value(fresh, change.path), secrets)
        changes.append(entry)
    answer["changes"] = changes
    answer["values_moved"] = drift.values_moved
    code = EXIT_OK if drift.same else EXIT_PROBLEM
    return Answer(code, answer, render_diff(answer, show_values))


def render_diff(answer: dict[str, Any], show_values: bool) -> str:
    head = f"running snapshot {answer['snapshot']} ({answer['mode']}, {answer['age']})"
    if "refused" in answer:
        return (
            f"{head}\n  a fresh load would be refused: {answer['refused']}\n"
            "  the service keeps serving its snapshot; fix the source, then diff again\n"
        )
    lines = [f"{head} against a fresh load now:"]
    for change in answer["changes"]:
        values = ""
        if "before" in change or "after" in change:
            before = _show(change["before"]) if "before" in change else "(absent)"
            after = _show(change["after"]) if "after" in change else "(absent)"
            values = f": {before} -> {after}"
        lines.append(f"  {change['path']} {change['kind']}{values}")
    if answer["values_moved"]:
        lines.append("  the same keys with different values (a fingerprint cache cannot say which)")
    count = len(answer["changes"])
    if count == 0 and not answer["values_moved"]:
        lines.append("  no differences")
    elif count:
        lines.append(f"  {count} path differs" if count == 1 else f"  {count} paths differ")
    if answer["mode"] == CacheMode.REDACTED.value:
        lines.append("  secret paths are not compared (the cache is redacted)")
    if show_values and answer["mode"] == CacheMode.FINGERPRINT.value:
        lines.append("  --show-values: a fingerprint cache holds no values")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- entry
def run(command: str, args: Any) -> int:
    """Run one of the live commands for :func:`dynconf.cli.main`; ``UsageError`` and
    ``DynconfError`` propagate for it to print."""
    target = target_from(args.model, args.spec, args.snapshot, args.secret or [])
    if command == "explain":
        answer = explain(target, args.path, args.show_values)
    elif command == "check":
        answer = check(target)
    else:
        answer = diff(target, args.show_values)
    if args.json:
        data = {**answer.data, "exit": answer.code}
        sys.stdout.write(json.dumps(data, sort_keys=True, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(answer.text)
    return answer.code
