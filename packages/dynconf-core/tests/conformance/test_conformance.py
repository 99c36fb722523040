"""The conformance suite: one behaviour of resolution per directory under ``cases/``.

Each case holds ``config.toml`` (always the first listed file), optional siblings (profile
variants, more files, ``.env``, ``secrets/``), ``env.json`` (variables set for the load and
removed afterwards; every case uses its own prefix), ``spec.json`` (the ``dynconf resolve``
spec) and either ``expected.json`` (the resolved section, compared type-exactly) or
``expected_error.json`` (``{"kind": …, "path": …}`` of the refusal).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynconf.document import same_value
from dynconf.errors import DynconfError
from dynconf.plugins import Registry, default_registry
from dynconf.spec import render_resolved_json, resolve_spec_file

CASES = Path(__file__).parent / "cases"
CASE_DIRS = sorted(path for path in CASES.iterdir() if path.is_dir())


def _registry() -> Registry:
    return default_registry()


def test_the_suite_has_cases() -> None:
    assert len(CASE_DIRS) >= 35


@pytest.mark.parametrize("case", CASE_DIRS, ids=[path.name for path in CASE_DIRS])
def test_case(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = case / "env.json"
    environment = json.loads(env_file.read_text(encoding="utf-8")) if env_file.exists() else {}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    expected_error = case / "expected_error.json"
    if expected_error.exists():
        wanted = json.loads(expected_error.read_text(encoding="utf-8"))
        with pytest.raises(DynconfError) as caught:
            resolve_spec_file(case / "spec.json", registry=_registry())
        assert {"kind": caught.value.kind.value, "path": caught.value.path} == wanted
        return
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    resolved = resolve_spec_file(case / "spec.json", registry=_registry())
    assert resolved == expected
    assert same_value(resolved, expected), "types differ (int/float/bool) from expected.json"
    assert json.loads(render_resolved_json(resolved)) == expected
