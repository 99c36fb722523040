"""Ours beside the tools a platform team would install instead, from one run: issue 19's table.

Each peer is installed by this bench into a cache outside the repository,
``~/.cache/dynconf-bench/<peer>`` (``DYNCONF_BENCH_CACHE`` moves it), on first use:

* ``consul-template`` v0.41.1: ``go install github.com/hashicorp/consul-template@v0.41.1``
  with ``GOBIN`` in the cache (the Go module proxy; a minute or two on two cores);
* ``dynamic-config-py`` 0.3.3, the book's Python binding (Rust core): a venv of this Python in
  the cache, ``pip install dynamic-config-py==0.3.3`` from PyPI (its wheel has no
  dependencies; it validates with this venv's pydantic, see ``bench/bench_load.py``).

``--no-install`` uses only what the cache already holds and prints a peer it lacks as
``peer not installed``, which is how the CI smoke (``tests/bench/test_peers_smoke.py``) runs.

The method is ``bench/bench_load.py``'s: ours and the peer are measured in the same rounds,
odd rounds in the reverse order, and each ratio is the median of the per-round ratios
ours / peer (so a burst of the neighbours' load that hits a round hits both sides of its
ratio); the ``ours`` and ``peer`` columns are the medians of the per-round values. Below 1
is ahead, except for a throughput (req/s), where above 1 is. The rows:

* consul, agent vs consul-template, each watching its own key of the test Consul
  (``scripts/testenv``): both started fresh each round, then RSS (``VmRSS``) once the
  first render is on disk and settled, idle CPU over ``--idle`` seconds with no change (the
  agent at ``--watch 15``; the run time of every thread from ``/proc/<pid>/task/*/schedstat``,
  nanoseconds, as % of one core; 15 s holds one tick of the agent: its drift check), then
  ``--changes`` writes to each key at each of ``--gaps`` (0.25, 1 and 5 s apart), ours and
  the peer's in turn, each timed from just before the write until the rendered file holds it
  (p50, p95 per round and gap). A write that brings a new index is followed at once; only
  an answer that brings nothing waits the watch floor (:data:`dynconf.stores.WATCH_FLOOR`,
  0.5 s), so the closely spaced rows are where a pacing floor on real changes would show;
* one-shot start -> first render: ``dynamic-config-agent`` without ``--watch`` (the init
  container) vs ``consul-template -once``, a fresh output directory each run, the median of
  ``--runs`` runs per round; beside it the interpreter's floor measured in the same rounds:
  ``python -c pass``, ``python -S -c pass``, ``python -I -c 'import dynconf'``, ``import
  consul`` (py-consul, the client the consul one-shot cannot start without: requests, ssl and
  importlib.metadata under it) and ``import dynconf_k8s.agent.main``;
* config server: ours (``dynamic-config-server``, one worker) and the book's Rust server
  (``cargo install dynamic-config-server``) serve the same files from the same server.toml;
  ``wrk`` (``apt-get install wrk``; else ``bench/configserver.py``'s asyncio generator, which
  then shares the cores and caps both) drives ``GET /billing/prod`` for ``--duration`` s;
* spring: ours vs Spring Cloud Config Server (``bench/spring_config_server``, one
  ``@EnableConfigServer`` class, packaged with ``mvn package`` from Maven Central into the cache;
  ``java`` and ``mvn`` on PATH) serving the same keys (YAML: its native profile reads no TOML)
  with no credential (it has no auth of its own; ours checks the bearer), the same load; each
  side gets one unmeasured load first, so the JVM is measured warm;
* engine (``bench/bench_load.py``'s workload and loaders, CPU time): load vs
  dynamic-config-py, vs pydantic-settings and vs dynaconf; the nested read ``config.current().db.d7`` vs
  a held pydantic-settings instance and vs the binding's ``current().db.d7``.

* webhook: ours (``dynamic-config-webhook serve``) vs the HashiCorp vault-k8s injector 1.6.2
  (built with ``go build`` into the cache, run against the test API server): p99 and p50 of
  the open loop at 200/s, and the sustained admissions/s; ``bench/peers_webhook.py`` says how
  the peer is built and run (root: a private mount namespace gives it the in-cluster token).

Every server is on 127.0.0.1 and every loop is bounded. Run from the repo root::

    uv run python bench/peers.py [--rounds 3] [--rows consul,one-shot,engine,webhook] [--no-install]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_load
import peers_webhook
from agent_latency import AGENT, rss_mib, server_env, stop_started, wait_for

CACHE = Path(os.environ.get("DYNCONF_BENCH_CACHE", "~/.cache/dynconf-bench")).expanduser()
CONSUL_TEMPLATE = ("github.com/hashicorp/consul-template", "v0.41.1")
DCPY = ("dynamic-config-py", "0.3.3")
RUST_SERVER = ("dynamic-config-server", "0.10.0")
SPRING = ("3.5.7", "Boot 3.5.7 / Cloud 2025.0.0")
"""The Boot 3 line Maven Central serves whole for Java 17 (``bench/spring_config_server/pom.xml``)."""
ROWS = ("consul", "one-shot", "engine", "config-server", "spring", "webhook")

RUN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The environment every measured process gets: Python may write byte-code, so after the
warm-up run no start compiles source, as in the agent image (``docker/agent-install.sh``
compiles every module at build). A shell that sets ``PYTHONDONTWRITEBYTECODE`` would
otherwise have each agent compile its ~250 modules again: +0.3 s and +5 MiB of RSS here."""


def bake_plugin_lock(directory: Path) -> None:
    """Run our processes with a plugin lock, as the agent image does (``dynconf plugins lock``
    at build, ``DYNCONF_PLUGIN_LOCK`` set): the agent loads exactly the locked plugins and
    does not scan every installed distribution's entry points (a dev venv holds ~350)."""
    lock = directory / "plugins.lock"
    dynconf = Path(sys.executable).with_name("dynconf")
    subprocess.run(
        [str(dynconf), "plugins", "lock", "--output", str(lock)],
        check=True,
        capture_output=True,
        env=RUN_ENV,
    )
    RUN_ENV["DYNCONF_PLUGIN_LOCK"] = str(lock)


# ---------------------------------------------------------------------------- the table


@dataclass
class Row:
    """One line of the table: the per-round values of ours and of the peer."""

    what: str
    unit: str
    ours: list[float] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)
    missing: str = ""
    """Why there is no peer column (``peer not installed``, ``peer not built (...)``)."""

    def ratio(self) -> float | None:
        """The median of the per-round ratios ours / peer (None without a peer)."""
        pairs = [(o, p) for o, p in zip(self.ours, self.peer, strict=False) if p > 0]
        if not pairs:
            return None
        return statistics.median(o / p for o, p in pairs)


PEER_ZERO = "— (the peer measured 0)"


def _value(samples: list[float], unit: str) -> str:
    if not samples:
        return "—"
    value = statistics.median(samples)
    digits = {"ms": 2, "MiB": 1, "%": 3, "ns": 1, "µs": 0, "req/s": 0}.get(unit, 3)
    return f"{value:.{digits}f} {unit}"


def table(rows: list[Row]) -> str:
    lines = ["| what | ours | peer (same run) | ratio (ours / peer) |", "|---|---|---|---|"]
    for row in rows:
        value = row.ratio()
        if row.missing:
            peer, ratio = row.missing, "—"
        else:
            peer = _value(row.peer, row.unit)
            ratio = PEER_ZERO if value is None else f"{value:.2f}×"
        lines.append(f"| {row.what} | {_value(row.ours, row.unit)} | {peer} | {ratio} |")
    return "\n".join(lines)


def _by_gap(key: str) -> tuple[float, str]:
    what, _, gap = key.partition("@")
    return float(gap), what


def verdicts(rows: dict[str, Row]) -> list[str]:
    """Issue 19's targets, against this run."""
    out = []

    def check(name: str, key: str, ok: Callable[[Row], bool | None]) -> None:
        row = rows.get(key)
        result = None if row is None else ok(row)
        word = "not measured" if result is None else ("met" if result else "MISSED")
        out.append(f"  {word}: {name}")

    def at_most(limit: float) -> Callable[[Row], bool | None]:
        def ok(row: Row) -> bool | None:
            value = row.ratio()
            return None if value is None else value <= limit

        return ok

    for key in sorted((k for k in rows if k.startswith(("p50@", "p95@"))), key=_by_gap):
        what, _, gap = key.partition("@")
        check(f"change -> file {what}, {gap} s apart, <= consul-template's", key, at_most(1.0))
    check(
        "one-shot start -> first render <= 150 ms",
        "one-shot",
        lambda row: statistics.median(row.ours) <= 150 if row.ours else None,
    )
    check(
        "RSS after first render <= 32 MiB (consul)",
        "rss",
        lambda row: statistics.median(row.ours) <= 32 if row.ours else None,
    )
    check("idle CPU at --watch 15 <= 2x consul-template's", "idle", at_most(2.0))
    check("engine load <= 1.0x dynamic-config-py", "load/dcpy", at_most(1.0))
    check(
        "config server GET >= 0.8x the Rust server's req/s",
        "cs/rps",
        lambda row: None if row.ratio() is None else row.ratio() >= 0.8,  # type: ignore[operator]
    )
    check("config server p99 <= 1.2x the Rust server's", "cs/p99", at_most(1.2))
    check(
        "config server GET ahead of Spring Cloud Config's req/s",
        "spring/rps",
        lambda row: None if row.ratio() is None else row.ratio() > 1,  # type: ignore[operator]
    )
    check("config server p99 ahead of Spring Cloud Config's", "spring/p99", at_most(1.0))
    check("webhook p99 at 200/s <= vault-k8s's", "wh/p99", at_most(1.0))
    check(
        "webhook max sustained admissions/s >= vault-k8s's",
        "wh/rps",
        lambda row: None if row.ratio() is None else row.ratio() >= 1,  # type: ignore[operator]
    )
    check(
        "nested read current().db.x <= 1.05x a held pydantic instance", "read/held", at_most(1.05)
    )
    check("nested read live.db.x <= 1.05x a held pydantic instance", "read/live", at_most(1.05))
    return out


# ---------------------------------------------------------------------------- peers


def _run_logged(command: list[str], env: dict[str, str], what: str) -> None:
    print(f"installing {what}: {' '.join(command)}", file=sys.stderr, flush=True)
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{what} did not install:\n{result.stderr[-3000:]}")


def consul_template(install: bool) -> tuple[Path | None, str]:
    """The consul-template binary in the cache, built on first use; or why there is none."""
    module, version = CONSUL_TEMPLATE
    home = CACHE / f"consul-template-{version}"
    binary = home / "bin" / "consul-template"
    if binary.is_file():
        return binary, ""
    if not install:
        return None, "peer not installed"
    go = shutil.which("go")
    if go is None:
        return None, "peer not built (no go on PATH)"
    env = {**os.environ, "GOBIN": str(home / "bin"), "CGO_ENABLED": "0", "GOFLAGS": "-modcacherw"}
    try:
        _run_logged([go, "install", f"{module}@{version}"], env, f"consul-template {version}")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return None, f"peer not built ({str(error).splitlines()[0]})"
    return binary, ""


def rust_config_server(install: bool) -> tuple[Path | None, str]:
    """The book's Rust ``dynamic-config-server`` from crates.io, built into the cache on first
    use (``cargo install``, default features off: no Kubernetes auth is needed here)."""
    name, version = RUST_SERVER
    home = CACHE / f"{name}-{version}"
    binary = home / "bin" / name
    if binary.is_file():
        return binary, ""
    if not install:
        return None, "peer not installed"
    cargo = shutil.which("cargo")
    if cargo is None:
        return None, "peer not built (no cargo on PATH)"
    command = [cargo, "install", name, "--version", version, "--locked", "--root", str(home)]
    try:
        _run_logged([*command, "--no-default-features"], dict(os.environ), f"{name} {version}")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return None, f"peer not built ({str(error).splitlines()[0]})"
    return binary, ""


def spring_config_server(install: bool) -> tuple[Path | None, str]:
    """The Spring Cloud Config Server peer: ``bench/spring_config_server`` (one
    ``@EnableConfigServer`` class) packaged by Maven from Maven Central into the cache."""
    home = CACHE / f"spring-config-server-{SPRING[0]}"
    jar = home / "spring-config-server.jar"
    if jar.is_file():
        return jar, ""
    if not install:
        return None, "peer not installed"
    mvn, java = shutil.which("mvn"), shutil.which("java")
    if mvn is None or java is None:
        return None, "peer not built (no mvn or java on PATH)"
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "app"
        shutil.copytree(Path(__file__).resolve().parent / "spring_config_server", source)
        try:
            _run_logged([mvn, "-q", "-B", "-DskipTests", "-f", str(source / "pom.xml"), "package"],
                        dict(os.environ), f"Spring Cloud Config {SPRING[1]}")  # fmt: skip
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            return None, f"peer not built ({str(error).splitlines()[0]})"
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / "target" / "spring-config-server.jar", jar)
    return jar, ""


def dynamic_config_py(install: bool) -> tuple[Any, str]:
    """The binding's module from its venv in the cache, made on first use; or why not."""
    name, version = DCPY
    venv = CACHE / f"{name}-{version}"
    marker = venv / ".installed"
    if not marker.is_file():
        if not install:
            return None, "peer not installed"
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        try:
            _run_logged([sys.executable, "-m", "venv", str(venv)], env, f"{name} venv")
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "-q"]
            _run_logged([*pip, f"{name}=={version}"], env, f"{name} {version}")
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            return None, f"peer not built ({str(error).splitlines()[0]})"
        marker.write_text(version)
    os.environ[bench_load.PEER_VENV] = str(venv)
    binding = bench_load._binding()
    if binding is None:
        return None, f"peer not importable from {venv}"
    return binding, ""


# ---------------------------------------------------------------------------- processes


def cpu_ns(pid: int) -> int:
    """Run time of every live thread of ``pid``, in nanoseconds (``schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass
class Watcher:
    """A long-lived renderer (ours or the peer) of one key into one file."""

    name: str
    command: list[str]
    out: Path
    log: IO[bytes]
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=RUN_ENV,
        )

    def wait_rendered(self, text: str, timeout: float = 30.0) -> float:
        try:
            return wait_for(self.out, text, timeout)
        except TimeoutError:
            self.log.flush()
            tail = Path(self.log.name).read_text(errors="replace")[-2000:]
            raise TimeoutError(f"{self.name} never rendered {text!r}:\n{tail}") from None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@contextmanager
def consul_env() -> Iterator[dict[str, str]]:
    """The test Consul's address: from the environment (a test's fixture), else
    ``scripts/testenv`` (started here, and stopped after, when it was not running)."""
    if os.environ.get("DYNCONF_TEST_CONSUL_ADDR") and os.environ.get("DYNCONF_TEST_CONSUL_URL"):
        yield {k: os.environ[k] for k in ("DYNCONF_TEST_CONSUL_ADDR", "DYNCONF_TEST_CONSUL_URL")}
        return
    started: list[str] = []
    try:
        yield server_env("consul", started)
    finally:
        stop_started(started)


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * fraction + 0.5) - 1)]


# ---------------------------------------------------------------------------- consul rows


def consul_rows(options: argparse.Namespace, ct: Path | None, missing: str) -> dict[str, Row]:
    import consul

    rows = {
        "rss": Row("agent RSS after first render (consul)", "MiB"),
        "idle": Row("idle CPU, agent at --watch 15 (% of a core)", "%"),
    }
    for gap in options.gaps:
        rows[f"p50@{gap:g}"] = Row(
            f"consul change → file p50, changes {gap:g} s apart (agent vs consul-template "
            f"{CONSUL_TEMPLATE[1].lstrip('v')})",
            "ms",
        )
        rows[f"p95@{gap:g}"] = Row(f"consul change → file p95, changes {gap:g} s apart", "ms")
    with consul_env() as env, tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        host, _, port = env["DYNCONF_TEST_CONSUL_ADDR"].rpartition(":")
        kv = consul.Consul(host=host, port=int(port)).kv
        warm = f"bench/peers-{uuid.uuid4().hex}.json"
        kv.put(warm, '{"n": 0, "end": 0}')
        (tmp / "warm").mkdir()
        _timed(_agent_one_shot(env, warm, tmp / "warm" / "app.json"))  # byte-code written
        kv.delete(warm)
        for round_number in range(options.rounds):
            here = tmp / f"round{round_number}"
            key = f"bench/peers-{uuid.uuid4().hex}"
            watchers = {"ours": _agent_watcher(env, f"{key}-ours.json", here / "ours")}
            if ct is not None:
                watchers["peer"] = _ct_watcher(ct, env, f"{key}-peer.json", here / "peer")
            keys = {side: f"{key}-{side}.json" for side in watchers}
            for side in watchers:
                kv.put(keys[side], '{"n": -1, "end": 0}')
            try:
                for watcher in watchers.values():
                    watcher.start()
                for watcher in watchers.values():
                    watcher.wait_rendered('"n": -1,')
                time.sleep(1.0)  # the watch opens and the heap settles
                for side, watcher in watchers.items():
                    assert watcher.proc is not None
                    getattr(rows["rss"], side).append(rss_mib(watcher.proc.pid))
                pids = {side: w.proc.pid for side, w in watchers.items() if w.proc is not None}
                before = {side: cpu_ns(pid) for side, pid in pids.items()}
                began = time.perf_counter()
                time.sleep(options.idle)
                elapsed = time.perf_counter() - began
                for side, pid in pids.items():
                    share = (cpu_ns(pid) - before[side]) / 1e9 / elapsed * 100
                    getattr(rows["idle"], side).append(share)
                order = list(watchers) if round_number % 2 == 0 else list(reversed(watchers))
                n = 0
                for gap in options.gaps:
                    samples: dict[str, list[float]] = {side: [] for side in watchers}
                    for _ in range(options.changes):
                        n += 1
                        pair_began = time.perf_counter()
                        for side in order:
                            began = time.perf_counter()
                            kv.put(keys[side], f'{{"n": {n}, "end": 0}}')
                            rendered = watchers[side].wait_rendered(f'"n": {n},')
                            samples[side].append((rendered - began) * 1e3)
                        time.sleep(max(0.0, gap - (time.perf_counter() - pair_began)))
                    for side, taken in samples.items():
                        getattr(rows[f"p50@{gap:g}"], side).append(statistics.median(taken))
                        getattr(rows[f"p95@{gap:g}"], side).append(_percentile(taken, 0.95))
            finally:
                for watcher in watchers.values():
                    watcher.stop()
                    watcher.log.close()
                for written in keys.values():
                    kv.delete(written)
    if ct is None:
        for row in rows.values():
            row.missing = missing
    return rows


def _log(directory: Path, name: str) -> IO[bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    return (directory / f"{name}.log").open("wb")


def _agent_one_shot(env: dict[str, str], key: str, out: Path) -> list[str]:
    """The init container's command line: no ``--watch``, one render, exit."""
    command = [str(AGENT), "--source", "consul", "--endpoint", env["DYNCONF_TEST_CONSUL_URL"]]
    return [*command, "--key", key, "--out", str(out)]


def _agent_watcher(env: dict[str, str], key: str, directory: Path) -> Watcher:
    out = directory / "out" / "app.json"
    out.parent.mkdir(parents=True)
    command = [str(AGENT), "--source", "consul", "--endpoint", env["DYNCONF_TEST_CONSUL_URL"]]
    command += ["--key", key, "--out", str(out), "--watch", "15"]
    return Watcher("dynamic-config-agent", command, out, _log(directory, "agent"))


def _ct_template(directory: Path, key: str) -> Path:
    template = directory / "app.json.tpl"
    directory.mkdir(parents=True, exist_ok=True)
    template.write_text(f'{{{{ key "{key}" }}}}\n')
    return template


def _ct_watcher(ct: Path, env: dict[str, str], key: str, directory: Path) -> Watcher:
    out = directory / "out" / "app.json"
    out.parent.mkdir(parents=True)
    template = _ct_template(directory, key)
    command = [str(ct), "-consul-addr", env["DYNCONF_TEST_CONSUL_ADDR"], "-log-level", "err"]
    command += ["-template", f"{template}:{out}"]
    return Watcher("consul-template", command, out, _log(directory, "consul-template"))


# ---------------------------------------------------------------------------- one-shot rows


def _timed(command: list[str]) -> float:
    """Milliseconds from spawn to exit; the command must succeed."""
    began = time.perf_counter()
    result = subprocess.run(
        command, capture_output=True, stdin=subprocess.DEVNULL, env=RUN_ENV, check=False
    )
    elapsed = (time.perf_counter() - began) * 1e3
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{command[0]} exited {result.returncode}:\n{tail}")
    return elapsed


def one_shot_rows(options: argparse.Namespace, ct: Path | None, missing: str) -> dict[str, Row]:
    import consul

    python = sys.executable
    rows = {
        "one-shot": Row(
            "agent start → first render (one-shot, the init container; vs consul-template -once)",
            "ms",
        ),
        "floor": Row("  floor: `python -c pass` (vs consul-template -once)", "ms"),
        "floor-S": Row("  floor: `python -S -c pass` (no site)", "ms"),
        "floor-I": Row("  floor: `python -I -c 'import dynconf'` (the engine's package)", "ms"),
        "libs": Row(
            "  `python -c 'import consul'` (py-consul: requests, ssl, importlib.metadata)", "ms"
        ),
        "import": Row("  `python -c 'import dynconf_k8s.agent.main'`", "ms"),
    }
    with consul_env() as env, tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        host, _, port = env["DYNCONF_TEST_CONSUL_ADDR"].rpartition(":")
        kv = consul.Consul(host=host, port=int(port)).kv
        key = f"bench/peers-{uuid.uuid4().hex}.json"
        kv.put(key, '{"n": 1, "end": 0}')
        template = _ct_template(tmp, key)
        counter = iter(range(1_000_000))

        def fresh() -> Path:
            out = tmp / f"run{next(counter)}" / "app.json"
            out.parent.mkdir()
            return out

        def ours() -> float:
            out = fresh()
            elapsed = _timed(_agent_one_shot(env, key, out))
            assert '"n": 1,' in out.read_text()
            return elapsed

        def peer() -> float:
            assert ct is not None
            out = fresh()
            command = [str(ct), "-once", "-consul-addr", env["DYNCONF_TEST_CONSUL_ADDR"]]
            command += ["-log-level", "err", "-template", f"{template}:{out}"]
            elapsed = _timed(command)
            assert '"n": 1,' in out.read_text()
            return elapsed

        cases: list[tuple[list[float], Callable[[], float]]] = [
            (rows["one-shot"].ours, ours),
            (rows["floor"].ours, lambda: _timed([python, "-c", "pass"])),
            (rows["floor-S"].ours, lambda: _timed([python, "-S", "-c", "pass"])),
            (rows["floor-I"].ours, lambda: _timed([python, "-I", "-c", "import dynconf"])),
            (rows["libs"].ours, lambda: _timed([python, "-c", "import consul"])),
            (rows["import"].ours, lambda: _timed([python, "-c", "import dynconf_k8s.agent.main"])),
        ]
        if ct is not None:
            peer_samples: list[float] = []
            cases.append((peer_samples, peer))
        for _samples, run in cases:
            run()  # warm: byte-code written, the page cache
        for round_number in range(options.rounds):
            order = cases if round_number % 2 == 0 else list(reversed(cases))
            for samples, run in order:
                samples.append(statistics.median(run() for _ in range(options.runs)))
        kv.delete(key)
    for row in rows.values():
        if ct is None:
            row.missing = missing
        else:
            row.peer = list(peer_samples)
    return rows


# ---------------------------------------------------------------------------- engine rows


def engine_rows(options: argparse.Namespace, binding: Any, missing: str) -> dict[str, Row]:
    from bench_load import Case, measure

    from dynconf.config import DynamicConfig

    rows = {
        "load/dcpy": Row(
            "engine load, 100 TOML keys + 20 env → model (vs dynamic-config-py 0.3.3)", "ms"
        ),
        "load/ps": Row("engine load (vs pydantic-settings)", "ms"),
        "load/dynaconf": Row("engine load (vs dynaconf, its dict validated into the model)", "ms"),
        "read/held": Row(
            "nested read `current().db.x` (vs a held pydantic-settings instance)", "ns"
        ),
        "read/live": Row("nested read `live.db.x` (vs a held pydantic-settings instance)", "ns"),
        "read/dcpy": Row(
            "nested read `current().db.x` (vs dynamic-config-py current().db.x)", "ns"
        ),
    }
    with tempfile.TemporaryDirectory() as directory:
        toml_path = bench_load._write_workload(Path(directory))
        loads = bench_load.loaders(toml_path, binding)
        load = {
            name: Case(name, loads[name], options.engine_number, [])
            for name in ("dynconf", "pydantic-settings", "dynaconf", "dynamic-config-py")
            if name in loads
        }
        measure(list(load.values()), options.engine_rounds)
        config = DynamicConfig(bench_load.Model, "").file(toml_path).whole_document()
        config = config.env("BENCH_")
        config.init()
        ps: Any = bench_load._settings_class(toml_path)()
        n = options.engine_number * 10_000
        reads = {
            "ours": Case("current().db.d7", lambda: config.current().db.d7, n, []),
            "held": Case("ps.db.d7", lambda: ps.db.d7, n, []),
            "live": Case("live.db.d7", lambda: config.live.db.d7, n, []),
        }
        if binding is not None:
            bound = bench_load.binding_config(binding, toml_path)
            bound.init()
            reads["dcpy"] = Case("binding", lambda: bound.current().db.d7, n, [])
        measure(list(reads.values()), options.engine_rounds)

    def fill(row: Row, ours: Case, peer: Case | None, scale: float) -> None:
        row.ours = [s * scale for s in ours.samples]
        if peer is None:
            row.missing = missing
        else:
            row.peer = [s * scale for s in peer.samples]

    fill(rows["load/dcpy"], load["dynconf"], load.get("dynamic-config-py"), 1e3)
    fill(rows["load/ps"], load["dynconf"], load["pydantic-settings"], 1e3)
    fill(rows["load/dynaconf"], load["dynconf"], load["dynaconf"], 1e3)
    fill(rows["read/held"], reads["ours"], reads["held"], 1e9)
    fill(rows["read/live"], reads["live"], reads["held"], 1e9)
    fill(rows["read/dcpy"], reads["ours"], reads.get("dcpy"), 1e9)
    return rows


# ---------------------------------------------------------------------------- config server


SERVER_TOML = """
[server]
bind = "127.0.0.1:{port}"
max_stream_connections = 1000
[[server.sections]]
application = "billing"
profile = "prod"
files = ["billing.toml"]
[[server.clients]]
name = "bench"
token = "{token}"
applications = ["billing"]
"""
"""Keys both servers read (the Rust one refuses any key it does not know)."""


def _start_server(binary: str, directory: Path, name: str) -> tuple[subprocess.Popen[bytes], int]:
    import configserver

    port = configserver.free_port()
    here = directory / name
    here.mkdir()
    (here / "billing.toml").write_text((directory / "billing.toml").read_text())
    (here / "server.toml").write_text(SERVER_TOML.format(port=port, token=configserver.TOKEN))
    process = subprocess.Popen(
        [binary, "server.toml"],
        cwd=here,
        stdout=(here / "server.log").open("wb"),
        stderr=subprocess.STDOUT,
        env=RUN_ENV,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/billing/prod",
                headers={"Authorization": f"Bearer {configserver.TOKEN}"},
            )
            for _ in range(200):  # warm: connections, caches
                urllib.request.urlopen(request, timeout=1).read()
            return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    log = (here / "server.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"{name} did not start:\n{log}")


BILLING_TOML = (
    '[billing]\nname = "billing"\nport = 8080\n[billing.db]\nhost = "db"\npool = 5\n'
    + "".join(f"[billing.feature{i}]\nenabled = true\nweight = {i}\n" for i in range(20))
)
BILLING_YAML = (
    "billing:\n  name: billing\n  port: 8080\n  db:\n    host: db\n    pool: 5\n"
    + "".join(f"  feature{i}:\n    enabled: true\n    weight: {i}\n" for i in range(20))
)
"""The one document both config-server rows serve: TOML for ours and the Rust server, the same
keys in YAML for Spring (whose native repository reads no TOML)."""


def _server_rows(keys: str, peer_name: str) -> dict[str, Row]:
    import configserver

    tool = "wrk -t1" if shutil.which("wrk") else "an asyncio generator in this process"
    return {
        f"{keys}/rps": Row(
            f"config server GET, {configserver.CONNECTIONS} connections, req/s (higher is "
            f"better; {tool}; vs {peer_name})",
            "req/s",
        ),
        f"{keys}/p99": Row(f"config server GET p99 (vs {peer_name})", "ms"),
        f"{keys}/rss": Row(f"config server RSS after the load (vs {peer_name})", "MiB"),
    }


def _load_rounds(
    options: argparse.Namespace,
    servers: dict[str, tuple[subprocess.Popen[bytes], int]],
    rows: dict[str, Row],
    keys: str,
) -> None:
    """``--rounds`` interleaved loads of ``GET /billing/prod`` on each side, after one
    unmeasured load each (a JIT-compiled peer is measured warm, as in production)."""
    import asyncio

    import configserver

    def load(port: int) -> tuple[float, float, float]:
        if shutil.which("wrk"):
            return configserver.wrk_run(port)
        return asyncio.run(configserver.asyncio_run(port))

    configserver.DURATION = options.duration
    for _process, port in servers.values():
        load(port)
    for round_number in range(options.rounds):
        order = list(servers) if round_number % 2 == 0 else list(reversed(servers))
        for side in order:
            process, port = servers[side]
            rps, _p50, p99 = load(port)
            getattr(rows[f"{keys}/rps"], side).append(rps)
            getattr(rows[f"{keys}/p99"], side).append(p99)
            getattr(rows[f"{keys}/rss"], side).append(rss_mib(process.pid))


def _stop_servers(servers: dict[str, tuple[subprocess.Popen[bytes], int]]) -> None:
    for process, _port in servers.values():
        process.terminate()
        try:
            process.wait(timeout=35)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _rows_beside(
    options: argparse.Namespace,
    keys: str,
    peer_name: str,
    start_peer: Callable[[Path], tuple[subprocess.Popen[bytes], int]] | None,
    missing: str,
) -> dict[str, Row]:
    """Ours (``dynamic-config-server``) and the peer ``start_peer`` starts, loaded in turn."""
    rows = _server_rows(keys, peer_name)
    ours_binary = str(Path(sys.executable).with_name("dynamic-config-server"))
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        (tmp / "billing.toml").write_text(BILLING_TOML)
        servers = {"ours": _start_server(ours_binary, tmp, "ours")}
        try:
            if start_peer is not None:
                servers["peer"] = start_peer(tmp)
            _load_rounds(options, servers, rows, keys)
        finally:
            _stop_servers(servers)
    if start_peer is None:
        for row in rows.values():
            row.missing = missing
    return rows


def config_server_rows(
    options: argparse.Namespace, rust: Path | None, missing: str
) -> dict[str, Row]:
    start = None if rust is None else (lambda tmp: _start_server(str(rust), tmp, "peer"))
    name = f"the book's Rust dynamic-config-server {RUST_SERVER[1]}"
    return _rows_beside(options, "cs", name, start, missing)


def _start_spring(jar: Path, directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Spring Cloud Config's native profile on ``directory``: ``billing.yml`` for every profile."""
    import configserver

    port = configserver.free_port()
    here = directory / "spring"
    here.mkdir()
    (here / "billing.yml").write_text(BILLING_YAML)
    process = subprocess.Popen(
        ["java", "-jar", str(jar), f"--server.port={port}", "--server.address=127.0.0.1",
         "--spring.profiles.active=native",
         f"--spring.cloud.config.server.native.search-locations=file:{here}/",
         "--logging.level.root=WARN"],
        cwd=here, stdout=(here / "server.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 180  # a JVM on two loaded cores
    while time.monotonic() < deadline:
        try:
            for _ in range(200):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/billing/prod", timeout=5).read()
            return process, port
        except OSError:
            time.sleep(0.5)
    process.kill()
    process.wait()
    log = (here / "server.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"Spring Cloud Config did not start:\n{log}")


def spring_rows(options: argparse.Namespace, jar: Path | None, missing: str) -> dict[str, Row]:
    start = None if jar is None else (lambda tmp: _start_spring(jar, tmp))
    name = f"Spring Cloud Config Server ({SPRING[1]}, native profile)"
    return _rows_beside(options, "spring", name, start, missing)


# ---------------------------------------------------------------------------- main


def _gaps(text: str) -> tuple[float, ...]:
    try:
        gaps = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--gaps takes seconds like 0.25,1,5, not {text!r}"
        ) from None
    if not gaps or min(gaps) <= 0:
        raise argparse.ArgumentTypeError("--gaps takes positive seconds, like 0.25,1,5")
    return gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"of {', '.join(ROWS)}")
    parser.add_argument(
        "--changes", type=int, default=20, help="writes per side per round, at each gap"
    )
    parser.add_argument(
        "--idle", type=float, default=15.0, help="idle CPU window, seconds (one --watch period)"
    )
    parser.add_argument(
        "--gaps",
        type=_gaps,
        default=(0.25, 1.0, 5.0),
        help="seconds between one change and the next, one p50/p95 pair of rows each "
        "(comma-separated; default 0.25,1,5)",
    )
    parser.add_argument("--runs", type=int, default=5, help="one-shot runs per side per round")
    parser.add_argument("--engine-rounds", type=int, default=15)
    parser.add_argument(
        "--duration", type=int, default=10, help="seconds of load per config-server sample"
    )
    parser.add_argument("--engine-number", type=int, default=20, help="loads per sample")
    parser.add_argument(
        "--paced", type=float, default=10.0, help="seconds of the 200/s webhook load per sample"
    )
    parser.add_argument(
        "--admissions", type=int, default=8000, help="admissions per sustained webhook sample"
    )
    parser.add_argument(
        "--no-install", action="store_true", help="use only peers already in the cache"
    )
    options = parser.parse_args(argv)
    wanted = [name.strip() for name in options.rows.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)}; choose from {', '.join(ROWS)}")

    rows: dict[str, Row] = {}
    peers: list[str] = []
    lock_dir = tempfile.TemporaryDirectory()
    if set(wanted) & {"consul", "one-shot", "config-server"}:  # rows that start our processes
        bake_plugin_lock(Path(lock_dir.name))
    if "consul" in wanted or "one-shot" in wanted:
        ct, missing = consul_template(install=not options.no_install)
        peers.append(f"consul-template {CONSUL_TEMPLATE[1]}: {ct or missing}")
        if "consul" in wanted:
            rows.update(consul_rows(options, ct, missing))
        if "one-shot" in wanted:
            rows.update(one_shot_rows(options, ct, missing))
    if "config-server" in wanted:
        rust, missing = rust_config_server(install=not options.no_install)
        peers.append(f"dynamic-config-server {RUST_SERVER[1]}: {rust or missing}")
        rows.update(config_server_rows(options, rust, missing))
    if "spring" in wanted:
        jar, missing = spring_config_server(install=not options.no_install)
        peers.append(f"Spring Cloud Config {SPRING[1]}: {jar or missing}")
        rows.update(spring_rows(options, jar, missing))
    if "engine" in wanted:
        binding, missing = dynamic_config_py(install=not options.no_install)
        where = CACHE / f"{DCPY[0]}-{DCPY[1]}" if binding is not None else missing
        peers.append(f"dynamic-config-py {DCPY[1]}: {where}")
        rows.update(engine_rows(options, binding, missing))
    if "webhook" in wanted:
        vault_k8s, missing = peers_webhook.vault_k8s(CACHE, install=not options.no_install)
        peers.append(f"vault-k8s {peers_webhook.VAULT_K8S[1]}: {vault_k8s or missing}")
        rows.update(peers_webhook.webhook_rows(options, vault_k8s, missing, Row))
    printed = list(rows.values())

    lock_dir.cleanup()
    print(f"peers: {'; '.join(peers) or 'none'}")
    print(
        f"rounds: {options.rounds} interleaved (engine: {options.engine_rounds}, CPU time); "
        f"{os.cpu_count()} cores; python {sys.version.split()[0]}"
    )
    print(table(printed))
    print("targets (issue 19), this run:")
    print("\n".join(verdicts(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
