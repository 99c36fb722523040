"""Config servers for these tests: the real app, served by uvicorn on a loopback port in-process.

``serve(settings)`` builds the app with :func:`create_app` and runs it on a thread, so a test
talks HTTP to the real server (real sockets, real SSE) without a second process; ``stop()``
and ``start()`` again on the same port is a server restart.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_configserver.plugin import CONFIG_SERVER_STORE
from dynconf_store_configserver.server.main import build_server
from dynconf_store_configserver.server.settings import Settings, parse_settings

TOKEN = "billing-token-0123456789abcdef0123456789"
OTHER_TOKEN = "shop-token-0123456789abcdef0123456789abcd"
METRICS_TOKEN = "metrics-scraper-token-0123456789abcdef01"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Running:
    """One server on ``port``; ``stop()``/``start()`` restarts it with fresh state."""

    def __init__(self, settings: Settings, port: int, scheme: str = "http") -> None:
        self.settings = settings
        self.port = port
        self.url = f"{scheme}://127.0.0.1:{port}"
        self.server: Any = None
        self.thread: threading.Thread | None = None

    @property
    def app(self) -> Any:
        return self.server.config.app

    def start(self) -> None:
        self.server = build_server(self.settings, port=self.port, drain_seconds=2)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive(), "the server exited while starting"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            assert self.thread is not None
            self.thread.join(15)
            assert not self.thread.is_alive()
            self.server = None

    @property
    def documents(self) -> Any:
        return self.app.state.documents


def get(url: str, token: str | None = TOKEN, headers: dict[str, str] | None = None,
        method: str = "GET", context: Any = None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    request = urllib.request.Request(url, method=method, headers=dict(headers or {}))
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status), dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as err:
        return int(err.code), dict(err.headers.items()), err.read()


@dataclass
class ConfigDir:
    """A directory of section files and the TOML that serves them."""

    root: Path

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path


@pytest.fixture
def config_dir(tmp_path: Path) -> ConfigDir:
    directory = ConfigDir(tmp_path)
    directory.write(
        "billing.toml",
        '[billing]\nname = "billing"\nport = 8080\n[billing.db]\nhost = "db"\npool = 5\n',
    )
    directory.write("billing.prod.toml", '[billing.db]\nhost = "db.prod"\n')
    directory.write("shop.toml", '[shop]\nname = "shop"\n')
    return directory


def base_settings(config_dir: ConfigDir, **server: Any) -> dict[str, Any]:
    return {"server": {
        "bind": "127.0.0.1:0",
        "store_interval": 0.5,
        "file_poll_seconds": 0.1,
        "keepalive_seconds": 1.0,
        "metrics_token": METRICS_TOKEN,
        "sections": [
            {"application": "billing", "profile": "prod", "files": ["billing.toml"],
             "env_prefix": "CSTEST_"},
            {"application": "shop", "profile": "prod", "files": ["shop.toml"]},
        ],
        "clients": [
            {"name": "billing-pods", "token": TOKEN, "applications": ["billing"]},
            {"name": "shop-pods", "token": OTHER_TOKEN, "applications": ["shop"]},
        ],
        **server,
    }}  # fmt: skip


@pytest.fixture
def serve() -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def start(settings: Settings | dict[str, Any], *, base: Path | None = None,
              port: int | None = None, scheme: str = "http") -> Running:  # fmt: skip
        if isinstance(settings, dict):
            settings = parse_settings(settings, base=base or Path.cwd())
        server = Running(settings, port or free_port(), scheme)
        server.start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


@pytest.fixture
def billing(serve, config_dir) -> Running:
    return serve(base_settings(config_dir), base=config_dir.root)


def client_source(url: str, key: str = "billing/prod", **fields: Any) -> Any:
    fields.setdefault("auth", "token")
    if fields["auth"] == "token":
        fields.setdefault("token", TOKEN)
    return CONFIG_SERVER_STORE.build(
        StoreSpec.from_inputs(source="config-server", endpoint=url, key=key, **fields)
    )


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    from tests.fixtures.certs import Authority

    directory = tmp_path_factory.mktemp("pki")
    root, other = Authority("config server test CA"), Authority("another CA")
    server = root.issue("config-server", ["localhost", "config.test", "127.0.0.1"])
    client = root.issue("billing-pod", server=False, client=True)
    (directory / "ca.pem").write_bytes(root.cert_pem())
    (directory / "other-ca.pem").write_bytes(other.cert_pem())
    server.write(directory / "server.pem", directory / "server-key.pem")
    client.write(directory / "client.pem", directory / "client-key.pem")
    return Pki(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server-key.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
        other_ca=directory / "other-ca.pem",
    )


__all__ = ["OTHER_TOKEN", "TOKEN", "TlsSettings", "base_settings", "client_source", "get"]
