"""deploy/observability/rules.yaml evaluated by a real ``promtool`` on synthetic series.

Each alert has one promtool unit-test file in ``alerts/<AlertName>.yaml`` that shows it firing
when it should (labels and rendered annotations included) and staying silent when it should not;
this runner checks the rule file, runs each test file, and keeps the two sets in step. The five
alerts the book names must keep its names and expressions exactly.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "observability" / "rules.yaml"
ALERT_TESTS = Path(__file__).parent / "alerts"

BOOK_ALERTS = {
    "DynamicConfigWebhookCertificateExpiring": (
        "dynamic_config_certificate_expires_at_seconds - time() < 3600"
    ),
    "DynamicConfigAdmissionSlow": (
        "histogram_quantile(0.99, rate(dynamic_config_admission_duration_seconds_bucket[5m])) > 1"
    ),
    "DynamicConfigStoreStale": "dynamic_config_agent_staleness_seconds > 600",
    "DynamicConfigRenderFailing": "increase(dynamic_config_agent_render_failures_total[10m]) > 0",
    "DynamicConfigWatchFlapping": (
        "increase(dynamic_config_agent_watch_reconnects_total[15m]) > 5"
    ),
}
"""The book's alerting rules, name -> expression, as it prints them (none has a ``for:``)."""


def _alerts() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


ALERTS = sorted(_alerts())


def _promtool(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_rule_file_is_valid(promtool_bin: Path) -> None:
    result = _promtool(promtool_bin, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_books_alerts_keep_its_names_and_thresholds() -> None:
    alerts = _alerts()
    for name, expression in BOOK_ALERTS.items():
        assert name in alerts, f"{name} is missing from {RULES.name}"
        assert alerts[name]["expr"].strip() == expression, name
        assert "for" not in alerts[name], f"{name}: the book's rule fires without a `for:`"


def test_every_alert_has_exactly_one_test_file() -> None:
    files = {path.stem for path in ALERT_TESTS.glob("*.yaml")}
    assert files == set(ALERTS)


@pytest.mark.parametrize("alert", ALERTS)
def test_the_alert_fires_and_stays_silent_as_its_test_says(alert: str, promtool_bin: Path) -> None:
    path = ALERT_TESTS / f"{alert}.yaml"
    spec = yaml.safe_load(path.read_text())
    checks = [check for test in spec["tests"] for check in test.get("alert_rule_test", [])]
    assert {check["alertname"] for check in checks} == {alert}, "a file tests its own alert only"
    assert any(check["exp_alerts"] for check in checks), f"{path.name} never shows it firing"
    assert any(not check["exp_alerts"] for check in checks), f"{path.name} never shows it silent"

    result = _promtool(promtool_bin, "test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
