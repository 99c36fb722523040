"""One shared document, one store connection — counted at the server, not in the node agent.

NATS carries a client's reads and its KV watcher over one connection, so the node agent's first
fetch, the document's watch and every resync beside it ride one TCP connection however many
volumes read the document. The server's ``/connz`` lists every client connection with its
address; the ones whose address is one of the node agent's own sockets are the node agent's.
The watch is counted at the server too: a KV watcher is one (ordered, ephemeral) consumer on
the bucket's stream, so the stream's consumer count is the number of watches open.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Node, read, wait_for

Address = tuple[str, int]


# ---------------------------------------------------------------------------- helpers
def _address(text: str) -> Address:
    """``0100007F:1F90`` from ``/proc/net/tcp`` (little-endian words) as an (ip, port)."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(packed)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def client_addresses(pid: int) -> set[Address]:
    """The local address of every established TCP connection of ``pid``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "01" and parts[9] in inodes:
                found.add(_address(parts[1]))
    return found


def monitor(nats_server: Any, path: str) -> Any:
    with urllib.request.urlopen(f"{nats_server.monitor_url}{path}", timeout=5) as response:
        return json.load(response)


def connections_at_server(nats_server: Any, pid: int) -> int:
    """Connections the NATS server holds whose client address is one of ``pid``'s sockets."""
    listed = monitor(nats_server, "/connz?limit=100000").get("connections") or []
    ours = client_addresses(pid)
    return sum((c["ip"], int(c["port"])) in ours for c in listed)


def watches_at_server(nats_server: Any, bucket: str) -> int:
    """Consumers on the bucket's stream: one per KV watcher."""
    body = monitor(nats_server, "/jsz?accounts=true&streams=true")
    for account in body.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream["name"] == f"KV_{bucket}":
                return int(stream["state"].get("consumer_count", 0))
    return 0


def kv(
    nats_server: Any, bucket: str, value: dict[str, Any] | None, *, create: bool = False
) -> None:
    """Put ``value`` at ``config.json`` (``None``: delete the bucket), on a connection of its own."""

    async def run() -> None:
        client = await nats_server.connect()
        try:
            js = client.jetstream()
            if value is None:
                await js.delete_key_value(bucket)
                return
            store = await (js.create_key_value(bucket=bucket) if create else js.key_value(bucket))
            await store.put("config.json", json.dumps(value).encode())
        finally:
            await client.close()

    asyncio.run(run())


@pytest.fixture
def nats_bucket(nats_server: Any) -> Iterator[str]:
    bucket = f"dcna-{uuid.uuid4().hex[:8]}"
    kv(nats_server, bucket, {"db": {"host": "db.internal", "port": 9000}}, create=True)
    yield bucket
    kv(nats_server, bucket, None)


# ---------------------------------------------------------------------------- the test
def test_two_volumes_of_one_nats_key_hold_one_connection_at_the_server(
    node: Node, nats_server: Any, nats_bucket: str
) -> None:
    agent = node.start()
    client = agent.client
    assert client is not None
    # a resync every second, so several run beside the watch while the connections are counted
    volume = {
        "source": "nats",
        "endpoint": nats_server.url,
        "key": f"{nats_bucket}/config.json",
        "watch-seconds": "1",
    }
    first, second = node.target(), node.target()
    client.publish(first, {**volume, "path": "rendered.toml"})
    client.publish(second, {**volume, "path": "app.yaml", "section": "db"})
    assert "9000" in (read(first / "rendered.toml") or "")
    assert "port: 9000" in (read(second / "app.yaml") or "")
    wait_for(lambda: watches_at_server(nats_server, nats_bucket) == 1, what="one watch open")
    assert len(agent.events("document_watched")) == 1

    counts = set()
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        counts.add(connections_at_server(nats_server, agent.proc.pid))
        time.sleep(0.05)
    assert counts == {1}, f"connections the server held for the node agent: {sorted(counts)}"

    kv(nats_server, nats_bucket, {"db": {"host": "db.internal", "port": 9100}})
    wait_for(lambda: "9100" in (read(first / "rendered.toml") or ""), what="first file")
    wait_for(lambda: "port: 9100" in (read(second / "app.yaml") or ""), what="second file")
    assert connections_at_server(nats_server, agent.proc.pid) == 1
    assert watches_at_server(nats_server, nats_bucket) == 1
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 1.0,
        "dynamic_config_node_agent_readers": 2.0,
    }
