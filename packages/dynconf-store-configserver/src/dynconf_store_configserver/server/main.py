"""``dynamic-config-server <config-file>``: validate the file, then serve with uvicorn.

A file that is refused prints every reason on stderr and exits 2 before anything listens.
SIGTERM stops accepting, ends open change streams (clients reconnect elsewhere) and drains
requests for up to 30 s. ``OTEL_EXPORTER_OTLP_ENDPOINT`` turns on OTLP traces (service
``dynamic-config-server``: one span per request and per document rebuild), flushed within a
bounded wait after the drain; the SDK is the ``otel`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
from typing import Any, Final

from dynconf.cli import VERSION_FLAG, version_line
from dynconf.logs import console_entry
from dynconf_store_configserver.server.settings import Settings, SettingsError, load_settings

__all__ = ["DRAIN_SECONDS", "SERVICE_NAME", "build_server", "main"]

DRAIN_SECONDS: Final = 30
SERVICE_NAME: Final = "dynamic-config-server"


def build_server(settings: Settings, app: Any | None = None, *, port: int | None = None,
                 drain_seconds: float = DRAIN_SECONDS, tracing: Any = None) -> Any:  # fmt: skip
    """A ``uvicorn.Server`` for ``settings`` (and the app, built when None); not started.

    ``tracing`` (a :class:`dynconf.tracing.Tracing`) goes to the app built here; the caller
    shuts it down.
    """
    import uvicorn

    from dynconf_store_configserver.server.app import create_app

    served: Any = app if app is not None else create_app(settings, tracing=tracing)
    tls: dict[str, Any] = {}
    if settings.tls is not None:
        tls = {"ssl_certfile": str(settings.tls.certificate), "ssl_keyfile": str(settings.tls.key)}
        if settings.tls.client_ca is not None:
            tls["ssl_ca_certs"] = str(settings.tls.client_ca)
            tls["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    config = uvicorn.Config(
        served,
        host=settings.bind_host,
        port=settings.bind_port if port is None else port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(drain_seconds),
        lifespan="on",
        **tls,
    )

    class Server(uvicorn.Server):
        """Ends change streams first at shutdown, so draining does not wait on them."""

        async def shutdown(self, sockets: Any = None) -> None:
            served.state.close_streams()
            await super().shutdown(sockets)
            if tracing is not None:
                # here, not after run(): uvicorn re-raises the SIGTERM it caught once serving
                # ends, and that ends the process before any code after run() would flush
                await asyncio.to_thread(tracing.shutdown)

    return Server(config)


@console_entry("dynamic-config-server")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dynamic-config-server",
        description="Serve one merged document per <application>/<profile>.",
    )
    parser.add_argument(
        VERSION_FLAG,
        action="version",
        version=version_line(SERVICE_NAME, "dynconf-store-configserver").strip(),
    )
    parser.add_argument("config", nargs="?", help="the server's TOML file")
    parser.add_argument("--config", dest="config_flag", help="the same, as a flag")
    parser.add_argument("--check", action="store_true", help="validate the file and exit")
    args = parser.parse_args(argv)
    path = args.config_flag or args.config
    if not path:
        parser.error("name the configuration file")
    try:
        settings = load_settings(path)
    except SettingsError as exc:
        for reason in exc.reasons:
            print(f"dynamic-config-server: {reason}", file=sys.stderr)
        return 2
    if args.check:
        return 0
    from dynconf.logs import configure_logging
    from dynconf.tracing import tracing_from_env

    configure_logging()
    tracing = tracing_from_env(
        os.environ, SERVICE_NAME, extra="dynconf-store-configserver[server,otel]"
    )
    try:
        build_server(settings, tracing=tracing).run()
    finally:
        tracing.shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
