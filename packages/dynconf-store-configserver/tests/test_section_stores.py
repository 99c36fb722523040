"""A section follows its stores with the shared follower (:mod:`dynconf.follow`).

Against the real stores: a change made in the store reaches the served section with a new
generation, and so does a change made at once after the server started — the window between
the section's first read and the moment its watch primes, where a poll watch (s3) records
the changed object as its baseline and would deliver nothing unless someone reads again.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import base_settings, get


def _served(server: Any, want: str, timeout: float = 15.0) -> dict[str, Any]:
    """The envelope once ``config.db.host`` is ``want``; fails naming what was served."""
    deadline = time.monotonic() + timeout
    while True:
        envelope: dict[str, Any] = json.loads(get(f"{server.url}/billing/prod")[2])
        if envelope["config"].get("db", {}).get("host") == want:
            return envelope
        assert time.monotonic() < deadline, f"still serving {envelope['config'].get('db')}"
        time.sleep(0.05)


def _with_store(config_dir: Any, store: dict[str, Any]) -> dict[str, Any]:
    raw = base_settings(config_dir)
    raw["server"]["sections"][0]["stores"] = [store]
    raw["server"]["store_interval"] = 1.0
    return raw


@pytest.mark.consul
def test_a_consul_change_is_served_with_a_new_generation(serve, config_dir, consul_server):
    key = f"cs-{uuid.uuid4().hex[:8]}/billing.json"
    consul_server.client.kv.put(key, json.dumps({"db": {"host": "first"}}))
    server = serve(_with_store(config_dir, {"source": "consul", "endpoint": consul_server.url,
                                            "key": key}), base=config_dir.root)  # fmt: skip
    first = _served(server, "first")

    consul_server.client.kv.put(key, json.dumps({"db": {"host": "second"}}))

    assert _served(server, "second")["generation"] > first["generation"]


@pytest.mark.s3
@pytest.mark.parametrize("attempt", range(3))
def test_an_s3_change_made_right_after_start_is_not_lost(
    serve, config_dir, s3_server, monkeypatch, tmp_path: Path, attempt: int
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = f"dynconf-cs-{uuid.uuid4().hex[:10]}"
    s3_server.client.create_bucket(Bucket=bucket)
    put = lambda host: s3_server.client.put_object(  # noqa: E731 - one line per write below
        Bucket=bucket, Key="billing.json", Body=json.dumps({"db": {"host": host}}).encode()
    )
    put("first")
    store = {"source": "s3", "endpoint": bucket, "key": "billing.json",
             "api_url": s3_server.endpoint_url}  # fmt: skip
    server = serve(_with_store(config_dir, store), base=config_dir.root)

    put("second")  # before (or while) the watch primes on its first observation

    _served(server, "second")
