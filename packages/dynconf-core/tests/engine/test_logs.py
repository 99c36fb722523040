"""JSON log lines go to the ``sys.stdout`` of the moment they are written."""

from __future__ import annotations

import ast
import io
import json
import logging
import sys
from pathlib import Path

import pytest

from dynconf.logs import JsonFormatter, configure_logging


def test_a_line_goes_to_the_stdout_current_when_it_is_emitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stdout", first)
    configure_logging()
    first.close()  # the stream logging was configured under is gone (a test's capture, say)
    second = io.StringIO()
    monkeypatch.setattr(sys, "stdout", second)

    logging.getLogger("dynconf.test").info("still_heard")

    assert json.loads(second.getvalue())["event"] == "still_heard"


def test_an_explicit_stream_is_kept() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    logging.getLogger("dynconf.test").info("kept")
    assert json.loads(stream.getvalue())["event"] == "kept"


# ---------------------------------------------------------------------------- one convention
REPO = Path(__file__).resolve().parents[4]
LOG_METHODS = frozenset({"debug", "info", "warning", "error", "critical", "exception", "log"})


def _event_overrides(tree: ast.AST) -> list[int]:
    """Lines where a log call's ``extra`` names ``event`` (it would replace the message)."""
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in LOG_METHODS:
            continue
        for keyword in node.keywords:
            if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                keys = [k.value for k in keyword.value.keys if isinstance(k, ast.Constant)]
                if "event" in keys:
                    lines.append(node.lineno)
    return lines


def test_every_log_line_names_its_event_as_the_message() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted(REPO.glob("packages/*/src/**/*.py"))
        for line in _event_overrides(ast.parse(path.read_text(), str(path)))
    ]

    assert offenders == [], "log the event name as the message, not as extra['event']"


def test_a_store_failure_line_carries_the_event_and_the_stores_detail() -> None:
    from dynconf.errors import DynconfError
    from dynconf.sources import SourceSupport

    class Example(SourceSupport):
        failure_detail = "example watch failed; retrying"

    source = Example()
    source.description = "example store at 127.0.0.1"
    stream = io.StringIO()
    configure_logging(stream=stream)

    source.report(DynconfError("the store answered 503"))

    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line["event"] == "store_watch_failed"
    assert line["detail"] == "example watch failed; retrying"
    assert line["store"] == "example store at 127.0.0.1"


def test_each_line_carries_its_own_records_time_to_the_millisecond() -> None:
    """The seconds are formatted once per second: a line from another second, earlier or
    later, is never stamped with the second the formatter saw last."""
    formatter = JsonFormatter()
    stamps = []
    for created in (1_700_000_000.125, 1_700_000_000.999, 1_700_000_001.5, 1_699_999_999.0):
        record = logging.LogRecord("dynconf.t", logging.INFO, __file__, 1, "tick", None, None)
        record.created, record.msecs = created, (created % 1) * 1000
        stamps.append(json.loads(formatter.format(record))["ts"])
    assert stamps == [
        "2023-11-14T22:13:20.125Z",
        "2023-11-14T22:13:20.999Z",
        "2023-11-14T22:13:21.500Z",
        "2023-11-14T22:13:19.000Z",
    ]


# ---------------------------------------------------------------------- the book's one-liner
def _one_liner(line: dict[str, object]) -> object:
    """``jq -r '.fields.error // .fields.message'``, the troubleshooting line of the book."""
    fields = line["fields"]
    assert isinstance(fields, dict)
    return fields.get("error") or fields.get("message")


def test_every_line_closes_with_fields_naming_its_message_and_its_failure() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream, environ={})
    log = logging.getLogger("dynconf.test")
    log.info("rendered", extra={"bytes": 12})
    log.warning("render_failed", extra={"reason": "the store answered 503; the last good stays"})
    log.error("agent_failed", extra={"error": "the first fetch failed"})
    lines = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert [list(line)[-1] for line in lines] == ["fields"] * 3
    assert [_one_liner(line) for line in lines] == [
        "rendered",
        "the store answered 503; the last good stays",
        "the first fetch failed",
    ]


def test_a_request_line_written_past_logging_has_the_same_fields() -> None:
    from dynconf.logs import RequestLog

    stream = io.StringIO()
    configure_logging(stream=stream, environ={})
    RequestLog(logging.getLogger("dynconf.server.audit")).info("request", {"status": 200})
    [line] = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert line["fields"] == {"message": "request"}
