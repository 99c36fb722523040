"""The webhook's metrics, names and buckets as the contract spells them.

Each app owns its own :class:`CollectorRegistry`, so tests build apps side by side without
one counting into another.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from dynconf_k8s.contract.refusals import REASON_LABELS
from dynconf_k8s.inforce.holder import InstallationMetrics

__all__ = ["BUCKETS", "WebhookMetrics"]

BUCKETS: Final = (0.0001, 0.0005, 0.001, 0.005, 0.025, 0.1, 1.0)


class WebhookMetrics:
    """Admissions by outcome, refusals by reason, duration, patch bytes, certificates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.admissions = Counter(
            "dynamic_config_admissions_total",
            "Admission decisions by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "dynamic_config_admission_refusals_total",
            "Refused admissions by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "dynamic_config_admission_duration_seconds",
            "Time to decide one admission.",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.patch_bytes = Counter(
            "dynamic_config_admission_patch_bytes_total",
            "Bytes of base64 patch returned.",
            registry=self.registry,
        )
        self.rotations = Counter(
            "dynamic_config_certificate_rotations_total",
            "Serving certificates rotated by this process.",
            registry=self.registry,
        )
        self.expires_at = Gauge(
            "dynamic_config_certificate_expires_at_seconds",
            "Unix time the serving certificate expires.",
            registry=self.registry,
        )
        self.installation = InstallationMetrics(self.registry, "dynamic_config_webhook")
        """Ours: live installation reloads, the generation in force, whether it is the newest."""
        for outcome in ("skipped", "patched", "refused"):
            self.admissions.labels(outcome=outcome)
        for label in (*REASON_LABELS.values(), "other"):
            self.refusals.labels(reason=label)

    def observe(self, outcome: str, reason: str | None, seconds: float, patch_bytes: int) -> None:
        self.admissions.labels(outcome=outcome).inc()
        if outcome == "refused":
            self.refusals.labels(reason=REASON_LABELS.get(reason or "", "other")).inc()
        self.duration.observe(seconds)
        if patch_bytes:
            self.patch_bytes.inc(patch_bytes)
