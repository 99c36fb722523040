"""OTLP traces of the agent's work — only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

Three spans tell where a render's time went: ``fetch`` (one read of the store, whatever asked
for it), ``render`` (resolve, validate and render every output, no write) and ``publish`` (the
atomic writes). Their attributes name the store (its ``describe()``, never a credential), the
files, sizes, fingerprints and revisions — never a document value.

The OpenTelemetry SDK and its OTLP/HTTP exporter are the optional ``otel`` extra of
dynconf-k8s and are imported only when the variable is set, so an agent without a collector
pays nothing for them. The exporter reads the standard ``OTEL_EXPORTER_OTLP_*`` variables
itself (endpoint, headers, timeout); spans leave in batches off the loop, and the last batch
is flushed at exit within :data:`FLUSH_DEADLINE`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

from dynconf.stores import redact_url

__all__ = ["ENDPOINT_ENV", "FLUSH_DEADLINE", "Tracing", "tracing_from_env"]

ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
FLUSH_DEADLINE: Final = 2.0
"""Seconds the exit waits for the last spans to leave; a slow collector never holds it up."""
SERVICE_NAME: Final = "dynamic-config-agent"

Attribute = str | int | float | bool

log = logging.getLogger("dynconf_k8s.agent")


class Tracing:
    """No tracing: every span is a no-op (the agent without a collector)."""

    enabled = False

    @contextlib.contextmanager
    def span(self, name: str, **attributes: Attribute | None) -> Iterator[None]:
        """Time ``name`` around the block; ``None`` attributes are left out."""
        yield

    def shutdown(self) -> None:
        """Flush what is left, within :data:`FLUSH_DEADLINE`."""


class _OtlpTracing(Tracing):
    enabled = True

    def __init__(self, endpoint: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self._provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self._tracer: Any = self._provider.get_tracer("dynconf_k8s.agent")
        log.info("tracing", extra={"otlp_endpoint": redact_url(endpoint)})

    @contextlib.contextmanager
    def span(self, name: str, **attributes: Attribute | None) -> Iterator[None]:
        kept = {key: value for key, value in attributes.items() if value is not None}
        with self._tracer.start_as_current_span(name, attributes=kept):
            yield

    def shutdown(self) -> None:
        # the exporter retries a refusing collector for its own timeout; the process does not
        # wait that long, so the flush runs on a thread the exit leaves behind if it must
        done = threading.Thread(target=self._provider.shutdown, daemon=True)
        done.start()
        done.join(FLUSH_DEADLINE)


def tracing_from_env(environ: Mapping[str, str]) -> Tracing:
    """OTLP/HTTP tracing when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else no tracing.

    A set variable with the ``otel`` extra missing is said once and the agent runs on: traces
    are commentary, never a reason not to deliver configuration.
    """
    endpoint = (environ.get(ENDPOINT_ENV) or "").strip()
    if not endpoint:
        return Tracing()
    try:
        return _OtlpTracing(endpoint)
    except ImportError:
        log.warning(
            "tracing_unavailable",
            extra={
                "reason": f"{ENDPOINT_ENV} is set but the OpenTelemetry SDK is not installed; "
                "install dynconf-k8s[otel] (the agent image has it)"
            },
        )
        return Tracing()
