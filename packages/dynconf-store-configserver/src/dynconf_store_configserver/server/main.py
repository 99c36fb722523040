"""``dynamic-config-server <config-file>``: validate the file, then serve with uvicorn.

A file that is refused prints every reason on stderr and exits 2 before anything listens.
SIGTERM stops accepting, ends open change streams (clients reconnect elsewhere) and drains
requests for up to 30 s.
"""

from __future__ import annotations

import argparse
import ssl
import sys
from typing import Any, Final

from dynconf_store_configserver.server.settings import Settings, SettingsError, load_settings

__all__ = ["DRAIN_SECONDS", "build_server", "main"]

DRAIN_SECONDS: Final = 30


def build_server(settings: Settings, app: Any | None = None, *, port: int | None = None,
                 drain_seconds: float = DRAIN_SECONDS) -> Any:  # fmt: skip
    """A ``uvicorn.Server`` for ``settings`` (and the app, built when None); not started."""
    import uvicorn

    from dynconf_store_configserver.server.app import create_app

    served: Any = app if app is not None else create_app(settings)
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
            served.state.closing.set()
            await super().shutdown(sockets)

    return Server(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dynamic-config-server",
        description="Serve one merged document per <application>/<profile>.",
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

    configure_logging()
    build_server(settings).run()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
