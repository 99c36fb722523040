"""``dynconf.tracing``: nothing without ``OTEL_EXPORTER_OTLP_ENDPOINT``, OTLP/HTTP with it.

The loopback collector is :mod:`tests.fixtures.otlp` (the ``otlp_receiver`` fixture).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid

import pytest

from dynconf.tracing import ENDPOINT_ENV, Tracing, safe_attributes, tracing_from_env
from tests.fixtures.otlp import Receiver


def test_unset_variable_imports_no_opentelemetry() -> None:
    script = (
        "import sys\n"
        "from dynconf.tracing import tracing_from_env\n"
        "tracing = tracing_from_env({}, 'probe')\n"
        "with tracing.span('work', store='file:/x', count=1) as span:\n"
        "    span.set(outcome='done')\n"
        "tracing.shutdown()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry')\n"
        "print(type(tracing).__name__, tracing.enabled, loaded)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == "Tracing False []"


def test_an_empty_variable_is_unset() -> None:
    tracing = tracing_from_env({ENDPOINT_ENV: "  "}, "probe")
    assert type(tracing) is Tracing and not tracing.enabled


def test_attributes_lose_credentials_and_userinfo() -> None:
    kept = safe_attributes(
        {
            "store": "redis://app:hunter2@cache:6379/0",
            "db_password": "hunter2",
            "X-Vault-Token": "hvs.abc",
            "count": 3,
            "missing": None,
        }
    )
    assert kept == {"store": "redis://app:…@cache:6379/0", "count": 3}


def test_spans_arrive_under_the_service_name_without_secrets(otlp_receiver: Receiver) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    tracing = tracing_from_env({ENDPOINT_ENV: otlp_receiver.url}, "dynconf-test-service")
    assert tracing.enabled
    with tracing.span("fetch", store=f"vault://app:{secret}@vault:8200", token=secret) as span:
        span.set(outcome="served", size=12, api_key=secret)
    with pytest.raises(ValueError, match="boom"), tracing.span("render"):
        raise ValueError(f"boom {secret}")  # an exception's message never leaves
    tracing.shutdown()
    tracing.shutdown()  # twice is harmless

    spans = otlp_receiver.wait_for(["fetch", "render"])
    assert {span.service for span in spans} == {"dynconf-test-service"}
    fetch = otlp_receiver.named("fetch")[0]
    assert fetch.attributes == {
        "store": "vault://app:…@vault:8200",
        "outcome": "served",
        "size": "12",
    }
    render = otlp_receiver.named("render")[0]
    assert render.attributes == {"error.type": "ValueError"}
    assert otlp_receiver.leaked(secret) == []


def test_a_set_variable_without_the_sdk_warns_once_and_runs_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # None in sys.modules makes the import fail as a missing package does
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with caplog.at_level(logging.WARNING, logger="dynconf.tracing"):
        tracing = tracing_from_env(
            {ENDPOINT_ENV: "http://user:pw@127.0.0.1:9"}, "probe", extra="dynconf-k8s[otel]"
        )
    assert type(tracing) is Tracing
    with tracing.span("work"):
        pass
    warned = [r for r in caplog.records if r.getMessage() == "tracing_unavailable"]
    assert len(warned) == 1 and "dynconf-k8s[otel]" in warned[0].reason  # type: ignore[attr-defined]
    assert "pw" not in str(vars(warned[0]))
