"""A second OpenBao for the tests the dev server cannot serve.

The dev server listens on plain HTTP and keeps everything in memory, so it can neither
authenticate a TLS client certificate (``cert`` auth) nor come back from a restart with
the secrets a watch was following. This one has a TLS listener (certificates from a
throw-away CA, :mod:`tests.fixtures.certs`), raft storage, one unseal key, and a
``restart()`` that stops the process by its pid, starts it again and unseals it.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynconf.stores import StoreSpec

SpecFactory = Callable[..., StoreSpec]
"""Builds a vault StoreSpec for the shared test server (the `spec_for` fixture)."""


def bao_binary() -> Path | None:
    """The ``bao`` that ``scripts/testenv install`` put in its private venv."""
    cache = os.environ.get("DYNCONF_TESTENV_CACHE")
    root = Path(cache) if cache else Path.home() / ".cache" / "dynconf-testenv"
    path = root / "venv" / "bin" / "bao"
    return path if path.exists() else None


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    """File paths of the throw-away CA, the server pair and a client pair."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_ca: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


def make_pki(directory: Path) -> Pki:
    """A server CA (server cert for 127.0.0.1, localhost, vault.test) and a client CA.

    ``stranger`` is a client certificate from a CA Vault does not trust.
    """
    from tests.fixtures.certs import Authority

    authorities = {
        ca: Authority(f"dynconf vault test {ca}") for ca in ("ca", "client_ca", "other_ca")
    }
    paths: dict[str, Path] = {}
    for ca, authority in authorities.items():
        paths[ca] = directory / f"{ca}.crt"
        paths[ca].write_bytes(authority.cert_pem())
    server = authorities["ca"].issue("vault.test", ["localhost", "vault.test", "127.0.0.1"])
    client = authorities["client_ca"].issue("billing.default", server=False, client=True)
    stranger = authorities["other_ca"].issue("billing.default", server=False, client=True)
    for name, leaf in (("server", server), ("client", client), ("stranger", stranger)):
        paths[f"{name}_key"] = directory / f"{name}.key"
        paths[f"{name}_cert"] = directory / f"{name}.crt"
        leaf.write(paths[f"{name}_cert"], paths[f"{name}_key"])
    return Pki(
        ca=paths["ca"],
        server_cert=paths["server_cert"],
        server_key=paths["server_key"],
        client_ca=paths["client_ca"],
        client_cert=paths["client_cert"],
        client_key=paths["client_key"],
        stranger_cert=paths["stranger_cert"],
        stranger_key=paths["stranger_key"],
    )


def _free_ports(n: int) -> int:
    while True:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        first = int(probe.getsockname()[1])
        probe.close()
        held: list[socket.socket] = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()


@dataclass
class TlsBao:
    """A running OpenBao with a TLS listener; ``root_token`` administers it."""

    binary: Path
    directory: Path
    pki: Pki
    port: int = 0
    root_token: str = ""
    unseal_key: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        if not self.port:
            self.port = _free_ports(2)
            (self.directory / "data").mkdir(exist_ok=True)
            (self.directory / "bao.hcl").write_text(
                f'storage "raft" {{\n  path = "{self.directory / "data"}"\n  node_id = "t"\n}}\n'
                'listener "tcp" {\n'
                f'  address = "127.0.0.1:{self.port}"\n'
                f'  cluster_address = "127.0.0.1:{self.port + 1}"\n'
                f'  tls_cert_file = "{self.pki.server_cert}"\n'
                f'  tls_key_file = "{self.pki.server_key}"\n'
                "}\n"
                f'api_addr = "https://127.0.0.1:{self.port}"\n'
                f'cluster_addr = "https://127.0.0.1:{self.port + 1}"\n'
            )
        log = (self.directory / "bao.log").open("ab")
        self.process = subprocess.Popen(
            [str(self.binary), "server", f"-config={self.directory / 'bao.hcl'}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"HOME": str(self.directory), "PATH": os.environ.get("PATH", "/usr/bin")},
            cwd=self.directory,
        )
        log.close()
        self._wait(lambda status: status in (200, 429, 472, 473, 501, 503))
        if not self.root_token:
            answer = self.call("PUT", "sys/init", {"secret_shares": 1, "secret_threshold": 1})
            self.root_token = answer["root_token"]
            self.unseal_key = answer["keys_base64"][0]
        self.call("PUT", "sys/unseal", {"key": self.unseal_key})
        self._wait(lambda status: status == 200)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.pki.ca))

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """An admin request with the root token (test setup only).

        Retried for a few seconds on 400/5xx: right after an unseal, raft may still be
        settling which node is active and answers setup writes with a transient error.
        """
        data = json.dumps(body).encode() if body is not None else None
        deadline = time.monotonic() + 10
        while True:
            request = urllib.request.Request(f"{self.address}/v1/{path}", data=data, method=method)
            if self.root_token:
                request.add_header("X-Vault-Token", self.root_token)
            try:
                # generous: a loaded 2-core machine has kept raft's first writes past 10 s
                with urllib.request.urlopen(request, timeout=60, context=self.context()) as resp:
                    raw = resp.read()
                return json.loads(raw) if raw else None
            except urllib.error.HTTPError as err:
                if err.code not in (400, 500, 503) or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{method} {path}: {err.code} {err.read()[:300]!r}"
                    ) from None
                time.sleep(0.2)

    def _wait(self, ok: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    "bao exited:\n" + (self.directory / "bao.log").read_text()[-3000:]
                )
            try:
                with urllib.request.urlopen(
                    f"{self.address}/v1/sys/health", timeout=2, context=self.context()
                ) as resp:
                    status = int(resp.status)
            except urllib.error.HTTPError as err:
                status = err.code
            except OSError:
                status = 0
            if ok(status):
                return
            time.sleep(0.05)
        raise RuntimeError(
            "bao did not become ready:\n" + (self.directory / "bao.log").read_text()[-3000:]
        )


# ---------------------------------------------------------------------------- JWTs
def _b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_signing_key(directory: Path) -> tuple[Path, str]:
    """An RSA key for signing test JWTs; returns (key path, public key PEM)."""
    key = directory / "jwt.key"
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key))
    public = subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-pubout"], check=True, capture_output=True, text=True
    ).stdout
    return key, public


def sign_jwt(key: Path, claims: dict[str, Any]) -> str:
    """An RS256 JWT over ``claims`` signed with ``key`` (openssl does the RSA)."""
    header = _b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = subprocess.run(
        ["openssl", "dgst", "-sha256", "-sign", str(key)],
        input=signing_input,
        check=True,
        capture_output=True,
    ).stdout
    return f"{header}.{payload}.{_b64url(signature)}"


# ---------------------------------------------------------------------------- watching
class Watcher:
    """Runs ``source.changes(interval, stop)`` on a thread; deliveries land in a queue.

    ``error`` holds what ended the watch (``None`` while it runs or after a clean stop).
    """

    def __init__(self, source: Any, interval: float = 0.2) -> None:
        import queue
        import threading

        self.source = source
        self.items: queue.Queue[Any] = queue.Queue()
        self.error: BaseException | None = None
        self._stopped = threading.Event()
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        try:
            for item in self.source.changes(interval, self._stopped.is_set):
                self.items.put(item)
        except BaseException as err:
            self.error = err
        finally:
            self.ended.set()

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> float:
        """Stop and return how long the watch took to notice."""
        started = time.monotonic()
        self._stopped.set()
        self._thread.join(timeout=10)
        return time.monotonic() - started

    def next(self, timeout: float = 10.0) -> Any:
        return self.items.get(timeout=timeout)

    def quiet(self, seconds: float) -> bool:
        """True if nothing was delivered for ``seconds``."""
        import queue

        try:
            self.items.get(timeout=seconds)
        except queue.Empty:
            return True
        return False
