"""A figure the pages quote from a bench is the figure the bench last recorded.

The benches keep their last measured figures in ``bench/results/<bench>.json``
(``bench/results.py``: each figure with its moment, machine and command). A page quotes one by
writing an HTML comment right after the number (and its unit), which the rendered page does
not show::

    | consul | 35.7 MiB<!-- bench: agent_memory consul.vmhwm_mib --> |

The number on the page must equal the recorded value rounded to as many decimals as the page
shows, so a new run that moves a figure fails here until the page says what was measured.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
PAGES = sorted([REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("packages/*/README.md")])
MARKER = re.compile(r"<!--\s*bench:\s*(?P<bench>[\w-]+)\s+(?P<figure>[\w.-]+)\s*-->")
QUOTED = re.compile(r"(?P<number>\d[\d,]*(?:\.\d+)?)(?:\s?(?:MiB|KiB|GiB|ms|µs|s|%|\u00d7))?\s*\Z")


@dataclass(frozen=True)
class Quote:
    page: Path
    line: int
    number: str
    bench: str
    figure: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}:{self.bench}.{self.figure}"


def quotes() -> list[Quote]:
    found: list[Quote] = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for marker in MARKER.finditer(line):
                quoted = QUOTED.search(line[: marker.start()])
                found.append(
                    Quote(page, number, quoted["number"] if quoted else "", *marker.groups())
                )
    return found


QUOTES = quotes()


def _recorded(bench: str) -> dict[str, dict[str, Any]]:
    """Each figure of ``bench/results/<bench>.json`` by name: its value and its run."""
    runs = json.loads((RESULTS / f"{bench}.json").read_text())["runs"]
    return {name: {"value": value, **run} for run in runs for name, value in run["figures"].items()}


def test_the_pages_quote_recorded_figures() -> None:
    assert len(QUOTES) >= 4


@pytest.mark.parametrize("quote", QUOTES, ids=[quote.name for quote in QUOTES])
def test_quoted_figure_equals_the_recorded_one(quote: Quote) -> None:
    assert quote.number, f"{quote.name}: the marker follows no number"
    path = RESULTS / f"{quote.bench}.json"
    assert path.exists(), f"{quote.name}: no {path.relative_to(REPO)}; run bench/{quote.bench}.py"
    figures = _recorded(quote.bench)
    assert quote.figure in figures, f"{quote.name}: {quote.bench} recorded no {quote.figure}"
    recorded = float(figures[quote.figure]["value"])
    shown = quote.number.replace(",", "")
    decimals = len(shown.partition(".")[2])
    assert f"{recorded:.{decimals}f}" == shown, (
        f"{quote.name}: the page says {quote.number}, bench/results says {recorded} "
        f"(measured {figures[quote.figure]['measured_at']})"
    )


RESULT_FILES = sorted(RESULTS.glob("*.json"))


@pytest.mark.parametrize("path", RESULT_FILES, ids=[path.name for path in RESULT_FILES])
def test_results_file_says_when_where_and_how(path: Path) -> None:
    results = json.loads(path.read_text())
    assert results["bench"] == path.stem
    assert (REPO / "bench" / f"{path.stem}.py").exists(), f"{path.name}: no bench of that name"
    seen: set[str] = set()
    for run in results["runs"]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run["measured_at"]), run
        assert run["machine"]["cores"] >= 1 and run["machine"]["cpu"], run["measured_at"]
        assert run["command"].startswith(f"python bench/{path.stem}.py"), run["command"]
        assert run["figures"], f"{path.name}: a run of {run['measured_at']} records nothing"
        for name, value in run["figures"].items():
            assert isinstance(value, int | float), f"{path.name}: {name} is no number"
        assert not seen & run["figures"].keys(), f"{path.name}: a figure in two runs"
        seen |= run["figures"].keys()


def test_a_new_run_replaces_only_the_figures_it_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_results", REPO / "bench" / "results.py")
    assert spec is not None and spec.loader is not None
    results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(results)
    monkeypatch.setattr(results, "RESULTS", tmp_path)

    results.record("agent_memory", {"consul.vmhwm_mib": 36.3, "etcd.vmhwm_mib": 39.6})
    results.record("agent_memory", {"consul.vmhwm_mib": 35.0})
    results.record("agent_memory", {"etcd.vmhwm_mib": 40.1})

    runs = json.loads((tmp_path / "agent_memory.json").read_text())["runs"]
    assert [run["figures"] for run in runs] == [
        {"consul.vmhwm_mib": 35.0},
        {"etcd.vmhwm_mib": 40.1},
    ]
    assert results.recorded("agent_memory")["consul.vmhwm_mib"]["value"] == 35.0
