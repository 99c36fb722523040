"""``Redis(url, key, ...)``: the typed constructor against a real Redis."""

from __future__ import annotations

import uuid
from typing import Any

from dynconf.config import DynamicConfig
from dynconf_store_redis import Redis


def test_redis_constructor_loads_and_reloads_a_change(redis_server: Any) -> None:
    key = f"ctor:{uuid.uuid4().hex[:8]}:config.json"
    redis_server.client.set(key, '{"db": {"port": 1}}')
    source = Redis(redis_server.url, key)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    redis_server.client.set(key, '{"db": {"port": 2}}')
    config.refresh_remote()
    assert config.reload()["port"] == 2
    source.close()
