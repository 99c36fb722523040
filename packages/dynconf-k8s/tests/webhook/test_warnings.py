"""The five admitted-with-a-warning configurations, and none for the canonical pod."""

from __future__ import annotations

import pytest

CASES = {
    "volume-medium=disk keeps the rendered document on node-backed storage": (
        {"volume-medium": "disk"},
        {},
    ),
    "file-mode is world-readable": ({"file-mode": "0644"}, {}),
    "watch-seconds is 2 — every replica polls": ({"watch-seconds": "2"}, {}),
    "tls-skip-verify is on: this store is not authenticated": (
        {"tls-skip-verify": "true", "endpoint": "https://consul:8501"},
        {"DYNAMIC_CONFIG_WEBHOOK_ALLOW_TLS_SKIP_VERIFY": "true"},
    ),
    "revoke-on-shutdown is off: the credential stays valid": (
        {
            "source": "vault",
            "endpoint": "https://vault:8200",
            "key": "database/creds/app",
            "token-secret": "vt/token",
            "dynamic": "true",
            "revoke-on-shutdown": "false",
        },
        {},
    ),
}


@pytest.mark.parametrize("fragment", sorted(CASES))
def test_warning(fragment, pod_with, judge):
    extra, env = CASES[fragment]
    response = judge(pod_with(extra), env=env).response["response"]
    assert response["allowed"] is True, response
    warnings = response["warnings"]
    assert len(warnings) == 1
    assert warnings[0].startswith("dynamic-config.rs/")
    assert fragment in warnings[0]


def test_canonical_pod_has_no_warnings(pod_with, judge):
    assert "warnings" not in judge(pod_with()).response["response"]


def test_watch_seconds_five_is_not_warned(pod_with, judge):
    assert "warnings" not in judge(pod_with({"watch-seconds": "5"})).response["response"]
