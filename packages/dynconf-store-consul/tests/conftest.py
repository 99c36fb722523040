"""Consul servers these tests own: ACL-enabled, TLS, and ones the fault tests kill.

The shared ``consul_server`` (from ``tests/fixtures/servers.py``) runs with ACLs off and must
not be killed, so the auth, TLS and fault tests start their own Consul 1.8.7 agents from the
binary ``scripts/testenv install consul`` puts in the cache, each on free loopback ports, and
stop them by their own pid.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.relay import Relay

REPO = Path(__file__).resolve().parents[3]


def _cache_dir() -> Path:
    env = os.environ.get("DYNCONF_TESTENV_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dynconf-testenv"


@pytest.fixture(scope="session")
def consul_binary() -> Path:
    binary = _cache_dir() / "debs" / "consul" / "usr" / "bin" / "consul"
    if not binary.is_file():
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "testenv"), "install", "consul"],
            check=False,
            capture_output=True,
            timeout=300,
        )
    if not binary.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"consul is not installed at {binary}")
        pytest.skip(f"consul is not installed at {binary}; run `scripts/testenv install consul`")
    return binary


def free_ports(n: int) -> list[int]:
    ports: list[int] = []
    socks: list[socket.socket] = []
    try:
        while len(ports) < n:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in socks:
            sock.close()
    return ports


@dataclass(frozen=True)
class Pki:
    """A private CA, a server certificate (localhost, consul.test; no IP) and a client one."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _make_pki(directory: Path) -> Pki:
    from tests.fixtures.certs import Authority

    directory.mkdir(parents=True, exist_ok=True)
    root, other = Authority("dynconf consul test CA"), Authority("some other CA")
    server = root.issue("server.dc1.consul", ["localhost", "consul.test", "server.dc1.consul"])
    client = root.issue("dynconf-agent", server=False, client=True)
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


class KvClient:
    """Seeds and administers a Consul over plain HTTP (urllib; never the code under test)."""

    url: str
    acl_token: str | None = None

    def api(
        self, method: str, path: str, body: bytes | str | None = None, token: str | None = None
    ) -> tuple[int, bytes]:
        data = body.encode() if isinstance(body, str) else body
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if token:
            request.add_header("X-Consul-Token", token)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read()

    def admin(self, method: str, path: str, payload: object | None = None) -> object:
        body = None if payload is None else json.dumps(payload)
        status, data = self.api(method, path, body, token=self.acl_token)
        assert status == 200, (status, data[:300])
        return json.loads(data) if data else None

    def put(self, key: str, value: str) -> None:
        status, data = self.api("PUT", f"/v1/kv/{key}", value, token=self.acl_token)
        assert status == 200, (status, data)

    def delete(self, key: str) -> None:
        status, data = self.api("DELETE", f"/v1/kv/{key}", token=self.acl_token)
        assert status == 200, (status, data)

    def reader_policy(self, name: str, prefix: str) -> None:
        """A policy granting read under ``prefix``, and a role of the same name holding it."""
        rules = f'key_prefix "{prefix}" {{ policy = "read" }}'
        self.admin("PUT", "/v1/acl/policy", {"Name": name, "Rules": rules})
        self.admin("PUT", "/v1/acl/role", {"Name": name, "Policies": [{"Name": name}]})

    def token_for(self, policy: str) -> dict[str, str]:
        return self.admin("PUT", "/v1/acl/token", {"Policies": [{"Name": policy}]})  # type: ignore[return-value]


class ConsulProcess(KvClient):
    """One Consul agent this test session owns (dev or persistent server, ACLs, TLS)."""

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        *,
        acl_token: str | None = None,
        persistent: bool = False,
        pki: Pki | None = None,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.acl_token = acl_token
        self.persistent = persistent
        self.pki = pki
        self.http_port, self.serf_port, self.server_port, self.https_port = free_ports(4)
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def https_url(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"

    def argv(self) -> list[str]:
        argv = [str(self.binary), "agent", "-client", "127.0.0.1", "-bind", "127.0.0.1",
                "-http-port", str(self.http_port), "-serf-lan-port", str(self.serf_port),
                "-server-port", str(self.server_port), "-dns-port", "-1", "-grpc-port", "-1",
                "-serf-wan-port", "-1", "-log-level", "warn", "-node", "dynconf-test"]  # fmt: skip
        if self.persistent:
            argv += ["-server", "-bootstrap-expect", "1", "-data-dir", str(self.workdir / "data"),
                     "-hcl", "performance { raft_multiplier = 1 }"]  # fmt: skip
        else:
            argv.append("-dev")
        if self.acl_token:
            argv += [
                "-hcl",
                'acl { enabled = true default_policy = "deny" '
                f'tokens {{ master = "{self.acl_token}" agent = "{self.acl_token}" }} }}',
            ]
        if self.pki:
            argv += ["-https-port", str(self.https_port),
                     "-hcl", f'cert_file = "{self.pki.server_cert}"',
                     "-hcl", f'key_file = "{self.pki.server_key}"',
                     "-hcl", f'ca_file = "{self.pki.ca}"',
                     "-hcl", "verify_incoming_https = true"]  # fmt: skip
        return argv

    def start(self) -> ConsulProcess:
        log = (self.workdir / "consul.log").open("ab")
        self.proc = subprocess.Popen(
            self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.workdir / "consul.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"consul exited: {tail}")
            try:
                status, body = self.api("GET", "/v1/status/leader")
                if status == 200 and b'"127.' in body and self._kv_ready():
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("consul did not elect a leader within 60 s")

    def _kv_ready(self) -> bool:
        status, _ = self.api("GET", "/v1/kv/dynconf-readiness-probe", token=self.acl_token)
        return status in (200, 404)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@pytest.fixture(scope="session")
def acl_consul(
    consul_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsulProcess]:
    """A dev Consul with ACLs on (default deny) and a random management token."""
    server = ConsulProcess(
        consul_binary, tmp_path_factory.mktemp("consul-acl"), acl_token=str(uuid.uuid4())
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return _make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def tls_consul(
    consul_binary: Path, tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[ConsulProcess]:
    """A dev Consul serving HTTPS from the private CA and requiring a client certificate."""
    server = ConsulProcess(consul_binary, tmp_path_factory.mktemp("consul-tls"), pki=pki).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_consul(consul_binary: Path, tmp_path: Path) -> Iterator[ConsulProcess]:
    """A persistent single-server Consul this test may kill and restart (data survives)."""
    server = ConsulProcess(consul_binary, tmp_path / "consul", persistent=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dev_consul(consul_binary: Path, tmp_path: Path) -> Iterator[ConsulProcess]:
    """An in-memory dev Consul this test may kill; a restart starts from index 1 again."""
    server = ConsulProcess(consul_binary, tmp_path / "consul-dev").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cut_proxy(own_consul: ConsulProcess) -> Iterator[Relay]:
    """A relay in front of this test's own agent, for the faults a live server cannot make."""
    proxy = Relay(own_consul.http_port)
    try:
        yield proxy
    finally:
        proxy.close()


def rsa_keypair() -> tuple[object, str]:
    """An RSA key (for signing test JWTs) and its public key as PEM."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return key, public.decode()


def sign_jwt(key: object, claims: dict[str, object]) -> str:
    """An RS256 JWT over ``claims`` (a few lines instead of a JWT library)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    assert isinstance(key, rsa.RSAPrivateKey)

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    payload = b64(json.dumps(claims).encode())
    signature = key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{b64(signature)}"


class Watcher:
    """Runs ``source.changes`` in a thread; deliveries land in a queue with their arrival time."""

    def __init__(self, source: object, interval: float = 1.0) -> None:
        import queue

        self.source = source
        self.items: queue.Queue[tuple[float, object]] = queue.Queue()
        self.failures: list[Exception] = []
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        if hasattr(source, "on_failure"):
            source.on_failure = self.failures.append
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _run(self, interval: float) -> None:
        try:
            for item in self.source.changes(interval, self.stopping.is_set):  # type: ignore[attr-defined]
                self.items.put((time.monotonic(), item))
        except BaseException as exc:  # surfaced by the test through .error
            self.error = exc

    def wait_connected(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not getattr(self.source, "connected", False):
            assert self.error is None, self.error
            assert time.monotonic() < deadline, "the watch never completed its first query"
            time.sleep(0.01)

    def next(self, timeout: float = 10.0) -> object:
        import queue

        try:
            return self.items.get(timeout=timeout)[1]
        except queue.Empty:
            raise AssertionError(
                f"nothing delivered within {timeout} s (error={self.error!r})"
            ) from None

    def next_timed(self, timeout: float = 10.0) -> tuple[float, object]:
        return self.items.get(timeout=timeout)

    def quiet(self, seconds: float) -> bool:
        import queue

        try:
            self.items.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def stop(self, timeout: float = 15.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the watch did not stop"


@pytest.fixture
def watcher() -> Iterator[type[Watcher]]:
    made: list[Watcher] = []

    class Tracked(Watcher):
        def __init__(self, source: object, interval: float = 1.0) -> None:
            super().__init__(source, interval)
            made.append(self)

    yield Tracked
    for w in made:
        w.stopping.set()
    for w in made:
        w.thread.join(15)


@dataclass(frozen=True)
class SharedConsul(KvClient):
    url: str
    acl_token: str | None = None


@pytest.fixture(scope="session")
def plain_consul(consul_server: object) -> KvClient:
    """The shared dev Consul (ACLs off) from ``tests/fixtures/servers.py``, for KV and watch."""
    return SharedConsul(url=consul_server.url)  # type: ignore[attr-defined]


@pytest.fixture
def free_port() -> int:
    return free_ports(1)[0]


def build_source(endpoint: str, key: str, **fields: object) -> object:
    from dynconf.stores import StoreSpec
    from dynconf_store_consul.plugin import CONSUL_STORE

    extra = fields.pop("extra", {})
    spec = StoreSpec.from_inputs(source="consul", endpoint=endpoint, key=key, extra=extra, **fields)  # type: ignore[arg-type]
    return CONSUL_STORE.build(spec)


@pytest.fixture
def make_source() -> Iterator[object]:
    """``make_source(endpoint, key, **spec_fields)``; every source is closed at teardown."""
    made: list[object] = []

    def make(endpoint: str, key: str, **fields: object) -> object:
        source = build_source(endpoint, key, **fields)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def jwt_tools() -> object:
    """``rsa_keypair()`` and ``sign_jwt(key, claims)`` for tests (conftest is not importable)."""
    import types

    return types.SimpleNamespace(rsa_keypair=rsa_keypair, sign_jwt=sign_jwt)
