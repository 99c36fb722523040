"""``dynconf``'s public names: one runtime table, the type checkers' imports agree with it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dynconf

INIT = Path(dynconf.__file__)


def _type_checking_names() -> set[str]:
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in inner.names)
    return names


def test_the_type_checkers_imports_are_the_runtime_table() -> None:
    assert _type_checking_names() == set(dynconf._EXPORTS)


def test_every_exported_name_resolves_from_the_module_it_is_listed_under() -> None:
    for name in dynconf._EXPORTS:
        assert getattr(dynconf, name) is not None, name

    assert set(dynconf.__all__) == {*dynconf._EXPORTS, "__version__"}


def test_importing_dynconf_loads_none_of_its_heavy_modules() -> None:
    probe = (
        "import sys, dynconf; "
        "print(sorted(m for m in ('dynconf.config', 'pydantic', 'jinja2', 'jsonschema') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"
