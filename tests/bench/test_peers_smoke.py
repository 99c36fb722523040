"""``bench/peers.py`` runs end to end in seconds, so the peer harness cannot rot between the
long runs that print issue 19's table.

Small numbers (one round, a few changes, a short idle window) and ``--no-install``: CI never
builds a peer; a peer already in the cache (``~/.cache/dynconf-bench``) is measured beside ours,
and one that is absent is printed as ``peer not installed``. The numbers are not checked (a
smoke on a shared machine times nothing): the table must name every row with a value for ours.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.servers import ConsulServer

BENCH = Path(__file__).resolve().parents[2] / "bench" / "peers.py"


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, str(BENCH), "--no-install", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _row(table: str, what: str) -> list[str]:
    """The cells of the table row that starts with ``what``."""
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0].startswith(what):
            return cells
    raise AssertionError(f"no row {what!r} in:\n{table}")


def _measured_or_named_absent(cells: list[str], unit: str) -> None:
    ours, peer, ratio = cells[1:4]
    assert ours.endswith(f" {unit}"), cells
    if peer == "peer not installed":
        assert ratio == "—", cells
    else:
        assert peer.endswith(f" {unit}"), cells
        assert ratio.endswith("\u00d7") or ratio == "— (the peer measured 0)", cells


def test_engine_rows_print_ours_beside_each_peer() -> None:
    out = _run("--rows", "engine", "--engine-rounds", "2", "--engine-number", "2")
    for what, unit in [
        ("engine load, 100 TOML keys", "ms"),
        ("engine load (vs pydantic-settings)", "ms"),
        ("nested read `current().db.x` (vs a held", "ns"),
        ("nested read `current().db.x` (vs dynamic-config-py", "ns"),
    ]:
        _measured_or_named_absent(_row(out, what), unit)
    assert _row(out, "engine load (vs pydantic-settings)")[2] != "peer not installed"
    assert "targets (issue 19), this run:" in out


def test_consul_and_one_shot_rows_run_against_the_test_consul(
    consul_server: ConsulServer,
) -> None:
    out = _run(
        "--rows", "consul,one-shot", "--rounds", "1", "--changes", "3", "--idle", "0.5",
        "--runs", "1", "--gaps", "0.25,1",
        env={"DYNCONF_TEST_CONSUL_ADDR": consul_server.addr,
             "DYNCONF_TEST_CONSUL_URL": consul_server.url},
    )  # fmt: skip
    for what, unit in [
        ("consul change → file p50, changes 0.25 s apart", "ms"),
        ("consul change → file p95, changes 0.25 s apart", "ms"),
        ("consul change → file p50, changes 1 s apart", "ms"),
        ("consul change → file p95, changes 1 s apart", "ms"),
        ("agent RSS after first render", "MiB"),
        ("idle CPU", "%"),
        ("agent start → first render", "ms"),
        ("floor: `python -c pass`", "ms"),
        ("floor: `python -S -c pass`", "ms"),
        ("floor: `python -I -c 'import dynconf'`", "ms"),
        ("`python -c 'import consul'`", "ms"),
    ]:
        _measured_or_named_absent(_row(out, what), unit)


def test_config_server_rows_load_our_server() -> None:
    out = _run("--rows", "config-server", "--rounds", "1", "--duration", "1")
    for what, unit in [
        ("config server GET, 32 connections, req/s", "req/s"),
        ("config server GET p99", "ms"),
        ("config server RSS after the load", "MiB"),
    ]:
        _measured_or_named_absent(_row(out, what), unit)


def test_spring_rows_load_our_server_beside_an_absent_peer(tmp_path: Path) -> None:
    """An empty cache: the JVM peer is named absent (CI builds no peer), ours is measured."""
    out = _run("--rows", "spring", "--rounds", "1", "--duration", "1",
               env={"DYNCONF_BENCH_CACHE": str(tmp_path)})  # fmt: skip
    for what, unit in [
        ("config server GET, 32 connections, req/s", "req/s"),
        ("config server GET p99 (vs Spring", "ms"),
        ("config server RSS after the load (vs Spring", "MiB"),
    ]:
        cells = _row(out, what)
        _measured_or_named_absent(cells, unit)
        assert "vs Spring Cloud Config" in cells[0] and cells[2] == "peer not installed", cells


def test_webhook_rows_admit_through_our_server_beside_an_absent_peer(tmp_path: Path) -> None:
    """An empty cache: vault-k8s is named absent (CI builds no peer, needs no API server);
    ours is served over HTTPS and must allow the canonical pod with a patch."""
    out = _run("--rows", "webhook", "--rounds", "1", "--paced", "0.5", "--admissions", "200",
               env={"DYNCONF_BENCH_CACHE": str(tmp_path)})  # fmt: skip
    for what, unit in [
        ("admission p99 at 200/s paced (webhook vs vault-k8s 1.6.2)", "µs"),
        ("admission p50 at 200/s paced", "µs"),
        ("admission max sustained /s on 2 cores", "req/s"),
    ]:
        cells = _row(out, what)
        _measured_or_named_absent(cells, unit)
        assert cells[2] == "peer not installed", cells
    assert "vault-k8s v1.6.2: peer not installed" in out
