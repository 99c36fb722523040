"""``dynamic-config-webhook``: ``serve`` (the admission server), ``validate FILE…`` and
``explain FILE…`` (why a pod gets what it gets, key by key).

All three read the installation from the process environment (and the mounted document) and
refuse to go on when it is not valid, listing every problem — a typo stops the install,
never the first admission.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine, Sequence
from typing import Any, Final

from dynconf.cli import HELP_FLAGS, VERSION_FLAG, asked_for, version_line
from dynconf.logs import configure_logging, console_entry
from dynconf_k8s.contract.installation import InstallationError

__all__ = ["SERVICE_NAME", "main"]

SERVICE_NAME: Final = "dynamic-config-webhook"
"""The OTLP service name of ``serve`` (traces only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set)."""

_USAGE = """usage: dynamic-config-webhook serve
       dynamic-config-webhook validate [--classes <file>]... [--namespace <ns>] <pod.yaml>...
       dynamic-config-webhook explain [--output text|json] [--classes <file>]...
                                      [--namespace <ns>] <pod.yaml>...
       dynamic-config-webhook --version

A <pod.yaml> of - is read from stdin. Without a command: serve.
"""
_SERVE_USAGE: Final = """usage: dynamic-config-webhook serve

Serve admission over HTTPS with the installation and TLS settings of the environment.
"""
_VALUE_FLAGS: Final = {
    "serve": (),
    "validate": ("--classes", "--namespace"),
    "explain": ("--output", "-o", "--classes", "--namespace", "-n"),
}
"""Each command's flags that take a value (the word after one is not a flag)."""


def _command_usage(command: str) -> str:
    if command == "validate":
        from dynconf_k8s.webhook.validate import USAGE

        return USAGE + "\n"
    if command == "explain":
        from dynconf_k8s.webhook.explain import USAGE

        return USAGE + "\n"
    return _SERVE_USAGE


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Serve on uvloop when it is installed (every image has it), else on asyncio's loop.

    The loop ``uvicorn.run`` would choose, and the config server's. Admission is the
    cluster's critical path; on the bench machine the sustained row of
    ``bench/peers.py --rows webhook`` moved from 0.78x to 0.87x of vault-k8s with it, though
    that machine's noise is of the same size (README, "Side by side with the peers").
    """
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


@console_entry("dynamic-config-webhook")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (and ``sys.exit``s with it from the console script)."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "serve"
    if command in (*HELP_FLAGS, "help"):
        sys.stdout.write(_USAGE)
        return 0
    if command == VERSION_FLAG:
        sys.stdout.write(version_line("dynamic-config-webhook", "dynconf-k8s"))
        return 0
    if command in _VALUE_FLAGS:
        # before the installation is read: asking how to run a command never runs it
        asked = asked_for(args[1:], _VALUE_FLAGS[command])
        if asked == "help":
            sys.stdout.write(_command_usage(command))
            return 0
        if asked == "version":
            sys.stdout.write(version_line("dynamic-config-webhook", "dynconf-k8s"))
            return 0
    try:
        if command == "validate":
            from dynconf_k8s.webhook.settings import load_installation
            from dynconf_k8s.webhook.validate import USAGE, run_validate, split_args

            parsed = split_args(args[1:])
            if parsed is None:
                sys.stderr.write(USAGE + "\n")
                return 2
            paths, class_files, namespace = parsed
            return run_validate(
                paths,
                load_installation(),
                sys.stdout,
                sys.stderr,
                class_files=class_files,
                namespace=namespace,
            )
        if command == "explain":
            from dynconf_k8s.webhook.explain import run_explain
            from dynconf_k8s.webhook.settings import load_installation

            return run_explain(args[1:], load_installation(), sys.stdout, sys.stderr)
        if command == "serve":
            from dynconf.tracing import tracing_from_env
            from dynconf_k8s.webhook.server import NoTlsMaterial, serve
            from dynconf_k8s.webhook.settings import WebhookSettings

            configure_logging()
            settings = WebhookSettings.from_environ()
            tracing = tracing_from_env(os.environ, SERVICE_NAME, extra="dynconf-k8s[otel]")
            try:
                _run(serve(settings, tracing))
            except NoTlsMaterial as exc:
                sys.stderr.write(f"dynamic-config-webhook: {exc}\n")
                return 1
            finally:
                tracing.shutdown()
            return 0
    except InstallationError as exc:
        sys.stderr.write(f"dynamic-config-webhook: {exc}\n")
        return 1
    sys.stderr.write(_USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main())
