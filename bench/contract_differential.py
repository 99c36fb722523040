"""The long differential run: admission, the agent's parser and the node agent, N sets.

    uv run python bench/contract_differential.py [N]

Feeds N generated annotation sets (default 20000; the CI test runs 300) through the three
front ends of ``packages/dynconf-k8s/tests/contract/differential.py`` — same strategy, same
property — and prints one line: how many sets were tried, how long it took, and the first
disagreement with its shrunk input when there is one. Exit status is 1 on a disagreement.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings

_HERE = Path(__file__).resolve().parents[1] / "packages/dynconf-k8s/tests/contract"


def _differential() -> ModuleType:
    """The CI test's module, loaded by path (a test directory is not a package)."""
    spec = importlib.util.spec_from_file_location("differential", _HERE / "differential.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {_HERE / 'differential.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 20000
    differential = _differential()
    tried = 0
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch)

        @settings(
            max_examples=count,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(annotations=differential.annotation_sets())
        def run(annotations: dict[str, str]) -> None:
            nonlocal tried
            tried += 1
            differential.check(annotations, target)

        started = time.monotonic()
        try:
            run()
        except AssertionError as error:
            print(f"contract differential: {tried} tried, disagreement: {error}")
            return 1
    elapsed = time.monotonic() - started
    print(f"contract differential: {tried} tried in {elapsed:.1f}s, 0 disagreements")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
