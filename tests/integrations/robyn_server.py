"""What the Robyn test runs as a subprocess: the example app plus a test-only route that
makes the watcher reload while a request runs, served on ``PORT``."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from dynconf.integrations import current
from tests.integrations._support import EXAMPLES, reload_during

_spec = importlib.util.spec_from_file_location(
    "dynconf_example_robyn", EXAMPLES / "robyn" / "app.py"
)
assert _spec is not None and _spec.loader is not None
example = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = example
_spec.loader.exec_module(example)


@example.app.get("/during")
@example.integration.scoped
def during(request: object) -> str:
    config = example.config
    answer = reload_during(
        lambda: current(config).greeting, config, Path(os.environ["APP_CONFIG"]), "bonjour"
    )
    return json.dumps(answer)


if __name__ == "__main__":
    example.app.start(host="127.0.0.1", port=int(os.environ["PORT"]))
