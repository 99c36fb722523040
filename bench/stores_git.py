"""Git store cost: what one watch check costs, what a transfer costs, and RSS after build.

Check: the watch's cheap question (``ls-remote`` of one ref over smart HTTP on loopback),
timed through the source (``GitSource.check``) 50 times, next to a bare ``git ls-remote``
of the same ref from the same process, so the store's own overhead shows as a ratio from
the same run. Transfer: a commit pushed, then one ``fetch()`` (ls-remote + depth-1 fetch +
tree read), 20 times; and a ``fetch()`` with nothing moved (ls-remote + local read).

RSS: a fresh interpreter imports dynconf-core and the git plugin, builds a source and
reports VmRSS (target <= 40 MiB); a second probe also performs one fetch (GitPython loaded).

Run: ``uv run python bench/stores_git.py`` (uses the published testenv git server, or starts
one with ``scripts/testenv start git`` and stops it afterwards).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKS = 50
TRANSFERS = 20
ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@dynconf.test",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@dynconf.test",
       "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}  # fmt: skip


def _published() -> dict[str, str] | None:
    env = REPO / ".testenv" / "published" / "git.env"
    if not env.is_file():
        return None
    values = dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)
    return values if "DYNCONF_TEST_GIT_HTTP_URL" in values else None


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, text=True, check=True,
                          capture_output=True).stdout.strip()  # fmt: skip


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return f"p50 {statistics.median(ordered):.1f} ms  p95 {p95:.1f} ms"


def bench_costs(values: dict[str, str]) -> None:
    from dynconf.stores import StoreSpec
    from dynconf_store_git.plugin import GIT_STORE

    root = Path(values["DYNCONF_TEST_GIT_ROOT"])
    base = values["DYNCONF_TEST_GIT_HTTP_URL"].rsplit("/", 1)[0]
    name = f"bench-{uuid.uuid4().hex[:8]}.git"
    _git("init", "-q", "--bare", "--initial-branch=main", str(root / name))
    _git("-C", str(root / name), "config", "http.receivepack", "true")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        _git("clone", "-q", f"{base}/{name}", str(work))
        (work / "app.yaml").write_text("n: 0\n")
        _git("add", "-A", cwd=work)
        _git("commit", "-q", "-m", "seed", cwd=work)
        _git("push", "-q", "origin", "main", cwd=work)
        url = f"{base}/{name}"
        source = GIT_STORE.build(StoreSpec(source="git", endpoint=url, key="app.yaml",
                                           extra={"cache_dir": f"{tmp}/cache"}))  # fmt: skip
        source.fetch()
        check_ms, raw_ms, same_ms, moved_ms = [], [], [], []
        for _ in range(CHECKS):
            started = time.perf_counter()
            source.check()
            check_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            _git("ls-remote", url, "refs/heads/main")
            raw_ms.append((time.perf_counter() - started) * 1000)
        for _ in range(TRANSFERS):
            started = time.perf_counter()
            source.fetch()
            same_ms.append((time.perf_counter() - started) * 1000)
        for n in range(1, TRANSFERS + 1):
            (work / "app.yaml").write_text(f"n: {n}\n")
            _git("commit", "-q", "-am", f"n {n}", cwd=work)
            _git("push", "-q", "origin", "main", cwd=work)
            started = time.perf_counter()
            answer = source.fetch()
            moved_ms.append((time.perf_counter() - started) * 1000)
            assert getattr(answer, "text", "") == f"n: {n}\n"
        source.close()
    print(f"git watch check (ls-remote via the store), {CHECKS} checks: {_ms(check_ms)}")
    print(f"bare `git ls-remote` of the same ref:        {_ms(raw_ms)}  -> store/raw p50 "
          f"ratio {statistics.median(check_ms) / statistics.median(raw_ms):.2f}x")  # fmt: skip
    print(f"fetch() with the ref unmoved (no transfer), {TRANSFERS}x: {_ms(same_ms)}")
    print(f"fetch() after a push (depth-1 transfer + read), {TRANSFERS}x: {_ms(moved_ms)}; "
          f"transfers counted {source.transfers}")  # fmt: skip


_RSS_PROBE = """
import sys, tempfile
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
if sys.argv[1] != 'bare':
    from dynconf.stores import StoreSpec
    from dynconf_store_git.plugin import GIT_STORE
    source = GIT_STORE.build(StoreSpec(source='git', endpoint=sys.argv[2], key='app.yaml',
                                       extra={'cache_dir': tempfile.mkdtemp()}))
    if sys.argv[1] == 'fetch':
        source.fetch()
print(rss())
"""


def bench_rss(url: str) -> tuple[float, float, float]:
    def probe(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _RSS_PROBE, mode, url], capture_output=True,
                             text=True, check=True)  # fmt: skip
        return float(out.stdout.strip())

    return probe("bare"), probe("build"), probe("fetch")


def main() -> int:
    values = _published()
    started_here = False
    if values is None:
        out = subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "start", "git"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        started_here = True
        values = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    try:
        bench_costs(values)
        bare, built, fetched = bench_rss(values["DYNCONF_TEST_GIT_HTTP_URL"])
    finally:
        if started_here:
            subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "stop", "git"],
                           capture_output=True, check=False)  # fmt: skip
    print(f"RSS after import+build: {built:.1f} MiB (bare interpreter {bare:.1f} MiB; "
          f"target <= 40 MiB); after one fetch (GitPython loaded): {fetched:.1f} MiB")  # fmt: skip
    return 0 if built <= 40 else 1


if __name__ == "__main__":
    sys.exit(main())
