"""Structured logs: one JSON object per line on stdout, an event name and fields.

Callers log an *event name* as the message and put facts in ``extra`` (counts, paths,
kinds, durations); values from documents and credentials never go in. An operator can
grep the lines, a dashboard can count them.

:func:`console_entry` is the one way a console script ends on an exception nobody expected:
one JSON line (the program, the exception's type, where it was raised; never its text) and
exit code :data:`UNEXPECTED_EXIT`, never a traceback. Every program's ``main`` wears it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TextIO, TypeVar

from dynconf.logfilter import LOG_FILTER_ENV, LogFilter, log_filter_from

__all__ = [
    "INTERRUPTED_EXIT",
    "UNEXPECTED_EXIT",
    "JsonFormatter",
    "RequestLog",
    "configure_logging",
    "console_entry",
    "log_unexpected",
]

UNEXPECTED_EXIT: Final = 70
"""The exit code of a program ended by an exception nobody expected (``EX_SOFTWARE``)."""
INTERRUPTED_EXIT: Final = 130
"""The exit code of a program stopped by Ctrl-C (SIGINT) outside its own signal handling."""

_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


_ENCODER: Final = json.JSONEncoder(default=str)
"""One encoder for every line: ``json.dumps`` with an argument builds a new one per call."""


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "event", …extra fields, "fields"}``.

    ``fields`` closes every line with the event as ``message`` and, when the line carries
    one, its failure sentence (the ``error`` or ``reason`` field) as ``error``: the shape of
    the book's tracing lines, so its troubleshooting one-liner, ``jq -r '.fields.error //
    .fields.message'``, prints the reason of each line here too.

    A server writes one audit line per request, so the line is built cheaply: the
    timestamp's seconds are formatted once per second, and one encoder serves every line.
    """

    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        body = self.head(record.created, record.levelname.lower(), record.name, record.getMessage())
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                body[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            # the exception's type only: its text could quote a value
            body["error_type"] = record.exc_info[0].__name__
        return _ENCODER.encode(_closed(body))

    def line(self, created: float, logger: str, event: str, fields: dict[str, Any]) -> str:
        """The INFO line :meth:`format` writes for ``event`` with ``fields`` as its extra."""
        body = self.head(created, "info", logger, event)
        body.update(fields)
        return _ENCODER.encode(_closed(body))

    def head(self, created: float, level: str, logger: str, event: str) -> dict[str, Any]:
        """The fields every line starts with; the timestamp's seconds are formatted once."""
        whole = int(created)
        second, stamp = self._second
        if whole != second:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
            self._second = (whole, stamp)  # one tuple: a racing thread reads a matching pair
        millis = int((created - whole) * 1000)  # as logging.LogRecord counts msecs
        return {"ts": f"{stamp}.{millis:03d}Z", "level": level, "logger": logger, "event": event}


def _closed(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its ``fields`` object last (see :class:`JsonFormatter`)."""
    fields: dict[str, Any] = {"message": body["event"]}
    error = body.get("error", body.get("reason"))
    if isinstance(error, str) and error:
        fields["error"] = error
    body["fields"] = fields
    return body


class RequestLog:
    """A server's line per request: ``logger.info(event, extra=fields)`` without the record.

    Through :mod:`logging` one such line costs a ``LogRecord`` (some thirty attributes, the
    caller's frame, the thread's name), a walk over its ``vars`` and the formatter: measured
    on the config server, as much CPU as serving the request itself. When the line would go
    to exactly one handler, the JSON handler :func:`configure_logging` installs, it is built
    from ``fields`` directly and written under that handler's lock, byte for byte the line
    the record would have made. Any other arrangement — a capturing test, a host's own
    handlers, a filter — gets ``logger.info`` unchanged, so nothing is lost or reshaped.
    ``fields`` are the ``extra`` of a log call, so they follow its rule: no ``LogRecord``
    attribute names.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def info(self, event: str, fields: dict[str, Any]) -> None:
        logger = self._logger
        if not logger.isEnabledFor(logging.INFO):
            return
        sole = _sole_json_handler(logger)
        if sole is None:
            logger.info(event, extra=fields)
            return
        handler, formatter = sole
        text = formatter.line(time.time(), logger.name, event, fields) + handler.terminator
        # a closed or broken stdout loses the line, as logging would, with no traceback
        with handler.lock or contextlib.nullcontext(), contextlib.suppress(OSError, ValueError):
            stream = handler.stream
            stream.write(text)
            stream.flush()


def _sole_json_handler(
    logger: logging.Logger,
) -> tuple[logging.StreamHandler[TextIO], JsonFormatter] | None:
    """The one JSON stream handler ``logger``'s lines reach, when that is all that sees them."""
    found: logging.Handler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None:
                return None
            found = handler
        if not current.propagate:
            break
        current = current.parent
    if (
        isinstance(found, logging.StreamHandler)
        and isinstance(found.formatter, JsonFormatter)
        and not found.filters
        and found.level <= logging.INFO
    ):
        return found, found.formatter
    return None


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stdout`` is when a line is emitted, not when it was configured.

    A thread that outlives the code that configured logging (a test's captured stdout, a
    host that swaps ``sys.stdout``) then never writes to a stream that has been closed.
    """

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """``StreamHandler`` assigns a stream; the current ``sys.stdout`` always wins."""


def configure_logging(
    stream: TextIO | None = None,
    *,
    log_filter: LogFilter | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Route every ``dynconf*`` logger to JSON lines on ``stream`` (stdout by default).

    Levels come from ``log_filter``, else from ``RUST_LOG`` in ``environ`` (the process's
    environment by default), read by :mod:`dynconf.logfilter`, the one grammar every program
    uses. Each directive the filter dropped is logged once, whatever the levels.
    """
    handler: logging.Handler = (
        logging.StreamHandler(stream) if stream is not None else _StdoutHandler()
    )
    handler.setFormatter(JsonFormatter())
    chosen = log_filter or log_filter_from(os.environ if environ is None else environ)
    chosen.apply(handler)
    announcer = logging.getLogger("dynconf")
    for sentence in chosen.dropped:
        record = announcer.makeRecord(
            announcer.name, logging.WARNING, __file__, 0, "log_filter_refused", (), None,
            extra={"variable": LOG_FILTER_ENV, "reason": sentence},
        )  # fmt: skip
        handler.handle(record)  # past the filter: a dropped directive is always said


_Main = TypeVar("_Main", bound=Callable[..., Any])
_unexpected = logging.getLogger("dynconf.unexpected")


def _where(trace: TracebackType | None) -> str:
    """``file:line`` of the frame that raised: a place in the code, never a value."""
    last = None
    while trace is not None:
        last, trace = trace, trace.tb_next
    if last is None:
        return "unknown"
    where = "/".join(Path(last.tb_frame.f_code.co_filename).parts[-2:])
    return f"{where}:{last.tb_lineno}"


def log_unexpected(
    event: str, error: BaseException, trace: TracebackType | None, **fields: Any
) -> None:
    """Log one line for an exception nobody expected: its type and place, not its text.

    The text of an arbitrary exception can quote a value (a document line, a URL with a
    password), so only the class name, the errno name of an ``OSError`` and ``file:line``
    are kept. Logging is configured first when the program had not got that far.
    """
    if not logging.getLogger("dynconf").handlers:
        configure_logging()
    facts: dict[str, Any] = {"error_type": type(error).__name__, "where": _where(trace)}
    if isinstance(error, OSError) and error.errno is not None:
        facts["errno"] = errno.errorcode.get(error.errno, str(error.errno))
    _unexpected.error(event, extra={**fields, **facts})


def console_entry(program: str, *, hard_exit: bool = False) -> Callable[[_Main], _Main]:
    """Wrap a console script's ``main`` so no exception ends it with a traceback.

    ``SystemExit`` passes (argparse, explicit exits); Ctrl-C is :data:`INTERRUPTED_EXIT`;
    any other exception is one ``unexpected_error`` line and :data:`UNEXPECTED_EXIT`, and
    the same line shape (``thread_failed``) replaces the traceback of a thread that dies.
    ``hard_exit`` ends the process at once after flushing (``os._exit``), for programs
    whose store threads may be stuck in a long poll and must not hold the exit.
    """

    def wrap(main: _Main) -> _Main:
        @functools.wraps(main)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            threading.excepthook = _thread_failed(program)
            try:
                return main(*args, **kwargs)
            except KeyboardInterrupt:
                code = INTERRUPTED_EXIT
            except Exception as error:  # the one place that must catch everything
                log_unexpected(
                    "unexpected_error", error, error.__traceback__,
                    program=program, exit_code=UNEXPECTED_EXIT,
                )  # fmt: skip
                code = UNEXPECTED_EXIT
            if hard_exit:
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                os._exit(code)
            return code

        return guarded  # type: ignore[return-value]

    return wrap


def _thread_failed(program: str) -> Callable[[threading.ExceptHookArgs], None]:
    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or isinstance(args.exc_value, SystemExit):
            return
        log_unexpected(
            "thread_failed", args.exc_value, args.exc_traceback,
            program=program, thread_name=args.thread.name if args.thread else "unknown",
        )  # fmt: skip

    return hook
