"""``RUST_LOG``: the book's log-filter grammar, read once for every program.

The contract keeps the variable's name and its directive grammar (tracing's ``EnvFilter``
without span filters): comma-separated directives, each a level (``debug``), a target
(``dynconf``, meaning every level) or ``target=level``. Levels are ``off``, ``error``,
``warn``, ``info``, ``debug`` and ``trace`` in any case, or ``0`` to ``5``. A target is a logger
name, with ``::`` read as ``.``; the book's crate names map onto ours (:data:`TARGET_ALIASES`).
The most specific target wins, as it does for ``EnvFilter``.

A directive that does not parse is dropped and named, once, with what is wrong and the fix;
the rest of the filter applies. The value often arrives from a pod's annotation
(``agent-env``), and a typo in a log filter must never stop a process: as in ``EnvFilter``'s
lenient reading, it costs only the directive.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "LOG_FILTER_ENV",
    "OFF",
    "TARGET_ALIASES",
    "LogFilter",
    "log_filter_from",
    "parse_log_filter",
]

LOG_FILTER_ENV: Final = "RUST_LOG"
OFF: Final = logging.CRITICAL + 10
"""The level of ``off``: above every record's."""

_LEVELS: Final = {
    "off": OFF,
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,  # Python's finest standard level
}
_NUMBERED: Final = ("off", "error", "warn", "info", "debug", "trace")
TARGET_ALIASES: Final = {
    "dynamic_config": "dynconf",
    "dynamic_config_agent": "dynconf_k8s.agent",
    "dynamic_config_webhook": "dynconf_k8s.webhook",
    "dynamic_config_operator": "dynconf_k8s.operator",
    "dynamic_config_node_agent": "dynconf_k8s.node",
    "dynamic_config_server": "dynconf.server",
}
"""The book's crate names (its targets), as the loggers that do the same work here."""
ROOTS: Final = ("dynconf", "dynconf_k8s")
_SHOWN: Final = 60


@dataclass(frozen=True, slots=True)
class LogFilter:
    """A parsed filter: the level for every logger not named, each named one's, and the
    directives that were dropped (each a sentence naming its problem and the fix)."""

    default: int = logging.INFO
    targets: tuple[tuple[str, int], ...] = ()
    dropped: tuple[str, ...] = ()

    def apply(self, handler: logging.Handler) -> None:
        """Route our loggers to ``handler`` at the default level; set each named target."""
        for name in ROOTS:
            logger = logging.getLogger(name)
            logger.handlers[:] = [handler]
            logger.setLevel(self.default)
            logger.propagate = False
        for name, level in sorted(self.targets, key=lambda item: item[0].count(".")):
            logging.getLogger(name).setLevel(level)


def parse_log_filter(text: str | None, *, default: int = logging.INFO) -> LogFilter:
    """The filter ``text`` spells (unset or blank: ``default`` for everything)."""
    level = default
    targets: dict[str, int] = {}
    dropped: list[str] = []
    for raw in (text or "").split(","):
        directive = raw.strip()
        if not directive:
            continue
        problem = _problem(directive)
        if problem:
            shown = directive if len(directive) <= _SHOWN else directive[:_SHOWN] + "…"
            dropped.append(f"{LOG_FILTER_ENV} directive {shown!r} {problem}; it is ignored")
            continue
        target, sep, word = directive.partition("=")
        if not sep:
            parsed = _level(directive)
            if parsed is not None:
                level = parsed
            else:
                targets[_logger(directive)] = logging.DEBUG  # a bare target: every level
            continue
        parsed = _level(word)
        assert parsed is not None  # _problem checked it
        targets[_logger(target)] = parsed
    return LogFilter(level, tuple(targets.items()), tuple(dropped))


def log_filter_from(environ: Mapping[str, str]) -> LogFilter:
    """The filter ``environ``'s ``RUST_LOG`` spells."""
    return parse_log_filter(environ.get(LOG_FILTER_ENV))


def _level(word: str) -> int | None:
    word = word.strip().lower()
    if word.isdigit() and int(word) < len(_NUMBERED):
        word = _NUMBERED[int(word)]
    return _LEVELS.get(word)


def _logger(target: str) -> str:
    name = target.strip().replace("::", ".")
    head, dot, rest = name.partition(".")
    return TARGET_ALIASES.get(head, head) + dot + rest


def _problem(directive: str) -> str | None:
    """What is wrong with one directive, with the fix, or None."""
    if "[" in directive or "{" in directive:
        return "filters by span, which is not supported; name a target and a level"
    target, sep, word = directive.partition("=")
    if sep and not target.strip():
        return "names no target before '='; write target=level, e.g. dynconf=debug"
    if sep and _level(word) is None:
        return "names no level after '='; use off, error, warn, info, debug or trace"
    name = target.strip()
    if not all(part.isidentifier() for part in name.replace("::", ".").split(".")):
        if not sep and _level(name) is None:
            return (
                "is neither a level nor a target; use a level (off, error, warn, info, "
                "debug, trace) or target=level"
            )
        if sep:
            return "names a target that is not a module path; write e.g. dynconf::store=debug"
    return None
