"""deploy/observability names only series our components export: the contract's series, each
also found in the component's source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
OBSERVABILITY = REPO / "deploy" / "observability"
SOURCES = REPO / "packages" / "dynconf-k8s" / "src" / "dynconf_k8s"

AGENT = [
    "renders_total",
    "render_failures_total",
    "last_render_timestamp_seconds",
    "deliveries_total",
    "resyncs_total",
    "watch_connected",
    "watch_reconnects_total",
    "staleness_seconds",
    "lease_renewals_total",
    "lease_renewal_failures_total",
    "lease_revocations_total",
    "lease_ttl_seconds",
    "generation",
    "notifications_total",
    "notification_failures_total",
    "drift",
    "drift_total",
    "canary_holding",
    "canary_percent",
    "acks_total",
    "ack_mismatches_total",
    "applied",
    "unapplied_seconds",
    "tls_reloads_total",
    "tls_verification_skipped",
    "absent",
    "absent_total",
    "reconcile_duration_seconds",
    "reconcile_failures_total",
]
OPERATOR = [
    "renders_total",
    "render_failures_total",
    "last_render_timestamp_seconds",
    "reconcile_duration_seconds",
    "reconcile_failures_total",
    "restarts_total",
    "restart_failures_total",
    "pods_without_agent",
    "pods_without_agent_total",
]
EMITTED = {
    **{f"dynamic_config_agent_{s}": ("agent", s) for s in AGENT},
    **{f"dynamic_config_operator_{s}": ("operator", s) for s in OPERATOR},
    **{
        f"dynamic_config_{s}": ("webhook", f"dynamic_config_{s}")
        for s in (
            "admissions_total",
            "admission_refusals_total",
            "admission_duration_seconds",
            "admission_patch_bytes_total",
            "certificate_rotations_total",
            "certificate_expires_at_seconds",
        )
    },
    "dynamic_config_node_agent_documents": ("node", "dynamic_config_node_agent_documents"),
    "dynamic_config_node_agent_readers": ("node", "dynamic_config_node_agent_readers"),
    "dynamic_config_node_agent_staleness_seconds": (
        "node",
        "dynamic_config_node_agent_staleness_seconds",
    ),
    # ours: the installation in force (issue 20, item 1) and the store calls (item 3), whose
    # names the components build from their prefix
    "dynamic_config_webhook_installation_valid": (
        "webhook",
        'InstallationMetrics(self.registry, "dynamic_config_webhook")',
    ),
    "dynamic_config_operator_installation_valid": (
        "operator",
        "InstallationMetrics(self.registry, PREFIX)",
    ),
    "dynamic_config_agent_store_requests_total": ("agent", "StoreRequestsCollector(PREFIX)"),
    "dynamic_config_operator_store_requests_total": ("operator", "StoreRequestsCollector(PREFIX)"),
    "dynamic_config_node_agent_store_requests_total": (
        "node",
        'StoreRequestsCollector("dynamic_config_node_agent")',
    ),
}
"""Series name -> (package under dynconf_k8s, the string its source must contain)."""

HISTOGRAMS = {"dynamic_config_admission_duration_seconds", "dynamic_config_agent_reconcile_duration_seconds",
              "dynamic_config_operator_reconcile_duration_seconds"}  # fmt: skip
SERIES = re.compile(r"\bdynamic_config_[a-z0-9_]+")
RECORDED = re.compile(r"\bdynamic_config:[a-z0-9_:]+")


def _series(expression: str) -> set[str]:
    names = set()
    for found in SERIES.findall(expression):
        name = found
        for suffix in ("_bucket", "_sum", "_count"):
            base = found.removesuffix(suffix)
            if base != found and base in HISTOGRAMS:
                name = base
        names.add(name)
    return names


def _rule_expressions() -> list[str]:
    rules = yaml.safe_load((OBSERVABILITY / "rules.yaml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def _recorded() -> set[str]:
    rules = yaml.safe_load((OBSERVABILITY / "rules.yaml").read_text())
    return {rule["record"] for g in rules["groups"] for rule in g["rules"] if "record" in rule}


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads((OBSERVABILITY / "dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def test_every_series_an_expression_names_is_one_we_emit() -> None:
    recorded = _recorded()
    for expression in _rule_expressions() + _dashboard_expressions():
        for name in _series(expression):
            assert name in EMITTED or name in recorded, f"{name} (in {expression!r})"


def test_every_emitted_series_is_really_in_its_component() -> None:
    for name, (package, needle) in EMITTED.items():
        text = "\n".join(p.read_text() for p in (SOURCES / package).rglob("*.py"))
        if package == "agent" and needle in (
            "reconcile_duration_seconds",
            "reconcile_failures_total",
        ):
            text += "\n".join(p.read_text() for p in (SOURCES / "operator").rglob("*.py"))
        assert needle in text, f"{name}: {needle!r} not found under dynconf_k8s/{package}"


def test_the_dashboard_reads_the_four_fleet_recording_rules() -> None:
    read = {name for e in _dashboard_expressions() for name in RECORDED.findall(e)}

    assert read == {
        "dynamic_config:admissions:rate5m",
        "dynamic_config:admission_refusals:rate5m",
        "dynamic_config:admission_duration_seconds:p99_5m",
        "dynamic_config:operator_reconcile_duration_seconds:p99_5m",
    }
    assert read <= _recorded()
