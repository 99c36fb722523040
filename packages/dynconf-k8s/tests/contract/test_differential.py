"""Admission, the agent's parser and the node agent judge one annotation set alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

from .differential import KNOWN_DISAGREEMENTS, annotation_sets, check, verdicts, webhook

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@given(annotations=annotation_sets())
@example(annotations={"file-mode": " 0640"})
@example(annotations={"file-mode": "0O640"})
@example(annotations={"history": "0"})
@example(annotations={"file-mode.cache": "0O640"})
@example(annotations={"timeout.cache": "0"})
@example(annotations={"watch-seconds": "0"})
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_webhook_agent_and_volume_agree(annotations: dict[str, str], tmp_path: Path) -> None:
    check(annotations, tmp_path)


@pytest.mark.parametrize(("name", "value"), KNOWN_DISAGREEMENTS)
def test_a_value_admission_refuses_the_agent_refuses_naming_the_same_field(
    name: str, value: str, tmp_path: Path
) -> None:
    seen = verdicts({name: value}, tmp_path)
    assert seen.webhook == (name, None)
    assert seen.agent == {(name, None)}
    if name == "file-mode":
        assert seen.volume == {(name, None)}


def test_a_named_render_refuses_a_timeout_of_zero_by_its_key() -> None:
    assert webhook({"timeout.cache": "0"}) == ("timeout", "cache")
