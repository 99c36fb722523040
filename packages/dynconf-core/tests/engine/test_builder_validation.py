"""The Python builder and ``dynconf resolve`` refuse a bad layer the same way, at add time.

Both fronts write through :class:`dynconf.resolve.LoadSpec`'s validated setters, so a bad
flag path, override path, binding or alias is one error — the same class, path and sentence
(the field, the problem, the fix) — whether it came from a spec file or a builder call, and
it is raised by the call that added it, not later as a refused reload.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dynconf.cli import main
from dynconf.config import DynamicConfig
from dynconf.errors import DynconfError
from dynconf.resolve import LoadSpec


def _resolve_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any]
) -> str:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"key": "app", "files": [], **fields}), encoding="utf-8")
    assert main(["resolve", str(spec)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("dynconf: ") and "\n" not in err
    return err.removeprefix("dynconf: ")


def _builder_refusal(build: Callable[[DynamicConfig[Any]], object]) -> DynconfError:
    config: DynamicConfig[Any] = DynamicConfig(None, "app")
    with pytest.raises(DynconfError) as caught:
        build(config)
    assert config.status().refusals == 0  # refused by the call, not as a reload
    return caught.value


@pytest.mark.parametrize(
    ("fields", "build"),
    [
        ({"set": {"a..b": "1"}}, lambda c: c.set_assignments(["a..b=1"])),
        ({"overrides": {"a..b": 1}}, lambda c: c.set_override("a..b", 1)),
        ({"bindings": {"a..b": "APP_B"}}, lambda c: c.bind_env("a..b", "APP_B")),
        ({"aliases": {"old": "a..b"}}, lambda c: c.alias("old", "a..b")),
        ({"aliases": {"a": "b", "b": "a"}}, lambda c: c.alias("a", "b").alias("b", "a")),
        ({"aliases": {"s::": "b"}}, lambda c: c.alias("s::", "b")),
    ],
    ids=["flag-path", "override-path", "binding-path", "alias-path", "alias-cycle", "alias-ref"],
)
def test_a_bad_layer_is_the_same_refusal_from_resolve_and_from_the_builder(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fields: dict[str, Any],
    build: Callable[[DynamicConfig[Any]], object],
) -> None:
    cli = _resolve_refusal(tmp_path, capsys, fields)
    error = _builder_refusal(build)
    assert str(error) == cli
    assert error.path  # the refusal names the path it is about


def test_an_assignment_without_equals_is_the_load_specs_refusal() -> None:
    with pytest.raises(DynconfError) as spec_error:
        LoadSpec(key="app").set_assignments(["db.port=1", "db.host"])
    error = _builder_refusal(lambda c: c.set_assignments(["db.port=1", "db.host"]))
    assert type(error) is type(spec_error.value)
    assert str(error) == str(spec_error.value)
    assert "`=`" in str(error) and "path=value" in str(error)


def test_a_refused_assignment_adds_none_of_its_batch(tmp_path: Path) -> None:
    config = DynamicConfig(None, "app").set_default("db.port", 1)
    with pytest.raises(DynconfError):
        config.set_assignments(["db.port=2", "db..host=x"])
    assert config.init()["db"] == {"port": 1}


def test_an_empty_nesting_separator_is_refused_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = _resolve_refusal(tmp_path, capsys, {"nest": ""})
    assert str(_builder_refusal(lambda c: c.nest(""))) == cli
