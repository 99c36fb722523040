"""What every fuzz property shares: the planted secret, a JSON-patch applier, a bounded worker.

The properties run hostile input through the public entry points; a few of those inputs are
exactly the ones issue 14 showed can hang a process or take gigabytes (``big ** big``, deep
TOML dotted keys). Running those in the test process would let one bad example take the whole
run down, so :class:`Bounded` runs a function in a forked child with an address-space ceiling,
measures the child's peak resident memory for that one call, and kills it at a wall-clock
deadline. The property then asserts the bound instead of the machine enforcing it on us.

:class:`Violation` is the one exception a check raises for a broken promise: it carries a
short class label (``"parse raised RecursionError"``) so the long run can count distinct
failures, and the example is summarised by :func:`summarise` with every planted secret
replaced, so a report can be pasted anywhere.
"""

from __future__ import annotations

import copy
import functools
import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Final

SECRET: Final = "Zq9XkV7pW-hunter2-4fT8"
"""The value planted where a credential or a document secret would be; never to be echoed."""

SECRETS: Final = (SECRET, "s3cr3tP4ssw0rd-Lm2Rt")
"""Every planted value: the document secret and a URL/agent-env password."""

MESSAGE_LIMIT: Final = 1024
"""A refusal longer than this echoes input (issue 14 item 14: a 100 KB attribute came back)."""

MiB: Final = 1024 * 1024


class Violation(AssertionError):
    """A broken promise; ``label`` is the failure class, ``detail`` what was seen."""

    def __init__(self, label: str, detail: str = "") -> None:
        super().__init__(f"{label}: {detail}" if detail else label)
        self.label = label
        self.detail = detail


def require(condition: object, label: str, detail: str = "") -> None:
    """Raise :class:`Violation` unless ``condition`` holds."""
    if not condition:
        raise Violation(label, detail)


def leaked(text: str, secrets: Iterable[str] = SECRETS, window: int = 8) -> str | None:
    """The planted secret ``text`` carries (whole, or any ``window``-character slice of it)."""
    for secret in secrets:
        for start in range(len(secret) - window + 1):
            if secret[start : start + window] in text:
                return secret
    return None


def redact(value: Any, limit: int = 120) -> str:
    """A short, secret-free ``repr`` of ``value`` for reports."""
    text = repr(value)
    for secret in SECRETS:
        text = text.replace(secret, "<SECRET>")
    if len(text) > limit:
        text = f"{text[: limit // 2]}…({len(text)} chars)…{text[-limit // 4 :]}"
    return text


def summarise(value: Any, limit: int = 400) -> str:
    """An example as a report line: containers shortened, long strings cut, secrets replaced."""
    return redact(_shrink(value), limit)


def _shrink(value: Any, depth: int = 0) -> Any:
    if depth > 6:
        return "…"
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:40]}…<{len(value)} chars>"
    if isinstance(value, Mapping):
        return {_shrink(k, depth + 1): _shrink(v, depth + 1) for k, v in list(value.items())[:30]}
    if isinstance(value, list | tuple):
        items = [_shrink(v, depth + 1) for v in value[:20]]
        return items if len(value) <= 20 else [*items, f"…{len(value)} items"]
    return value


# --- JSON patch ------------------------------------------------------------------------------


class PatchError(Exception):
    """An operation that does not apply."""


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _index(container: list[Any], token: str, *, insert: bool) -> int:
    if token == "-" and insert:
        return len(container)
    if not token.isascii() or not token.isdigit() or (token != "0" and token.startswith("0")):
        raise PatchError(f"array index {token!r} is not a number")
    index = int(token)
    if index > len(container) or (index == len(container) and not insert):
        raise PatchError(f"array index {index} is past the end ({len(container)})")
    return index


def apply_json_patch(document: Any, ops: Any) -> Any:
    """RFC 6902 ``add``/``remove``/``replace``/``test`` on a copy, as the API server applies them.

    Strict where the API server's applier (evanphx/json-patch v4) is strict: every parent must
    exist and be a container, array indices must be in range, ``remove`` needs its target.
    Lenient where it is lenient: ``replace`` of a missing object member sets it.
    """
    if not isinstance(ops, list):
        raise PatchError("the patch is not a JSON array")
    doc = copy.deepcopy(document)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise PatchError(f"operation {op!r} has no path")
        kind = op.get("op")
        path: str = op["path"]
        if not path.startswith("/"):
            raise PatchError(f"path {path!r} does not start with /")
        tokens = [_unescape(t) for t in path.split("/")[1:]]
        parent: Any = doc
        for token in tokens[:-1]:
            if isinstance(parent, dict):
                if token not in parent:
                    raise PatchError(f"{path}: {token!r} does not exist")
                parent = parent[token]
            elif isinstance(parent, list):
                parent = parent[_index(parent, token, insert=False)]
            else:
                raise PatchError(f"{path}: {token!r} is inside a scalar")
        last = tokens[-1]
        if kind in ("add", "replace"):
            if "value" not in op:
                raise PatchError(f"{kind} {path} has no value")
            if isinstance(parent, dict):
                parent[last] = op["value"]
            elif isinstance(parent, list):
                if kind == "add":
                    parent.insert(_index(parent, last, insert=True), op["value"])
                else:
                    parent[_index(parent, last, insert=False)] = op["value"]
            else:
                raise PatchError(f"{path}: the parent is a scalar")
        elif kind == "remove":
            if isinstance(parent, dict):
                if last not in parent:
                    raise PatchError(f"remove {path}: nothing there")
                del parent[last]
            elif isinstance(parent, list):
                del parent[_index(parent, last, insert=False)]
            else:
                raise PatchError(f"remove {path}: the parent is a scalar")
        elif kind == "test":
            here = parent.get(last) if isinstance(parent, dict) else None
            if here != op.get("value"):
                raise PatchError(f"test {path} failed")
        else:
            raise PatchError(f"operation {kind!r} is not one the webhook should emit")
    return doc


# --- the bounded worker ----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one bounded call ended: ``ok`` (with its value), ``timeout`` or ``died``."""

    status: str
    value: Any = None
    seconds: float = 0.0
    peak_bytes: int = 0
    exitcode: int | None = None


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        pass


def _serve(conn: Connection, ceiling: int) -> None:
    """The child's loop: run each ``(function, args)``, answer ``(value, peak_bytes)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit = _status_kib("VmSize") * 1024 + ceiling
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            os._exit(0)
        function, args = job
        _reset_peak()
        before = _status_kib("VmRSS")
        value = function(*args)
        peak = max(0, _status_kib("VmHWM") - before) * 1024
        conn.send((value, peak))


class Bounded:
    """A forked worker running one call at a time under a deadline and an address-space ceiling.

    ``ceiling`` is a safety net (the child cannot take the machine down); the property asserts
    on the measured ``peak_bytes``, which is far below it when the code keeps its bound.
    A call past its deadline kills the child; the next call starts a fresh one.
    """

    def __init__(self, ceiling: int = 1536 * MiB) -> None:
        self.ceiling = ceiling
        self._context = multiprocessing.get_context("fork")
        self._process: Any = None
        self._conn: Connection | None = None

    def _start(self) -> Connection:
        if self._conn is None:
            parent, child = self._context.Pipe()
            self._process = self._context.Process(
                target=_serve, args=(child, self.ceiling), daemon=True
            )
            self._process.start()
            child.close()
            self._conn = parent
        return self._conn

    def stop(self) -> None:
        """End the child (it is ours: killed by its own pid)."""
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._process = None
        self._conn = None

    def call(self, function: Callable[..., Any], *args: Any, deadline: float) -> Outcome:
        conn = self._start()
        started = time.monotonic()
        try:
            conn.send((function, args))
            ready = conn.poll(deadline)
            if ready:
                value, peak = conn.recv()
                return Outcome("ok", value, time.monotonic() - started, peak)
        except (EOFError, OSError, BrokenPipeError):
            process = self._process
            self.stop()
            code = process.exitcode if process is not None else None
            return Outcome("died", None, time.monotonic() - started, exitcode=code)
        self.stop()
        return Outcome("timeout", None, time.monotonic() - started)


@functools.cache
def worker() -> Bounded:
    """The process-wide bounded worker (its child starts on first use, one per test process)."""
    return Bounded()


def raised(error: BaseException) -> tuple[str, str, tuple[str, ...]]:
    """``(type name, message, module-qualified MRO)``: what a child reports about an exception."""
    mro = tuple(f"{cls.__module__}.{cls.__qualname__}" for cls in type(error).__mro__)
    message = getattr(error, "message", None)
    return type(error).__name__, str(message if isinstance(message, str) else error), mro


def is_typed(mro: tuple[str, ...]) -> bool:
    """Whether an exception (by its MRO) is one of ``dynconf.errors``."""
    return "dynconf.errors.DynconfError" in mro
