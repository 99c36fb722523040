"""OTLP traces of the agent's work — :mod:`dynconf.tracing` under the agent's service name.

Three spans tell where a render's time went: ``fetch`` (one read of the store, whatever asked
for it), ``render`` (resolve, validate and render every output, no write) and ``publish`` (the
atomic writes). Their attributes name the store (its ``describe()``, never a credential), the
files, sizes, fingerprints and revisions — never a document value.

The mechanism (no-op without ``OTEL_EXPORTER_OTLP_ENDPOINT``, OTLP/HTTP export, the bounded
flush at exit, the attribute redaction) lives in :mod:`dynconf.tracing`, shared by every
process; this module only names the agent and the extra its image installs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from dynconf.tracing import ENDPOINT_ENV, FLUSH_DEADLINE, Span, Tracing
from dynconf.tracing import tracing_from_env as _tracing_from_env

__all__ = ["ENDPOINT_ENV", "FLUSH_DEADLINE", "SERVICE_NAME", "Span", "Tracing", "tracing_from_env"]

SERVICE_NAME: Final = "dynamic-config-agent"


def tracing_from_env(environ: Mapping[str, str]) -> Tracing:
    """The agent's tracing: OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else none."""
    return _tracing_from_env(
        environ, SERVICE_NAME, extra="dynconf-k8s[otel] (the agent image has it)"
    )
