"""RequestLog writes the line logging would, or hands the call to logging when others listen."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from dynconf.logs import RequestLog, configure_logging

FIELDS = {"caller": "billing", "endpoint": "document", "status": 200, "generation": "-"}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """The JSON handler configure_logging installs, writing to a buffer; undone afterwards."""
    saved = {
        name: (logger.handlers[:], logger.level, logger.propagate)
        for name in ("dynconf", "dynconf_k8s")
        for logger in [logging.getLogger(name)]
    }
    buffer = io.StringIO()
    configure_logging(stream=buffer)
    yield buffer
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_the_line_is_the_one_a_log_record_makes(stream: io.StringIO) -> None:
    logger = logging.getLogger("dynconf.test.requests")
    logger.info("request", extra=FIELDS)
    RequestLog(logger).info("request", FIELDS)
    by_record, direct = lines(stream)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(direct["ts"]))
    del by_record["ts"], direct["ts"]
    assert list(direct.items()) == list(by_record.items())  # the same fields, in the same order


def test_a_capturing_handler_gets_a_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="requestlog.captured")
    RequestLog(logging.getLogger("requestlog.captured")).info("request", FIELDS)
    [record] = [r for r in caplog.records if r.name == "requestlog.captured"]
    assert record.getMessage() == "request"
    assert (record.caller, record.status) == ("billing", 200)  # type: ignore[attr-defined]


def test_nothing_is_written_below_the_loggers_level(stream: io.StringIO) -> None:
    logger = logging.getLogger("dynconf.test.quiet")
    logger.setLevel(logging.WARNING)
    try:
        RequestLog(logger).info("request", FIELDS)
    finally:
        logger.setLevel(logging.NOTSET)
    assert stream.getvalue() == ""


def test_a_filter_on_the_way_is_honoured(stream: io.StringIO) -> None:
    logger = logging.getLogger("dynconf.test.filtered")
    logger.addFilter(lambda record: False)
    try:
        RequestLog(logger).info("request", FIELDS)
    finally:
        logger.filters.clear()
    assert stream.getvalue() == ""


def test_a_second_handler_gets_the_line_as_well(stream: io.StringIO) -> None:
    logger = logging.getLogger("dynconf.test.twice")
    other = io.StringIO()
    extra = logging.StreamHandler(other)
    logger.addHandler(extra)
    try:
        RequestLog(logger).info("request", FIELDS)
    finally:
        logger.removeHandler(extra)
    assert [line["event"] for line in lines(stream)] == ["request"]
    assert other.getvalue() == "request\n"


def test_a_closed_stream_loses_the_line_without_an_error(stream: io.StringIO) -> None:
    stream.close()
    RequestLog(logging.getLogger("dynconf.test.closed")).info("request", FIELDS)
