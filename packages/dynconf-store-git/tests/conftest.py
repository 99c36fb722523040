"""Repositories, servers and helpers for the git store tests.

The shared ``git_server`` fixture (smart HTTP with and without basic auth, git daemon) serves
every bare repository under its ``root``; each test gets its own repository there, seeded
through a scratch clone and ``git push`` over the server's HTTP URL. Tests that must kill a
server (faults) or speak TLS or ssh start their own: the same ``serve_git_http`` the testenv
runs, a TLS terminator in front of it, and an ``sshd`` unpacked from Debian's package.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dynconf.errors import DynconfError
from dynconf.stores import Absent, Fetched, StoreSpec
from dynconf_store_git.plugin import GIT_STORE
from dynconf_store_git.source import GitSource

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "scripts"
WHO = {
    "GIT_AUTHOR_NAME": "tests", "GIT_AUTHOR_EMAIL": "tests@dynconf.test",
    "GIT_COMMITTER_NAME": "tests", "GIT_COMMITTER_EMAIL": "tests@dynconf.test",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
}  # fmt: skip


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **WHO}, text=True, check=True,
        capture_output=True,
    ).stdout.strip()  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Repo:
    """A bare repository served by the test servers, and a scratch clone that pushes to it."""

    name: str
    path: Path
    http_url: str
    auth_url: str
    daemon_url: str
    work: Path

    def commit(self, files: dict[str, str | None], *, links: dict[str, str] | None = None,
               branch: str = "main", tag: str | None = None) -> str:  # fmt: skip
        """Write (None: remove) files and symlinks, commit, push; returns the commit id."""
        git("checkout", "-q", "-B", branch, cwd=self.work)
        for rel, content in files.items():
            target = self.work / rel
            if content is None:
                git("rm", "-q", "-r", "--", rel, cwd=self.work)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            target.write_text(content)
        for rel, pointee in (links or {}).items():
            target = self.work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            target.symlink_to(pointee)
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "--allow-empty", "-m", "update", cwd=self.work)
        if tag:
            git("tag", "-a", "-f", "-m", tag, tag, cwd=self.work)
        git("push", "-q", "--force", "--follow-tags", "origin", branch, cwd=self.work)
        if tag:
            git("push", "-q", "--force", "origin", f"refs/tags/{tag}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


@pytest.fixture
def repo(git_server: Any, tmp_path: Path) -> Repo:
    """A fresh repository whose ``main`` holds ``app.yaml`` (``greeting: hello``)."""
    name = f"t-{uuid.uuid4().hex[:10]}.git"
    path = Path(git_server.root) / name
    git("init", "-q", "--bare", "--initial-branch=main", str(path))
    git("-C", str(path), "config", "http.receivepack", "true")
    git("-C", str(path), "config", "uploadpack.allowReachableSHA1InWant", "true")
    base = git_server.http_url.rsplit("/", 1)[0]
    work = tmp_path / "work"
    git("clone", "-q", f"{base}/{name}", str(work))
    made = Repo(
        name, path, f"{base}/{name}", git_server.http_auth_url.rsplit("/", 1)[0] + f"/{name}",
        git_server.daemon_url.rsplit("/", 1)[0] + f"/{name}", work,
    )  # fmt: skip
    made.commit({"app.yaml": "greeting: hello\n"})
    return made


@pytest.fixture
def make_source(tmp_path: Path) -> Iterator[Callable[..., GitSource]]:
    built: list[GitSource] = []

    def make(endpoint: str, key: str = "app.yaml", **fields: Any) -> GitSource:
        extra = {"cache_dir": str(tmp_path / "cache"), **fields.pop("extra", {})}
        spec = StoreSpec.from_inputs(
            source="git", endpoint=endpoint, key=key, extra=extra, **fields
        )
        source = GIT_STORE.build(spec)
        built.append(source)
        return source

    yield make
    for source in built:
        source.close()


@dataclass
class Watch:
    """A source's ``changes`` running in a thread: deliveries, reported failures, the end."""

    source: GitSource
    interval: float
    delivered: queue.Queue[Fetched | Absent] = field(default_factory=queue.Queue)
    failures: list[DynconfError] = field(default_factory=list)
    error: BaseException | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        self.source.on_failure = self.failures.append
        try:
            for item in self.source.changes(self.interval, self.stopping.is_set):
                self.delivered.put(item)
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished.set()

    def next(self, timeout: float = 30.0) -> Fetched | Absent:
        return self.delivered.get(timeout=timeout)

    def quiet(self, seconds: float) -> bool:
        try:
            self.delivered.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def wait_connected(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.source.connected:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, "the watch never reached the server"
            time.sleep(0.05)


@pytest.fixture
def watcher() -> Iterator[Callable[..., Watch]]:
    started: list[tuple[Watch, threading.Thread]] = []

    def start(source: GitSource, interval: float = 0.3) -> Watch:
        watch = Watch(source, interval)
        thread = threading.Thread(target=watch.run, daemon=True)
        thread.start()
        started.append((watch, thread))
        return watch

    yield start
    for watch, thread in started:
        watch.stopping.set()
        thread.join(10)


# ---------------------------------------------------------------------------- own http server
@dataclass
class OwnHttpServer:
    """``serve_git_http`` (the testenv's smart-HTTP bridge) on a fixed port, killable."""

    root: Path
    port: int
    credentials: str | None = None
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def requests(self) -> int:
        """How many requests the server has answered (its access log, one line each)."""
        return len(self.log.read_text().splitlines()) if self.log and self.log.exists() else 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        code = (
            f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); "
            "from testenv_lib.stores import serve_git_http; "
            "serve_git_http(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)"
        )
        args = [sys.executable, "-c", code, str(self.root), str(self.port)]
        if self.credentials:
            args.append(self.credentials)
        with (self.log or Path(os.devnull)).open("a") as log:
            self.process = subprocess.Popen(args, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("the git http server did not start")

    def kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
            self.process = None


@pytest.fixture
def own_http(git_server: Any, tmp_path: Path) -> Iterator[OwnHttpServer]:
    server = OwnHttpServer(Path(git_server.root), free_port(), log=tmp_path / "http.log")
    server.start()
    yield server
    server.kill()


@pytest.fixture
def own_auth_http(git_server: Any, tmp_path: Path) -> Iterator[OwnHttpServer]:
    """A basic-auth server of our own (user ``reader``), whose requests the test can count."""
    server = OwnHttpServer(Path(git_server.root), free_port(), "reader:right-token",
                           log=tmp_path / "auth-http.log")  # fmt: skip
    server.start()
    yield server
    server.kill()


# ---------------------------------------------------------------------------- TLS in front
@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _make_pki(directory: Path) -> Pki:
    from tests.fixtures.certs import Authority

    directory.mkdir(parents=True, exist_ok=True)
    root, other = Authority("dynconf git test CA"), Authority("some other CA")
    server = root.issue("localhost", ["localhost", "127.0.0.1"])
    client = root.issue("agent", server=False, client=True)
    paths = {name: (directory / f"{name}.pem", directory / f"{name}-key.pem")
             for name in ("ca", "other-ca", "server", "client")}  # fmt: skip
    paths["ca"][0].write_bytes(root.cert_pem())
    paths["other-ca"][0].write_bytes(other.cert_pem())
    server.write(*paths["server"])
    client.write(*paths["client"])
    return Pki(paths["ca"][0], *paths["server"], *paths["client"], paths["other-ca"][0])


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return _make_pki(tmp_path_factory.mktemp("git-pki"))


@dataclass
class TlsFront:
    """A TLS terminator on loopback relaying to a plain git HTTP server."""

    port: int
    upstream: int
    context: ssl.SSLContext
    _listener: socket.socket | None = None
    _thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"https://localhost:{self.port}"

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        try:
            up = socket.create_connection(("127.0.0.1", self.upstream), 5)
        except OSError:
            conn.close()
            return
        # the 5 s bounds the connect only: a keep-alive connection idles longer than that
        # between a poller's requests, and a timed-out pump would half-close the client's
        # side while its next request still reached the upstream (its answer then lost)
        up.settimeout(None)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)

        threading.Thread(target=pump, args=(up, conn), daemon=True).start()
        pump(conn, up)

    def stop(self) -> None:
        if self._listener is not None:
            # close alone leaves accept() blocked on Linux: shut the socket down to wake it
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._thread is not None:
            self._thread.join(5)


@pytest.fixture
def tls_front(pki: Pki, own_http: OwnHttpServer) -> Callable[..., TlsFront]:
    fronts: list[TlsFront] = []

    def start(*, require_client_cert: bool = False) -> TlsFront:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(pki.ca)
        front = TlsFront(free_port(), own_http.port, context)
        front.start()
        fronts.append(front)
        return front

    yield start  # type: ignore[misc]
    for front in fronts:
        front.stop()


# ---------------------------------------------------------------------------- sshd
@dataclass
class SshServer:
    port: int
    user_key: Path
    other_key: Path
    host_key_pub: Path
    root: Path

    def url(self, repo: Repo) -> str:
        return f"ssh://root@127.0.0.1:{self.port}{repo.path}"


def _sshd_binary() -> tuple[Path, dict[str, str]] | None:
    found = shutil.which("sshd") or (
        Path("/usr/sbin/sshd") if Path("/usr/sbin/sshd").exists() else None
    )
    if found:
        return Path(found), {}
    sys.path.insert(0, str(SCRIPTS))
    try:
        from testenv_lib.common import Context

        release = (
            dict(
                line.split("=", 1)
                for line in Path("/etc/os-release").read_text().splitlines()
                if "=" in line
            )
            .get("VERSION_CODENAME", "bookworm")
            .strip('"')
        )
        # the machine's own suite: a newer suite's sshd needs a newer libc
        packages = [f"openssh-server/{release}", f"libwrap0/{release}"]
        root = Context().apt_download(packages, dest=f"sshd-{release}")
    except Exception:
        return None
    libs = f"{root}/lib/x86_64-linux-gnu:{root}/usr/lib/x86_64-linux-gnu"
    return root / "usr" / "sbin" / "sshd", {"LD_LIBRARY_PATH": libs}


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    found = _sshd_binary()
    if found is None or os.geteuid() != 0:
        pytest.skip("no sshd (Debian openssh-server could not be unpacked) or not root")
    binary, env = found
    root = tmp_path_factory.mktemp("sshd")
    os.chmod(root, 0o700)
    for name in ("host", "user", "other"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)],
                       check=True)  # fmt: skip
    (root / "authorized_keys").write_text((root / "user.pub").read_text())
    os.chmod(root / "authorized_keys", 0o600)
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        f"PidFile {root / 'sshd.pid'}\nStrictModes no\n"
        f"SetEnv PATH={os.path.dirname(shutil.which('git') or '/usr/bin/git')}:/usr/bin:/bin\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    # sshd insists on its privilege-separation user; rather than add one to the machine, give
    # sshd a private mount namespace in which /etc/passwd also lists it
    passwd = root / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text().rstrip("\n")
                      + "\nsshd:x:65533:65534::/run/sshd:/usr/sbin/nologin\n")  # fmt: skip
    script = f"mount --bind {passwd} /etc/passwd && exec {binary} -D -e -f {config}"
    if "sshd:" in Path("/etc/passwd").read_text():
        script = f"exec {binary} -D -e -f {config}"
    process = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        env={**os.environ, **env},
        stderr=(root / "sshd.log").open("w"),
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        time.sleep(0.05)
    else:
        process.kill()
        pytest.skip("sshd did not start")
    yield SshServer(port, root / "user", root / "other", root / "host.pub", root)
    process.terminate()
    process.wait(5)
