"""Config servers for these tests: the real app, served by uvicorn on a loopback port in-process.

``serve(settings)`` builds the app with :func:`create_app` and runs it on a thread, so a test
talks HTTP to the real server (real sockets, real SSE) without a second process; ``stop()``
and ``start()`` again on the same port is a server restart.
"""

from __future__ import annotations

import datetime as dt
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
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = tmp_path_factory.mktemp("pki")
    now = dt.datetime.now(dt.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def ca(text: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(text)).issuer_name(name(text))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5))
                .not_valid_after(now + dt.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))  # fmt: skip
        return cert, key

    def leaf(text, issuer, usage, sans):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(text)).issuer_name(issuer[0].subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5))
                   .not_valid_after(now + dt.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))  # fmt: skip
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(issuer[1], hashes.SHA256()), key

    import ipaddress

    root, other = ca("config server test CA"), ca("another CA")
    server = leaf("config-server", root, ExtendedKeyUsageOID.SERVER_AUTH,
                  [x509.DNSName("localhost"), x509.DNSName("config.test"),
                   x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])  # fmt: skip
    client = leaf("billing-pod", root, ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def write(file: str, data: bytes, mode: int = 0o644) -> Path:
        path = directory / file
        path.write_bytes(data)
        path.chmod(mode)
        return path

    def key_pem(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())  # fmt: skip

    pem = serialization.Encoding.PEM
    return Pki(
        ca=write("ca.pem", root[0].public_bytes(pem)),
        server_cert=write("server.pem", server[0].public_bytes(pem)),
        server_key=write("server-key.pem", key_pem(server[1]), 0o600),
        client_cert=write("client.pem", client[0].public_bytes(pem)),
        client_key=write("client-key.pem", key_pem(client[1]), 0o600),
        other_ca=write("other-ca.pem", other[0].public_bytes(pem)),
    )


__all__ = ["OTHER_TOKEN", "TOKEN", "TlsSettings", "base_settings", "client_source", "get"]
