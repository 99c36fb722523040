"""The benches' last measured figures, kept in ``bench/results/<bench>.json``.

A bench calls :func:`record` with the figures it printed; each figure is stored with the
moment, the machine and the command that measured it, so a run of one store replaces that
store's figures and leaves the others as they were. The README and the docs quote a recorded
figure with a marker right after the number, ``<!-- bench: agent_memory consul.vmhwm_mib -->``,
and ``tests/docs/test_bench_figures.py`` fails when the page and the file disagree.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "machine", "record", "recorded"]

RESULTS = Path(__file__).resolve().parent / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, object]:
    """What the figures were measured on: cores, CPU, load, kernel and Python."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def record(bench: str, figures: Mapping[str, float | int]) -> Path:
    """Store ``figures`` (a dotted name to a number) as ``bench``'s latest; the file's path.

    The file holds runs, each with its moment, machine and command; this run's figures leave
    the older runs, and a run left with no figure is dropped.
    """
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{bench}.json"
    kept: dict[str, Any] = (
        json.loads(path.read_text()) if path.exists() else {"bench": bench, "runs": []}
    )
    runs: list[dict[str, Any]] = []
    for run in kept["runs"]:
        run["figures"] = {k: v for k, v in run["figures"].items() if k not in figures}
        if run["figures"]:
            runs.append(run)
    runs.append({
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "command": " ".join(["python", f"bench/{bench}.py", *sys.argv[1:]]),
        "figures": dict(sorted(figures.items())),
    })  # fmt: skip
    path.write_text(json.dumps({"bench": bench, "runs": runs}, indent=2, ensure_ascii=False) + "\n")
    return path


def recorded(bench: str) -> dict[str, dict[str, object]]:
    """Each figure ``bench`` recorded, by name: its value and the run that measured it."""
    path = RESULTS / f"{bench}.json"
    if not path.exists():
        return {}
    return {
        name: {"value": value, **{k: v for k, v in run.items() if k != "figures"}}
        for run in json.loads(path.read_text())["runs"]
        for name, value in run["figures"].items()
    }
