"""Helpers for the nats store tests: own servers, seeding, a watch follower, PKI, operator JWTs.

The shared ``nats_server`` (``tests/fixtures/servers.py``) serves the plain KV and token
tests and must not be killed, so the fault, TLS and ``.creds`` tests start their own
nats-server (the binary ``scripts/testenv install nats`` puts in the cache) on free loopback
ports and stop it by its own pid.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_nats import NATS_STORE, NatsSource

REPO = Path(__file__).resolve().parents[3]


def _cache_dir() -> Path:
    env = os.environ.get("DYNCONF_TESTENV_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dynconf-testenv"


def find_nats_binary() -> Path:
    binary = _cache_dir() / "debs" / "nats" / "usr" / "sbin" / "nats-server"
    if not binary.is_file():
        subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "install", "nats"],
                       check=False, capture_output=True, timeout=300)  # fmt: skip
    if not binary.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"nats-server is not installed at {binary}")
        pytest.skip(f"nats-server is not installed at {binary}; run `scripts/testenv install nats`")
    return binary


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


class OwnNats:
    """A nats-server with JetStream this test session owns; ``kill``/``start`` keep the ports
    and the store directory, so a restart looks like the same server coming back."""

    def __init__(self, binary: Path, directory: Path, config: str = "") -> None:
        self.binary = binary
        self.directory = directory
        self.port, self.monitor = free_ports(2)
        self.url = f"nats://127.0.0.1:{self.port}"
        self.config_file = directory / "server.conf"
        directory.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            f"listen: 127.0.0.1:{self.port}\nhttp: 127.0.0.1:{self.monitor}\n"
            f'jetstream {{ store_dir: "{directory / "js"}" }}\n{config}\n'
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.directory / "server.log").open("ab")
        self.proc = subprocess.Popen([str(self.binary), "-c", str(self.config_file)],
                                     stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                url = f"http://127.0.0.1:{self.monitor}/healthz?js-enabled-only=true"
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if b"ok" in answer.read():
                        return
            time.sleep(0.05)
        raise RuntimeError(f"nats-server did not start; see {self.directory / 'server.log'}")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


# ------------------------------------------------------------------------------- seeding
async def admin(url: str, **options: Any) -> Any:
    """A plain nats-py client for seeding (never the code under test)."""
    import nats

    async def quiet(_error: Exception) -> None:
        return None

    return await nats.connect(url, connect_timeout=5, allow_reconnect=False,
                              max_reconnect_attempts=1, error_cb=quiet, **options)  # fmt: skip


async def bucket(client: Any, name: str) -> Any:
    from nats.js.api import KeyValueConfig

    return await client.jetstream().create_key_value(KeyValueConfig(bucket=name, history=5))


def source(endpoint: str, key: str, **fields: Any) -> NatsSource:
    return NATS_STORE.build(
        StoreSpec.from_inputs(source="nats", endpoint=endpoint, key=key, **fields)
    )


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(scenario())


class Follower:
    """Consumes a source's ``changes`` in a task and collects what it yields."""

    def __init__(self, src: NatsSource) -> None:
        self.src = src
        self.items: asyncio.Queue[Any] = asyncio.Queue()
        self.failures: list[Any] = []
        self.error: BaseException | None = None
        src.on_failure = self.failures.append
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for item in self.src.changes(15.0):
                await self.items.put(item)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.error = exc

    async def connected(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.src.connected:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, "the watch never connected"
            await asyncio.sleep(0.02)

    async def next(self, timeout: float = 10.0) -> Any:
        return await asyncio.wait_for(self.items.get(), timeout)

    async def quiet(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.items.get(), seconds)
            return False
        return True

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.src.aclose()


# ----------------------------------------------------------------------------------- pki
@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def make_pki(directory: Path) -> Pki:
    """A private CA; the server certificate names localhost and nats.test (not 127.0.0.1)."""
    from tests.fixtures.certs import Authority

    root, other = Authority("dynconf nats test CA"), Authority("some other CA")
    server = root.issue("nats.test", ["localhost", "nats.test"])
    client = root.issue("dynconf-agent", server=False, client=True)
    (directory / "ca.pem").write_bytes(root.cert_pem())
    (directory / "other-ca.pem").write_bytes(other.cert_pem())
    server.write(directory / "server.pem", directory / "server-key.pem")
    client.write(directory / "client.pem", directory / "client-key.pem")
    return Pki(ca=directory / "ca.pem", server_cert=directory / "server.pem",
               server_key=directory / "server-key.pem", client_cert=directory / "client.pem",
               client_key=directory / "client-key.pem", other_ca=directory / "other-ca.pem")  # fmt: skip


def client_tls(pki: Pki, **overrides: Any) -> TlsSettings:
    fields: dict[str, Any] = {"ca_file": str(pki.ca), "cert_file": str(pki.client_cert),
                              "key_file": str(pki.client_key)}  # fmt: skip
    fields.update(overrides)
    return TlsSettings(**fields)


# ---------------------------------------------------------------------- operator / creds
class Operator:
    """An operator, one account with JetStream, and users: what `nsc` would write.

    JWTs are ed25519-nkey signed claims (header ``{"typ":"JWT","alg":"ed25519-nkey"}``),
    built here with nkeys so the test needs no ``nsc`` binary.
    """

    def __init__(self) -> None:
        import nkeys

        self.operator = self._keypair(nkeys.PREFIX_BYTE_OPERATOR)
        self.account = self._keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        self.system = self._keypair(nkeys.PREFIX_BYTE_ACCOUNT)

    @staticmethod
    def _keypair(prefix: int) -> Any:
        import nkeys

        seed = nkeys.encode_seed(os.urandom(32), prefix)
        return nkeys.from_seed(bytearray(seed))

    @staticmethod
    def _jwt(signer: Any, claims: dict[str, Any]) -> str:
        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).decode().rstrip("=")

        claims = {"iat": int(time.time()), **claims}
        claims["jti"] = (
            base64.b32encode(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest())
            .decode()
            .rstrip("=")
        )
        head = b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
        body = b64(json.dumps(claims).encode())
        signature = signer.sign(f"{head}.{body}".encode())
        return f"{head}.{body}.{b64(signature)}"

    def server_config(self, directory: Path) -> str:
        operator_jwt = self._jwt(self.operator, {
            "iss": self.operator.public_key.decode(), "sub": self.operator.public_key.decode(),
            "name": "dynconf-test-operator", "nats": {"type": "operator", "version": 2},
        })  # fmt: skip
        unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                     "wildcards": True, "conn": -1, "leaf": -1, "mem_storage": -1,
                     "disk_storage": -1, "streams": -1, "consumer": -1}  # fmt: skip
        account_jwt = self._jwt(self.operator, {
            "iss": self.operator.public_key.decode(), "sub": self.account.public_key.decode(),
            "name": "config", "nats": {"limits": unlimited, "type": "account", "version": 2},
        })  # fmt: skip
        system_jwt = self._jwt(self.operator, {
            "iss": self.operator.public_key.decode(), "sub": self.system.public_key.decode(),
            "name": "SYS", "nats": {"type": "account", "version": 2},
        })  # fmt: skip
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "operator.jwt").write_text(operator_jwt)
        account, system = self.account.public_key.decode(), self.system.public_key.decode()
        return (f'operator: "{directory / "operator.jwt"}"\nresolver: MEMORY\n'
                f"system_account: {system}\n"
                f'resolver_preload: {{ {account}: "{account_jwt}", {system}: "{system_jwt}" }}\n')  # fmt: skip

    def creds(self, path: Path, name: str = "reader") -> Path:
        import nkeys

        user = self._keypair(nkeys.PREFIX_BYTE_USER)
        user_jwt = self._jwt(self.account, {
            "iss": self.account.public_key.decode(), "sub": user.public_key.decode(),
            "name": name, "nats": {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                                   "type": "user", "version": 2},
        })  # fmt: skip
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n" + user_jwt + "\n------END NATS USER JWT------\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            + user.seed.decode()
            + "\n------END USER NKEY SEED------\n"
        )
        return path

    def foreign_creds(self, path: Path) -> Path:
        """A well-formed .creds file from an account this server does not know."""
        return Operator().creds(path, name="stranger")
