"""``RUST_LOG``'s directive grammar: one parser, the levels it sets, the directives it drops."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from dynconf.logfilter import OFF, parse_log_filter
from dynconf.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_loggers() -> Iterator[None]:
    names = ("dynconf", "dynconf_k8s", "dynconf.store", "dynconf.store.consul", "dynconf_k8s.agent")
    saved = {n: (logging.getLogger(n).level, list(logging.getLogger(n).handlers)) for n in names}
    yield
    for name, (level, handlers) in saved.items():
        logging.getLogger(name).setLevel(level)
        logging.getLogger(name).handlers[:] = handlers


@pytest.mark.parametrize(
    ("text", "default", "targets"),
    [
        (None, logging.INFO, {}),
        ("", logging.INFO, {}),
        ("trace", logging.DEBUG, {}),
        ("WARN", logging.WARNING, {}),
        ("off", OFF, {}),
        ("1", logging.ERROR, {}),
        ("info,dynconf=debug", logging.INFO, {"dynconf": logging.DEBUG}),
        ("warn, dynconf::store=trace ,", logging.WARNING, {"dynconf.store": logging.DEBUG}),
        ("dynconf_k8s", logging.INFO, {"dynconf_k8s": logging.DEBUG}),
        ("dynamic_config=debug", logging.INFO, {"dynconf": logging.DEBUG}),
        ("dynamic_config_agent=error", logging.INFO, {"dynconf_k8s.agent": logging.ERROR}),
    ],
)
def test_directives_set_the_default_and_each_target(
    text: str | None, default: int, targets: dict[str, int]
) -> None:
    parsed = parse_log_filter(text)
    assert parsed.default == default
    assert dict(parsed.targets) == targets
    assert parsed.dropped == ()


@pytest.mark.parametrize(
    ("directive", "problem"),
    [
        ("dynconf=loud", "names no level after '='"),
        ("=debug", "names no target before '='"),
        ("bad level!", "is neither a level nor a target"),
        ("my-crate=debug", "names a target that is not a module path"),
        ("dynconf[fetch]=debug", "filters by span"),
    ],
)
def test_a_directive_that_does_not_parse_is_dropped_with_its_fix(
    directive: str, problem: str
) -> None:
    parsed = parse_log_filter(f"warn,{directive},dynconf=debug")
    assert parsed.default == logging.WARNING
    assert dict(parsed.targets) == {"dynconf": logging.DEBUG}
    [sentence] = parsed.dropped
    assert sentence.startswith(f"RUST_LOG directive {directive!r} {problem}")
    assert sentence.endswith("it is ignored")


def test_the_most_specific_target_wins() -> None:
    stream = io.StringIO()
    configure_logging(stream, environ={"RUST_LOG": "dynconf=error,dynconf::store::consul=debug"})
    logging.getLogger("dynconf.store.consul").debug("heard")
    logging.getLogger("dynconf.store.vault").warning("not heard")
    logging.getLogger("dynconf").error("heard too")
    events = [json.loads(line)["event"] for line in stream.getvalue().splitlines()]
    assert events == ["heard", "heard too"]


def test_a_dropped_directive_is_said_once_even_when_the_filter_silences_everything() -> None:
    stream = io.StringIO()
    configure_logging(stream, environ={"RUST_LOG": "off,dynconf=sometimes"})
    logging.getLogger("dynconf").error("silenced")
    [line] = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert line["event"] == "log_filter_refused"
    assert line["variable"] == "RUST_LOG"
    assert "dynconf=sometimes" in line["reason"]
