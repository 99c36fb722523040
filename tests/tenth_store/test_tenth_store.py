"""The worked tenth store (``examples/tenth-store``, distribution ``dynconf-store-http``).

It is installed the way ``docker/agent-install.sh`` installs the nine: a fresh venv, the
third-party requirements exactly as ``uv.lock`` pins them, the workspace's dynconf-core and
dynconf-k8s, then the example itself. ``dynconf plugins lock`` pins it, and the locked process
renders from a loopback HTTP server the test runs; a lock written before the example was
installed makes the same command refuse the source by name.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fixtures.uv import Uv

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tenth-store"
TOKEN = "tenth-store-test-token"
HEADER = "X-Config-Token"

pytestmark = [pytest.mark.slow]


@dataclass
class Served:
    """The document the loopback server answers, and what it was asked."""

    body: bytes = b'{"db": {"pool": 4}, "feature": true}'
    statuses: list[int] = field(default_factory=list)
    credentials: list[str] = field(default_factory=list)
    """Which header carried each request's token (``Authorization`` or ``X-Config-Token``)."""
    pending: bytes | None = None
    """Becomes the body after the second 304, so a watch sees quiet rounds, then a change."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'


def _handler(served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with served.lock:
                status, body = self._answer()
                served.statuses.append(status)
            self.send_response(status)
            if status in (200, 304):
                self.send_header("ETag", served.etag)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _answer(self) -> tuple[int, bytes]:
            if self.headers.get("Authorization") == f"Bearer {TOKEN}":
                served.credentials.append("Authorization")
            elif self.headers.get(HEADER) == TOKEN and "Authorization" not in self.headers:
                served.credentials.append(HEADER)
            else:
                return 401, b"who are you"
            if self.path != "/documents/app.json":
                return 404, b""
            if self.headers.get("If-None-Match") == served.etag:
                if served.pending is not None and served.statuses.count(304) >= 1:
                    served.body, served.pending = served.pending, None
                return 304, b""
            return 200, served.body

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: pytest shows the assertions, not an access log."""

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Served]]:
    served = Served()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/documents", served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@dataclass(frozen=True)
class Install:
    venv: Path
    lock_with: Path
    lock_without: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _run(*argv: str, cwd: Path = REPO, timeout: float = 600) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, uv_bin: Uv) -> Install:
    """dynconf-core + dynconf-k8s, locked; then the example too, locked again."""
    prefix = tmp_path_factory.mktemp("tenth-store")
    venv = prefix / "venv"
    python = str(venv / "bin" / "python")
    requirements = prefix / "requirements.txt"
    uv = str(uv_bin.path)
    _run(uv, "venv", "--quiet", "--python", sys.executable, str(venv))
    _run(uv, "export", "--quiet", "--frozen", "--no-dev", "--no-emit-workspace", "--no-hashes",
         "--package", "dynconf-k8s", "--output-file", str(requirements))  # fmt: skip
    _run(uv, "pip", "install", "--quiet", "--python", python, "-r", str(requirements))
    _run(uv, "pip", "install", "--quiet", "--python", python, "--no-deps",
         "./packages/dynconf-core", "./packages/dynconf-k8s")  # fmt: skip
    lock_without = prefix / "without.lock"
    _run(str(venv / "bin" / "dynconf"), "plugins", "lock", "--output", str(lock_without))
    _run(uv, "pip", "install", "--quiet", "--python", python, "--no-deps", str(EXAMPLE))
    lock_with = prefix / "with.lock"
    _run(str(venv / "bin" / "dynconf"), "plugins", "lock", "--output", str(lock_with))
    return Install(venv=venv, lock_with=lock_with, lock_without=lock_without)


def _env(lock: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DYNCONF_", "DYNAMIC_CONFIG_"))}
    env.update(DYNCONF_PLUGIN_LOCK=str(lock), DYNAMIC_CONFIG_AGENT_TOKEN=TOKEN)
    env.pop("VIRTUAL_ENV", None)
    return env


def _agent(
    install: Install, lock: Path, endpoint: str, out: Path, *more: str
) -> subprocess.CompletedProcess[str]:
    argv = [install.bin("dynamic-config-agent"), "--source", "http", "--endpoint", endpoint,
            "--key", "app.json", "--auth", "token", "--out", str(out), "--one-shot",
            *more]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=_env(lock), timeout=60)


def test_the_lock_pins_the_tenth_store_and_check_loads_it(install: Install) -> None:
    pinned = json.loads(install.lock_with.read_text())["plugins"]
    assert {"distribution": "dynconf-store-http", "version": "0.1.0", "name": "http",
            "value": "dynconf_store_http.plugin"} in pinned  # fmt: skip
    without = json.loads(install.lock_without.read_text())["plugins"]
    assert all(p["distribution"] != "dynconf-store-http" for p in without)
    checked = _run(install.bin("dynconf"), "plugins", "check", str(install.lock_with))
    assert "http" in checked


def test_the_locked_agent_renders_from_the_tenth_store(
    install: Install, server: tuple[str, Served], tmp_path: Path
) -> None:
    endpoint, served = server
    out = tmp_path / "app.json"
    result = _agent(install, install.lock_with, endpoint, out)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == {"db": {"pool": 4}, "feature": True}
    assert served.statuses == [200]


def test_a_lock_without_it_makes_the_agent_refuse_the_source_by_name(
    install: Install, server: tuple[str, Served], tmp_path: Path
) -> None:
    endpoint, served = server
    out = tmp_path / "app.json"
    result = _agent(install, install.lock_without, endpoint, out)
    assert result.returncode == 1
    # a fatal start-up refusal is one JSON log line saying why
    reasons = [
        json.loads(line).get("reason", "")
        for line in result.stdout.splitlines()
        if line.startswith("{") and '"agent_failed"' in line
    ]
    assert reasons
    assert reasons[0].startswith("the http store is not in this agent's plugin lock")
    assert not out.exists()
    assert served.statuses == []


def test_the_locked_engine_renders_from_the_tenth_store(
    install: Install, server: tuple[str, Served], tmp_path: Path
) -> None:
    endpoint, served = server
    out = tmp_path / "app.toml"
    argv = [install.bin("dynconf"), "render", "--source", "http", "--endpoint", endpoint,
            "--key", "app.json", "--out", str(out)]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, env=_env(install.lock_with),
                            timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "pool = 4" in out.read_text()
    assert served.statuses[-1] == 200

    refused = subprocess.run(argv, capture_output=True, text=True,
                             env=_env(install.lock_without), timeout=60)  # fmt: skip
    assert refused.returncode == 1
    assert "no store is named `http`" in refused.stderr


def test_the_source_watches_by_conditional_get(server: tuple[str, Served]) -> None:
    """In-process: priming is silent, an unchanged document costs a 304, a change is yielded."""
    sys.path.insert(0, str(EXAMPLE / "src"))
    try:
        from dynconf_store_http.plugin import HTTP_STORE

        from dynconf.stores import StoreSpec
    finally:
        sys.path.remove(str(EXAMPLE / "src"))
    endpoint, served = server
    spec = StoreSpec(source="http", endpoint=endpoint, key="app.json", auth="token", token=TOKEN)
    assert HTTP_STORE.validate(spec) == []
    assert TOKEN not in HTTP_STORE.describe(spec)
    source = HTTP_STORE.build(spec)
    served.pending = b'{"feature": false}'
    stop = threading.Event()
    answers = source.changes(0.05, stop.is_set)
    try:
        answer = next(answers)
    finally:
        stop.set()
        answers.close()
        source.close()
    assert getattr(answer, "text", None) == '{"feature": false}'
    assert served.statuses == [200, 304, 304, 200]
    refused = HTTP_STORE.validate(StoreSpec(source="http", endpoint="ftp://x", key="a"))
    assert any("http:// or https://" in r for r in refused)
    assert any("no format extension" in r for r in refused)


def test_the_agent_takes_the_stores_own_input_as_a_flag(
    install: Install, server: tuple[str, Served], tmp_path: Path
) -> None:
    """``token_header`` is declared by the store alone; the locked agent takes ``--token-header``."""
    endpoint, served = server
    out = tmp_path / "app.json"
    result = _agent(install, install.lock_with, endpoint, out, "--token-header", HEADER)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["feature"] is True
    assert served.credentials == [HEADER]

    usage = subprocess.run([install.bin("dynamic-config-agent"), "--help"], capture_output=True,
                           text=True, env=_env(install.lock_with), timeout=60)  # fmt: skip
    assert "--token-header" in usage.stdout + usage.stderr

    refused = _agent(install, install.lock_with, endpoint, out, "--token-header", "X Bad")
    assert refused.returncode != 0
    assert "--token-header is not an HTTP header name" in refused.stdout + refused.stderr
    assert TOKEN not in refused.stdout + refused.stderr


_FRONT_ENDS = """
import base64, json, sys
from dynconf.plugins import default_registry
from dynconf_k8s.contract import parse_installation
from dynconf_k8s.node.attributes import VolumeRefused, attribute_spelling, parse_volume
from dynconf_k8s.webhook.admission import decide

def admit(extra):
    annotations = {"dynamic-config.rs/inject": "true", "dynamic-config.rs/source": "http",
                   "dynamic-config.rs/endpoint": "https://config.example.com/documents",
                   "dynamic-config.rs/key": "app.json", "dynamic-config.rs/auth": "token",
                   "dynamic-config.rs/token-secret": "store/token",
                   "dynamic-config.rs/path": "/config/app.json", **extra}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app",
           "annotations": annotations}, "spec": {"containers": [{"name": "app", "image": "x"}]}}
    review = {"request": {"uid": "u", "namespace": "default", "object": pod}}
    response = decide(review, parse_installation({})).response["response"]
    if not response["allowed"]:
        return {"refused": response["status"]["message"]}
    ops = json.loads(base64.b64decode(response["patch"]))
    args = [op["value"]["args"] for op in ops if isinstance(op.get("value"), dict)
            and op["value"].get("name") == "dynamic-config-agent"]
    return {"args": args[0]}

def publish(extra):
    attributes = {"source": "http", "endpoint": "https://config.example.com/documents",
                  "key": "app.json", "path": "app.json", "auth": "token", **extra}
    try:
        spec = parse_volume("/tmp/volume", attributes, {"token": "t"}).store
    except VolumeRefused as error:
        return {"refused": str(error)}
    store = default_registry().store("http")
    return {"extra": dict(spec.extra),
            "refusals": [r.render(attribute_spelling) for r in store.refusals(spec)]}

print(json.dumps({
    "admitted": admit({"dynamic-config.rs/token-header": "X-Config-Token"}),
    "refused": admit({"dynamic-config.rs/token-header": "X Bad"}),
    "file_source": admit({"dynamic-config.rs/source": "file"}),
    "published": publish({"token-header": "X-Config-Token"}),
    "publish_refused": publish({"token-header": "X Bad"}),
}))
"""


def test_the_webhook_and_the_node_agent_take_the_stores_own_input(install: Install) -> None:
    """The annotation ``token-header`` and the volume attribute ``token-header`` exist because
    the locked store declares the input: admitted into the agent's flags and judged by the
    store in each front end's own words; the webhook admits ``source: http`` because the lock
    carries it (and still refuses the embedded ``file``)."""
    python = str(install.venv / "bin" / "python")
    answered = subprocess.run([python, "-c", _FRONT_ENDS], capture_output=True, text=True,
                              env=_env(install.lock_with), timeout=60)  # fmt: skip
    assert answered.returncode == 0, answered.stderr
    result = json.loads(answered.stdout.splitlines()[-1])
    args = result["admitted"]["args"]
    assert args[args.index("--token-header") + 1] == HEADER
    assert result["refused"]["refused"].startswith(
        "dynamic-config.rs/token-header is not an HTTP header name"
    )
    assert (
        "use one of: consul, vault, config-server, firestore, git, redis, etcd, nats, s3, http"
        in (result["file_source"]["refused"])
    )
    assert result["published"] == {"extra": {"token_header": HEADER}, "refusals": []}
    assert result["publish_refused"]["refusals"] == [
        'the volume attribute "token-header" is not an HTTP header name; use letters, digits '
        "and -, e.g. X-Config-Token"
    ]


def test_without_the_store_its_input_is_no_annotation(install: Install) -> None:
    """The same pod under a lock without the tenth store: the key is not part of the contract."""
    python = str(install.venv / "bin" / "python")
    script = (
        "from dynconf_k8s.contract.registry import REGISTRY\nprint('token-header' in REGISTRY)\n"
    )
    env = _env(install.lock_without)
    result = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env,
                            timeout=60, check=True)  # fmt: skip
    assert result.stdout.strip() == "False"
