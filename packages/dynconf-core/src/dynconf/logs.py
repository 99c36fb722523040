"""Structured logs: one JSON object per line on stdout, an event name and fields.

Callers log an *event name* as the message and put facts in ``extra`` (counts, paths,
kinds, durations); values from documents and credentials never go in. An operator can
grep the lines, a dashboard can count them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Final, TextIO

__all__ = ["JsonFormatter", "configure_logging"]

_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "event", …extra fields}``."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                body[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            # the exception's type only: its text could quote a value
            body["error_type"] = record.exc_info[0].__name__
        return json.dumps(body, default=str, sort_keys=False)


def configure_logging(level: int | str = logging.INFO, stream: TextIO | None = None) -> None:
    """Route every ``dynconf*`` logger to JSON lines on ``stream`` (stdout by default)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    for name in ("dynconf", "dynconf_k8s"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
