"""OTLP traces for every dynconf process — only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

The architecture's runtime rule (§5) is that a long-running process sends traces only when an
operator points it at a collector. This module is that rule, once, for the agent, the webhook,
the operator, the node agent and the config server: each process calls
:func:`tracing_from_env` with its own service name, wraps its units of work in
:meth:`Tracing.span`, and calls :meth:`Tracing.shutdown` on the way out.

Why it is shaped this way:

- **Nothing to pay without a collector.** With the variable unset :func:`tracing_from_env`
  returns the base :class:`Tracing`, whose span is a generator that yields a shared no-op
  handle. No ``opentelemetry`` module is imported — not even the API — so a process without a
  collector neither loads the SDK nor needs the optional ``otel`` extra installed.
- **Traces are commentary.** A set variable with the SDK missing is said once and the process
  runs on with no tracing; a slow or dead collector never holds up the process's exit (the
  last flush waits at most :data:`FLUSH_DEADLINE`).
- **No value leaves in a span.** Callers pass metadata only (names, counts, outcomes,
  fingerprints, a store's ``describe()``), never a document value or a credential. As a second
  line of defence every string attribute goes through :func:`dynconf.stores.redact_url` (a URL
  with userinfo loses its password), attributes whose *name* says credential are dropped, and
  an exception is recorded by its type only: an exception's message or stack can carry a URL,
  a header or a value, so neither the message nor a traceback is exported.

The OpenTelemetry SDK and its OTLP/HTTP exporter are the optional ``otel`` extra of
dynconf-core (each process's package re-exports it: ``dynconf-k8s[otel]``,
``dynconf-store-configserver[otel]``). The exporter reads the standard ``OTEL_EXPORTER_OTLP_*``
variables for headers, timeout and certificates; the endpoint is taken from the mapping given
to :func:`tracing_from_env` so a process configured from its own environment mapping traces to
what that mapping says.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

from dynconf.stores import redact_url

__all__ = [
    "ENDPOINT_ENV",
    "FLUSH_DEADLINE",
    "SERVICE_NAME_ENV",
    "TRACES_ENDPOINT_ENV",
    "Attribute",
    "Span",
    "Tracing",
    "safe_attributes",
    "tracing_from_env",
]

ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""The collector's base URL; set turns tracing on, unset (or empty) keeps it off."""
TRACES_ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""The standard per-signal override: the full traces URL, used as given."""
SERVICE_NAME_ENV: Final = "OTEL_SERVICE_NAME"
"""The standard override of the process's own service name."""
FLUSH_DEADLINE: Final = 2.0
"""Seconds the exit waits for the last spans to leave; a slow collector never holds it up."""

Attribute = str | int | float | bool
"""What a span attribute may be (OpenTelemetry's scalar types)."""

_CREDENTIAL_WORDS: Final = (
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "authorization",
    "apikey",
    "api_key",
    "private",
)
"""An attribute whose name contains one of these is never exported, whatever its value."""

log = logging.getLogger("dynconf.tracing")


def _is_credential_name(name: str) -> bool:
    lowered = name.lower().replace("-", "_")
    return any(word in lowered for word in _CREDENTIAL_WORDS)


def safe_attributes(attributes: Mapping[str, Attribute | None]) -> dict[str, Attribute]:
    """The attributes a span may carry: ``None`` left out, credentials out, URLs redacted.

    Public so a test (or a process adding attributes of its own) can see exactly what would
    be exported.
    """
    kept: dict[str, Attribute] = {}
    for name, value in attributes.items():
        if value is None or _is_credential_name(name):
            continue
        kept[name] = redact_url(value) if isinstance(value, str) else value
    return kept


class Span:
    """A handle on the open span: :meth:`set` adds what is known only at the end (outcome).

    The base class is the no-op every span of a process without a collector yields.
    """

    def set(self, **attributes: Attribute | None) -> None:
        """Add attributes to the span; ``None`` values are left out."""


_NO_SPAN: Final = Span()


class Tracing:
    """No tracing: every span is a no-op (the process without a collector).

    A subclass exports; callers only ever see this interface, so they never test whether
    tracing is on.
    """

    enabled: bool = False
    service: str = ""

    @contextlib.contextmanager
    def span(self, name: str, /, **attributes: Attribute | None) -> Iterator[Span]:
        """Time ``name`` around the block; ``None`` attributes are left out."""
        yield _NO_SPAN

    def shutdown(self) -> None:
        """Flush what is left, within :data:`FLUSH_DEADLINE`; safe to call more than once."""


class _OtlpSpan(Span):
    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, **attributes: Attribute | None) -> None:
        self._span.set_attributes(safe_attributes(attributes))


class _OtlpTracing(Tracing):
    """OpenTelemetry SDK tracer: batched OTLP/HTTP export off the caller's thread."""

    enabled = True

    def __init__(self, service: str, traces_url: str, scope: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import Status, StatusCode

        self.service = service
        self._status = Status
        self._error = StatusCode.ERROR
        # shutdown_on_exit=False: the SDK's own atexit flush has no deadline, and a process
        # that calls shutdown() (every one does) must not then block on a dead collector
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": service}), shutdown_on_exit=False
        )
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url)))
        self._tracer: Any = self._provider.get_tracer(scope)
        self._lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def span(self, name: str, /, **attributes: Attribute | None) -> Iterator[Span]:
        # record_exception/set_status_on_exception off: the SDK would export the exception's
        # message and traceback, which may carry a URL or a value; the type name is enough
        with self._tracer.start_as_current_span(
            name,
            attributes=safe_attributes(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield _OtlpSpan(span)
            except BaseException as error:
                span.set_attribute("error.type", type(error).__name__)
                span.set_status(self._status(self._error, type(error).__name__))
                raise

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # the exporter retries a refusing collector for its own timeout; the process does not
        # wait that long, so the flush runs on a thread the exit leaves behind if it must
        done = threading.Thread(target=self._provider.shutdown, name="otlp-flush", daemon=True)
        done.start()
        done.join(FLUSH_DEADLINE)


def _traces_url(environ: Mapping[str, str], endpoint: str) -> str:
    """The traces URL as the OTLP/HTTP convention builds it: ``<endpoint>/v1/traces``."""
    explicit = (environ.get(TRACES_ENDPOINT_ENV) or "").strip()
    if explicit:
        return explicit
    return endpoint.rstrip("/") + "/v1/traces"


def tracing_from_env(
    environ: Mapping[str, str],
    service: str,
    *,
    extra: str = "dynconf-core[otel]",
) -> Tracing:
    """OTLP/HTTP tracing as ``service`` when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else none.

    ``service`` is the process's service name (``OTEL_SERVICE_NAME`` overrides it); ``extra``
    names the package extra that brings the SDK, for the one warning a set variable without
    the SDK gives. That warning is all: traces are commentary, never a reason for a process
    not to do its work.
    """
    endpoint = (environ.get(ENDPOINT_ENV) or "").strip()
    if not endpoint:
        return Tracing()
    name = (environ.get(SERVICE_NAME_ENV) or "").strip() or service
    url = _traces_url(environ, endpoint)
    try:
        tracing = _OtlpTracing(name, url, scope=service)
    except ImportError:
        log.warning(
            "tracing_unavailable",
            extra={
                "service": name,
                "reason": f"{ENDPOINT_ENV} is set but the OpenTelemetry SDK is not installed; "
                f"install {extra}",
            },
        )
        return Tracing()
    log.info("tracing", extra={"service": name, "otlp_endpoint": redact_url(url)})
    return tracing
