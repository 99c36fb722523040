"""Helpers for the etcd store tests: a watch driver, private etcd servers, a cuttable proxy.

The session servers (``etcd_server``, ``etcd_tls_server``, ``etcd_auth_server``) come from
``tests/fixtures/servers.py``. Tests that kill a server, or need a configuration the
session servers do not have (a 1 s token TTL, TLS and auth together), start a private etcd
from the binaries ``scripts/testenv`` installed, so the shared servers are never disturbed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_etcd import ETCD_STORE
from dynconf_store_etcd.source import EtcdSource
from tests.fixtures.relay import Relay, relay_factory
from tests.fixtures.watch import WatchDriver, free_port

CACHE = Path(os.environ.get("DYNCONF_TESTENV_CACHE", Path.home() / ".cache" / "dynconf-testenv"))
ETCD_BIN = CACHE / "debs" / "etcd" / "usr" / "bin"


def build(endpoint: str, key: str, **fields: Any) -> EtcdSource:
    spec = StoreSpec.from_inputs(source="etcd", endpoint=endpoint, key=key, **fields)
    refusals = ETCD_STORE.validate(spec)
    assert refusals == [], refusals
    return ETCD_STORE.build(spec)


Watch = WatchDriver
"""The shared driver under the name these tests use."""


@dataclass
class PrivateEtcd:
    """A single-member etcd this test owns: it can be killed and restarted on the same port."""

    data: Path
    extra: list[str] = field(default_factory=list)
    tls: dict[str, Path] | None = None
    port: int = field(default_factory=free_port)
    peer: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> None:
        scheme = "https" if self.tls else "http"
        argv = [
            str(ETCD_BIN / "etcd"), "--name", "private", "--data-dir", str(self.data),
            "--listen-client-urls", f"{scheme}://127.0.0.1:{self.port}",
            "--advertise-client-urls", f"{scheme}://127.0.0.1:{self.port}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer}",
            "--initial-cluster", f"private=http://127.0.0.1:{self.peer}",
            "--heartbeat-interval", "10", "--election-timeout", "100", "--log-level", "error",
            *self.extra,
        ]  # fmt: skip
        if self.tls:
            argv += [
                "--client-cert-auth", "--trusted-ca-file", str(self.tls["ca"]),
                "--cert-file", str(self.tls["cert"]), "--key-file", str(self.tls["key"]),
            ]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.ctl("endpoint", "health", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("the private etcd did not become healthy")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def ctl(self, *args: str, check: bool = True, user: str | None = None) -> Any:
        argv = [str(ETCD_BIN / "etcdctl"), f"--endpoints={self.url}", "--dial-timeout=1s"]
        if self.tls:
            argv += [f"--cacert={self.tls['ca']}", f"--cert={self.tls['client_cert']}",
                     f"--key={self.tls['client_key']}"]  # fmt: skip
        if user:
            argv.append(f"--user={user}")
        return subprocess.run([*argv, *args], capture_output=True, check=check, timeout=20)

    def enable_auth(self, root_password: str) -> None:
        self.ctl("user", "add", f"root:{root_password}")
        self.ctl("user", "grant-role", "root", "root", check=False)
        self.ctl("auth", "enable")


@pytest.fixture
def private_etcd(tmp_path: Path) -> Iterator[Callable[..., PrivateEtcd]]:
    """A factory of private etcd servers, all killed at the end of the test."""
    if not (ETCD_BIN / "etcd").exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("etcd is not installed; run scripts/testenv install etcd")
        pytest.skip("etcd is not installed; run scripts/testenv install etcd")
    started: list[PrivateEtcd] = []

    def start(**options: Any) -> PrivateEtcd:
        server = PrivateEtcd(data=tmp_path / f"etcd{len(started)}", **options)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.kill()
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture
def proxy() -> Iterator[Callable[..., Relay]]:
    """Relays that cut the watcher's path to a private server while it stays up."""
    with relay_factory() as make:
        yield make


def put(
    url: str, key: str, value: str | bytes, token: str | None = None, context: Any = None
) -> int:
    """Write through the gateway directly; returns the new store revision."""
    import base64

    raw = value.encode() if isinstance(value, str) else value
    body = {"key": base64.b64encode(key.encode()).decode(),
            "value": base64.b64encode(raw).decode()}  # fmt: skip
    return int(_post(url, "kv/put", body, token, context)["header"]["revision"])


def delete(url: str, key: str, token: str | None = None) -> None:
    import base64

    _post(url, "kv/deleterange", {"key": base64.b64encode(key.encode()).decode()}, token)


def _post(
    url: str, path: str, body: dict[str, Any], token: str | None = None, context: Any = None
) -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/v3/{path}", data=json.dumps(body).encode(),
                                     method="POST")  # fmt: skip
    if token:
        request.add_header("Authorization", token)
    with urllib.request.urlopen(request, timeout=10, context=context) as resp:
        result: dict[str, Any] = json.load(resp)
        return result


def tls_context(ca: Path, cert: Path, key: Path) -> Any:
    import ssl

    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(cert), str(key))
    return context


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode cannot import a conftest)."""
    return SimpleNamespace(
        build=build, Watch=Watch, put=put, delete=delete, post=_post, free_port=free_port, tls_context=tls_context,
        TlsSettings=TlsSettings,
    )  # fmt: skip
