"""``DynamicConfigStoreStale`` fires for a real agent whose store is black-holed.

The input is the agent's own ``/metrics``: two real scrapes taken while a relay black-holes
its consul show ``staleness_seconds`` growing a second a second (no watch report restarts
it), and the later scraped value seeds a ``promtool test rules`` series that goes on growing
at that rate, one sample a minute (what a Prometheus keeps scraping from an agent that stays
cut off). promtool evaluates deploy/observability/rules.yaml on it: silent while the age is
at most the rule's 600 s, firing on the first sample past it. ``namespace`` and ``pod`` are
the target labels Prometheus adds to the pod's scrape; the agent itself exports none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.eventually import eventually
from tests.fixtures.relay import Relay
from tests.observability.test_alert_rules import RULES, _promtool

from .support import START, WATCH, Start, holds, start_agent

SERIES = "dynamic_config_agent_staleness_seconds"
THRESHOLD = 600
"""``DynamicConfigStoreStale``'s ``> 600``, as the book prints it."""
TARGET = {"namespace": "freshness", "pod": "app-0"}


def scraped_staleness(process: Any) -> tuple[float, float, str]:
    """``(when, value, exposition)``: one real scrape and its staleness sample."""
    status, text = process.get("/metrics")
    assert status == 200
    when = time.monotonic()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == SERIES:
                return when, float(sample.value), text
    raise AssertionError(f"{SERIES} is not in the agent's exposition")


def humanize_duration(seconds: int) -> str:
    """Prometheus's ``humanizeDuration`` for a whole number of seconds from 1 s to a day."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def promtool_case(scraped: int) -> dict[str, Any]:
    """The unit test: the scraped age growing 60 s a minute, checked around the threshold."""
    fires_at = (THRESHOLD - scraped) // 60 + 1  # the first whole minute past the threshold
    labels = ", ".join(f'{name}="{value}"' for name, value in TARGET.items())
    firing = scraped + 60 * fires_at
    return {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "name": f"a black-holed agent scraped at {scraped} s of staleness",
            "interval": "1m",
            "input_series": [{
                "series": f"{SERIES}{{{labels}}}", "values": f"{scraped}+60x{fires_at + 5}",
            }],
            "alert_rule_test": [
                {"eval_time": "0m", "alertname": "DynamicConfigStoreStale", "exp_alerts": []},
                {"eval_time": f"{fires_at - 1}m", "alertname": "DynamicConfigStoreStale",
                 "exp_alerts": []},
                {"eval_time": f"{fires_at}m", "alertname": "DynamicConfigStoreStale",
                 "exp_alerts": [{
                     "exp_labels": {"severity": "warning", **TARGET},
                     "exp_annotations": {
                         "summary": f"freshness/app-0: no successful read for "
                                    f"{humanize_duration(firing)}",
                         "description": "The agent keeps serving its last good render; check "
                                        "the store and the agent's logs.",
                     },
                 }]},
            ],
        }],
    }  # fmt: skip


def test_a_black_holed_agents_real_staleness_would_fire_the_stale_alert(
    agent: Start,
    consul: Any,
    tmp_path: Path,
    cut_proxy: Callable[[str, int], Relay],
    promtool_bin: Path,
) -> None:
    relay = cut_proxy(consul.host, consul.port)
    out = tmp_path / "app.json"
    consul.put({"v": 1})
    process = start_agent(agent, consul, relay, out)
    assert eventually(holds(out, 1), START)
    relay.blackhole()
    time.sleep(WATCH)  # lets time pass while nothing can be read
    first_at, first, _ = scraped_staleness(process)
    time.sleep(2 * WATCH)
    last_at, last, exposition = scraped_staleness(process)
    (tmp_path / "scrape.txt").write_text(exposition)
    # the gauge is whole seconds: it may trail the clock by under one second at each end
    assert abs((last - first) - (last_at - first_at)) <= 1.5, (first, last, last_at - first_at)
    assert last >= 2 * WATCH

    case = tmp_path / "DynamicConfigStoreStale.scraped.yaml"
    case.write_text(yaml.safe_dump(promtool_case(int(last)), sort_keys=False))
    result = _promtool(promtool_bin, "test", "rules", str(case))
    assert result.returncode == 0, result.stdout + result.stderr + case.read_text()
