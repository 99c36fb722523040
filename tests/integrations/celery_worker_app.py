"""The module a real Celery worker in the tests imports (``-A``): the example app, plus one
test-only task that makes the watcher reload while it runs."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from dynconf.integrations.celery import current
from tests.integrations._support import EXAMPLES, reload_during

_spec = importlib.util.spec_from_file_location(
    "dynconf_example_celery", EXAMPLES / "celery" / "app.py"
)
assert _spec is not None and _spec.loader is not None
example = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = example
_spec.loader.exec_module(example)

app = example.app
config = example.config


@app.task(name="tests.during")
def during(new: str) -> dict[str, Any]:
    return reload_during(
        lambda: current(config).greeting, config, Path(os.environ["APP_CONFIG"]), new
    )


@app.task(name="tests.pid")
def pid() -> int:
    return os.getpid()
