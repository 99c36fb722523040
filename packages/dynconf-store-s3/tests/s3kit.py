"""Helpers for the s3 store tests: own moto servers (TLS, credential checks), a CA, counting."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dynconf.stores import StoreSpec
from dynconf_store_s3 import S3_STORE, S3Source

REPO = Path(__file__).resolve().parents[3]


def cache_dir() -> Path:
    env = os.environ.get("DYNCONF_TESTENV_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dynconf-testenv"


def find_moto_server() -> Path:
    binary = cache_dir() / "venv" / "bin" / "moto_server"
    if not binary.is_file():
        subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "install", "s3"],
                       check=False, capture_output=True, timeout=300)  # fmt: skip
    if not binary.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"moto_server is not installed at {binary}")
        pytest.skip(f"moto_server is not installed at {binary}; run `scripts/testenv install s3`")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnMoto:
    """A moto S3 server this session owns, stopped by its own pid."""

    def __init__(self, binary: Path, directory: Path, *, cert: Path | None = None,
                 key: Path | None = None, env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.port = free_port()
        scheme = "https" if cert else "http"
        self.url = f"{scheme}://localhost:{self.port}"
        args = [str(binary), "-H", "127.0.0.1", "-p", str(self.port)]
        if cert and key:
            args += ["-c", str(cert), "-k", str(key)]
        directory.mkdir(parents=True, exist_ok=True)
        log = (directory / "moto.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=directory,
                                     env={**os.environ, **(env or {})})  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.5),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"moto_server did not start; see {directory / 'moto.log'}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def s3_source(bucket: str, key: str, **fields: Any) -> S3Source:
    return S3_STORE.build(StoreSpec.from_inputs(source="s3", endpoint=bucket, key=key, **fields))


class Requests:
    """Counts the HTTP requests a source's client sends (method, URL, headers), by event hook."""

    def __init__(self, source: S3Source) -> None:
        self.sent: list[tuple[str, str, dict[str, str]]] = []
        source.client.meta.events.register("before-send.s3", self._record)

    def _record(self, request: Any, **_kwargs: Any) -> None:
        headers = {k: (v.decode() if isinstance(v, bytes) else str(v))
                   for k, v in request.headers.items()}  # fmt: skip
        self.sent.append((request.method, request.url, headers))

    def count(self, method: str) -> int:
        return sum(1 for m, _url, _h in self.sent if m == method)


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    other_ca: Path


def make_pki(directory: Path) -> Pki:
    """A private CA and a server certificate naming localhost."""
    from tests.fixtures.certs import Authority

    ca, other = Authority("dynconf s3 test CA"), Authority("some other CA")
    server = ca.issue("localhost", ["localhost"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.pem").write_bytes(ca.cert_pem())
    (directory / "other-ca.pem").write_bytes(other.cert_pem())
    server.write(directory / "server.pem", directory / "server-key.pem", traditional=True)
    return Pki(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem",
               directory / "other-ca.pem")  # fmt: skip


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def http_ok(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1):
        return True
    return False
