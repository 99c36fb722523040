"""Importing an adapter whose framework is absent names the extra that installs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

ADAPTERS = {
    "fastapi": "fastapi",
    "starlette": "starlette",
    "litestar": "litestar",
    "flask": "flask",
    "quart": "quart",
    "django": "django",
    "robyn": "robyn",
    "celery": "celery",
}


@pytest.mark.parametrize(("adapter", "framework"), sorted(ADAPTERS.items()))
def test_an_adapter_without_its_framework_names_the_extra(adapter: str, framework: str) -> None:
    program = (
        f"import sys; sys.modules[{framework!r}] = None\n"  # what an absent package looks like
        "import dynconf.integrations  # the shared half imports no framework\n"
        f"import dynconf.integrations.{adapter}\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: dynconf.integrations."), last
    assert f"pip install 'dynconf-core[{adapter}]'" in last, last


def test_the_shared_half_imports_no_framework() -> None:
    program = (
        "import sys, dynconf.integrations\n"
        f"loaded = sorted(set({sorted(set(ADAPTERS.values()))!r}) & set(sys.modules))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
