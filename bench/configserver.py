"""Config server throughput, stream fan-out, and RSS of the firestore and config-server stores.

1. GET throughput and latency: the server runs as its own process (``dynamic-config-server``,
   one uvicorn worker) on 127.0.0.1; the cache is warm (documents are built at start, never per
   request). The load comes from ``wrk`` when installed (``apt-get install wrk``), else from an
   in-process asyncio generator with keep-alive connections. Targets: >= 2,000 req/s, p99 <= 20 ms.
2. Fan-out: ``--subscribers`` change-stream subscribers (200 unless told), one file change; the
   time from the write until each subscriber has read the new generation event, and the
   server's RSS while it holds them. Target: all 200 within 500 ms; at scale, 10,000
   (``--subscribers 10000``) all within 1 s (the file poll interval, 50 ms here, is included).
3. RSS after import + build in a fresh interpreter: firestore (<= 90 MiB) and the config-server
   client (<= 40 MiB), beside a bare interpreter.

Run: ``uv run python bench/configserver.py [--subscribers N]`` (loopback only; nothing else
needed; N above about 9,000 needs ``ulimit -n`` above N + 1,000, for the bench and the server).
The figures are kept in ``bench/results/configserver.json`` (``bench/results.py``), the
fan-out's under ``fanout_<N>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import record

TOKEN = "bench-token-0123456789abcdef0123456789abcdef"
DURATION = 10
CONNECTIONS = 32
SUBSCRIBERS = 200


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(directory: Path, streams: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    (directory / "billing.toml").write_text(
        '[billing]\nname = "billing"\nport = 8080\n[billing.db]\nhost = "db"\npool = 5\n'
        + "".join(f"[billing.feature{i}]\nenabled = true\nweight = {i}\n" for i in range(20))
    )
    (directory / "server.toml").write_text(f'''
[server]
bind = "127.0.0.1:{port}"
file_poll_seconds = 0.05
max_stream_connections = {max(1000, streams)}
max_streams_per_client = {max(1000, streams)}
[[server.sections]]
application = "billing"
profile = "prod"
files = ["billing.toml"]
[[server.clients]]
name = "bench"
token = "{TOKEN}"
applications = ["billing"]
''')
    server = shutil.which("dynamic-config-server") or str(
        Path(sys.executable).parent / "dynamic-config-server"
    )
    process = subprocess.Popen(
        [server, str(directory / "server.toml")],
        stdout=(directory / "server.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the config server did not start; see " + str(directory / "server.log"))


def wrk_run(port: int) -> tuple[float, float, float]:
    result = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{CONNECTIONS}",
            f"-d{DURATION}s",
            "--latency",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            f"http://127.0.0.1:{port}/billing/prod",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = result.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def ms(label: str) -> float:
        value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    if "Non-2xx" in out:
        raise SystemExit("wrk saw non-2xx answers:\n" + out)
    return rps, ms("50%"), ms("99%")


async def asyncio_run(port: int) -> tuple[float, float, float]:
    request = (
        f"GET /billing/prod HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    ).encode()
    latencies: list[float] = []
    deadline = time.monotonic() + DURATION

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
            await reader.readexactly(length)
            latencies.append((time.perf_counter() - started) * 1000)
        writer.close()

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    elapsed = time.monotonic() - started
    ordered = sorted(latencies)
    return len(ordered) / elapsed, statistics.median(ordered), ordered[int(0.99 * len(ordered))]


def rss_of(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def fan_out(port: int, directory: Path, subscribers: int, server_pid: int
                  ) -> tuple[list[float], float]:  # fmt: skip
    """Each subscriber's delay from the write to its event (ms), and the server's RSS holding them."""
    request = (
        f"GET /billing/prod/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()

    async def subscribe() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        while b"id: " not in await reader.readline():  # the subscription's opening event
            pass
        return reader, writer

    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for begin in range(0, subscribers, 250):  # under the server's accept backlog
        batch = min(250, subscribers - begin)
        streams += await asyncio.gather(*(subscribe() for _ in range(batch)))
    held_rss = rss_of(server_pid)
    arrived: list[float] = []

    async def wait(reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readline()
            if line.startswith(b"id: ") and line.strip() != b"id: 1":
                arrived.append(time.perf_counter())
                return

    waiters = [asyncio.create_task(wait(reader)) for reader, _ in streams]
    text = (directory / "billing.toml").read_text()
    written = time.perf_counter()
    (directory / "billing.toml").write_text(text + "[billing.changed]\nat = 1\n")
    await asyncio.wait_for(asyncio.gather(*waiters), timeout=60)
    for _, writer in streams:
        writer.close()
    return [(t - written) * 1000 for t in arrived], held_rss


RSS_PROBE = """
import sys
from dynconf.plugins import discover
from dynconf.stores import StoreSpec
store = discover().store({name!r})
source = store.build(StoreSpec.from_inputs(**{spec!r}))
{touch}
for line in open('/proc/self/status'):
    if line.startswith('VmRSS:'):
        print(int(line.split()[1]) / 1024)
"""


def rss(name: str, spec: dict[str, object], touch: str) -> float:
    code = RSS_PROBE.format(name=name, spec=spec, touch=touch)
    env = {k: v for k, v in os.environ.items() if k != "FIRESTORE_EMULATOR_HOST"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    return float(out.strip())


def bare_rss() -> float:
    code = "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS:')][0] / 1024)"
    return float(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=SUBSCRIBERS)
    subscribers = parser.parse_args().subscribers
    within = 500 if subscribers <= SUBSCRIBERS else 1000
    print(f"cores: {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        process, port = start_server(directory, subscribers)
        try:
            for _ in range(200):  # warm: connections, the document is already built
                urllib.request.urlopen(
                    urllib.request.Request(
                        f"http://127.0.0.1:{port}/billing/prod",
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                ).read()
            if shutil.which("wrk"):
                tool = f"wrk -t1 -c{CONNECTIONS} -d{DURATION}s"
                rps, p50, p99 = wrk_run(port)
            else:
                tool = f"asyncio generator, {CONNECTIONS} connections, {DURATION}s"
                rps, p50, p99 = asyncio.run(asyncio_run(port))
            ok = rps >= 2000 and p99 <= 20
            print(
                f"GET /billing/prod ({tool}): {rps:,.0f} req/s, p50 {p50:.2f} ms, "
                f"p99 {p99:.2f} ms  [target >= 2,000 req/s, p99 <= 20 ms: {'ok' if ok else 'MISSED'}]"
            )
            idle_rss = rss_of(process.pid)
            delays, held_rss = asyncio.run(fan_out(port, directory, subscribers, process.pid))
            worst = max(delays)
            met = worst <= within and len(delays) == subscribers
            print(
                f"fan-out: {len(delays)}/{subscribers} subscribers notified; first "
                f"{min(delays):.0f} ms, median {statistics.median(delays):.0f} ms, last "
                f"{worst:.0f} ms after the write (50 ms file poll included)  "
                f"[target all within {within} ms: {'ok' if met else 'MISSED'}]"
            )
            print(
                f"server RSS: {idle_rss:.1f} MiB after the GET load, {held_rss:.1f} MiB holding "
                f"{subscribers} streams ({(held_rss - idle_rss) * 1024 / subscribers:.1f} KiB each)"
            )
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(35)
    bare = bare_rss()
    firestore = rss(
        "firestore",
        {
            "source": "firestore",
            "endpoint": "demo-rss",
            "key": "config/app",
            "auth": "emulator",
            "api_url": "127.0.0.1:1",
        },
        "source._document()",
    )
    client = rss(
        "config-server",
        {
            "source": "config-server",
            "endpoint": "http://127.0.0.1:1",
            "key": "billing/prod",
            "auth": "token",
            "token": TOKEN,
        },
        "source._http()",
    )
    record("configserver", {
        "get.req_per_s": round(rps),
        "get.p50_ms": round(p50, 2),
        "get.p99_ms": round(p99, 2),
        "rss_after_get_mib": round(idle_rss, 1),
        f"fanout_{subscribers}.notified": len(delays),
        f"fanout_{subscribers}.first_ms": round(min(delays)),
        f"fanout_{subscribers}.last_ms": round(worst),
        f"fanout_{subscribers}.kib_per_stream": round((held_rss - idle_rss) * 1024 / subscribers, 1),
        "rss_firestore_client_mib": round(firestore, 1),
        "rss_configserver_client_mib": round(client, 1),
    })  # fmt: skip
    print(f"RSS bare interpreter: {bare:.1f} MiB")
    print(
        f"RSS firestore after import+build (client constructed): {firestore:.1f} MiB  "
        f"[target <= 90 MiB: {'ok' if firestore <= 90 else 'MISSED'}]"
    )
    print(
        f"RSS config-server client after import+build (session built): {client:.1f} MiB  "
        f"[target <= 40 MiB: {'ok' if client <= 40 else 'MISSED'}]"
    )


if __name__ == "__main__":
    main()
