"""NATS and S3 store cost: NATS push latency, S3 check cost, and RSS after build of each.

NATS latency: one watched key on a loopback nats-server with JetStream; 50 changes, each
timed from just before ``kv.put`` until ``changes()`` yields it (p50/p95; target p95 ≤ 100
ms). Beside it the raw nats-py watcher's put→update time in the same run, so the store's
overhead (the hop from its home loop to the caller's loop) shows as a ratio.

S3 check cost: the conditional HEAD (``If-None-Match``) one watch tick sends while the
object is unchanged, timed over 200 checks on loopback moto, next to a full GET of the same
object; and the requests counted per tick (HEAD only; GET must stay 0).

RSS: a fresh interpreter imports dynconf-core and the plugin, builds a source and makes the
client (nats: connects and reads once; s3: builds the botocore client) and reports VmRSS
(targets ≤ 40 MiB nats, ≤ 90 MiB s3), next to a bare interpreter's RSS.

Run: ``uv run python bench/stores_nats_s3.py`` (uses the published testenv servers, or
starts them with ``scripts/testenv start nats s3`` and stops them afterwards).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHANGES = 50
CHECKS = 200


def _published(name: str) -> dict[str, str]:
    env = REPO / ".testenv" / "published" / f"{name}.env"
    values: dict[str, str] = {}
    if env.is_file():
        for line in env.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key] = value
    return values


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


async def _nats_latency(url: str) -> tuple[list[float], list[float]]:
    import nats
    from nats.js.api import KeyValueConfig

    from dynconf.stores import StoreSpec
    from dynconf_store_nats import NATS_STORE

    client = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=1)
    bucket = f"bench{uuid.uuid4().hex[:8]}"
    kv = await client.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
    await kv.put("app/config.json", b'{"n": 0}')
    source = NATS_STORE.build(
        StoreSpec(source="nats", endpoint=url, key=f"{bucket}/app/config.json")
    )
    stamps: dict[int, float] = {}
    store: list[float] = []
    got: asyncio.Queue[float] = asyncio.Queue()

    async def follow() -> None:
        async for answer in source.changes(15.0):
            n = int(answer.text.split(":")[1].strip(" }"))
            await got.put(time.perf_counter() - stamps[n])

    task = asyncio.create_task(follow())
    while not source.connected:
        await asyncio.sleep(0.01)
    for n in range(1, CHANGES + 1):
        stamps[n] = time.perf_counter()
        await kv.put("app/config.json", f'{{"n": {n}}}'.encode())
        store.append(await asyncio.wait_for(got.get(), 5))
        await asyncio.sleep(0.01)
    task.cancel()
    await source.aclose()
    raw: list[float] = []
    watcher = await kv.watch("app/config.json")
    await watcher.updates(2)  # the current value
    await watcher.updates(2)  # nats-py's end-of-opening marker
    for n in range(CHANGES):
        started = time.perf_counter()
        await kv.put("app/config.json", f'{{"raw": {n}}}'.encode())
        await watcher.updates(5)
        raw.append(time.perf_counter() - started)
    await watcher.stop()
    await client.jetstream().delete_key_value(bucket)
    await client.close()
    return store, raw


def _s3_check_cost(endpoint: str) -> tuple[list[float], list[float], dict[str, int]]:
    import boto3

    from dynconf.stores import StoreSpec
    from dynconf_store_s3 import S3_STORE

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    admin = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    admin.create_bucket(Bucket=bucket)
    admin.put_object(Bucket=bucket, Key="prod/db.json", Body=b'{"pad": "' + b"x" * 4000 + b'"}')
    source = S3_STORE.build(
        StoreSpec.from_inputs(source="s3", endpoint=bucket, key="prod/db.json", api_url=endpoint)
    )
    etag = source.fetch().revision
    counts: dict[str, int] = {}
    source.client.meta.events.register(
        "before-send.s3",
        lambda request, **_: counts.__setitem__(request.method, counts.get(request.method, 0) + 1),
    )
    heads: list[float] = []
    for _ in range(CHECKS):
        started = time.perf_counter()
        assert source._head(etag) is None  # one watch tick on an unchanged object
        heads.append(time.perf_counter() - started)
    ticks = dict(counts)
    gets: list[float] = []
    for _ in range(CHECKS // 4):
        started = time.perf_counter()
        source.fetch()
        gets.append(time.perf_counter() - started)
    source.close()
    return heads, gets, ticks


_RSS_SNIPPET = {
    "bare": "pass",
    "nats": (
        "import asyncio\nfrom dynconf.stores import StoreSpec\nfrom dynconf_store_nats import NATS_STORE\n"
        "s = NATS_STORE.build(StoreSpec(source='nats', endpoint={url!r}, key='rssbench/app/config.json'))\n"
        "asyncio.run(s.fetch())\n"
    ),
    "s3": (
        "from dynconf.stores import StoreSpec\nfrom dynconf_store_s3 import S3_STORE\n"
        "s = S3_STORE.build(StoreSpec.from_inputs(source='s3', endpoint='rss-bench', key='prod/db.json', api_url={url!r}))\n"
        "s.client\n"
    ),
}


def _rss(kind: str, url: str) -> float:
    code = _RSS_SNIPPET[kind].format(url=url) + (
        "\nfor line in open('/proc/self/status'):\n"
        "    if line.startswith('VmRSS:'): print(int(line.split()[1]) / 1024)\n"
    )
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip().splitlines()[-1])


async def _seed_rss_bucket(url: str) -> None:
    import nats
    from nats.js.api import KeyValueConfig

    client = await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=1)
    kv = await client.jetstream().create_key_value(KeyValueConfig(bucket="rssbench"))
    await kv.put("app/config.json", b"{}")
    await client.close()


def main() -> None:
    started_here = []
    nats_env, s3_env = _published("nats"), _published("s3")
    if not nats_env or not s3_env:
        subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "start", "nats", "s3"],
                       check=True, capture_output=True)  # fmt: skip
        started_here = ["nats", "s3"]
        nats_env, s3_env = _published("nats"), _published("s3")
    nats_url, s3_url = nats_env["DYNCONF_TEST_NATS_URL"], s3_env["DYNCONF_TEST_S3_ENDPOINT_URL"]
    try:
        store, raw = asyncio.run(_nats_latency(nats_url))
        p50, p95 = _percentiles(store)
        r50, r95 = _percentiles(raw)
        print(
            f"nats push latency ({CHANGES} changes): p50 {p50 * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms "
            f"(target p95 <= 100 ms: {'ok' if p95 <= 0.1 else 'MISSED'})"
        )
        print(
            f"nats raw watcher put->update: p50 {r50 * 1000:.2f} ms, p95 {r95 * 1000:.2f} ms; "
            f"store/raw p50 ratio {p50 / r50:.2f}"
        )
        heads, gets, ticks = _s3_check_cost(s3_url)
        h50, h95 = _percentiles(heads)
        g50, _ = _percentiles(gets)
        print(
            f"s3 conditional HEAD per check ({CHECKS} checks, unchanged): p50 {h50 * 1000:.2f} ms, "
            f"p95 {h95 * 1000:.2f} ms; full GET p50 {g50 * 1000:.2f} ms; HEAD/GET ratio {h50 / g50:.2f}"
        )
        print(
            f"s3 requests per unchanged check: {ticks.get('HEAD', 0) / CHECKS:.2f} HEAD, "
            f"{ticks.get('GET', 0) / CHECKS:.2f} GET"
        )
        asyncio.run(_seed_rss_bucket(nats_url))
        bare = _rss("bare", "")
        for kind, url, target in (("nats", nats_url, 40), ("s3", s3_url, 90)):
            rss = _rss(kind, url)
            print(
                f"{kind} RSS after import+build: {rss:.1f} MiB (bare interpreter {bare:.1f} MiB; "
                f"target <= {target} MiB: {'ok' if rss <= target else 'MISSED'})"
            )
    finally:
        for name in started_here:
            subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "stop", name],
                           check=False, capture_output=True)  # fmt: skip


if __name__ == "__main__":
    main()
