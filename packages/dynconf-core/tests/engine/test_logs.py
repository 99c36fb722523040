"""JSON log lines go to the ``sys.stdout`` of the moment they are written."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from dynconf.logs import configure_logging


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
