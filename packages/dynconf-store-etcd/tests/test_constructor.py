"""``Etcd(endpoint, key, ...)``: the typed constructor against a real etcd."""

from __future__ import annotations

import uuid
from typing import Any

from dynconf.config import DynamicConfig
from dynconf_store_etcd import Etcd


def test_etcd_constructor_loads_and_the_watch_sees_a_change(etcd_server: Any) -> None:
    key = f"ctor/{uuid.uuid4().hex[:8]}/config.json"
    etcd_server.client.put(key, '{"db": {"port": 1}}')
    source = Etcd(etcd_server.url, key)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    watch = config.watch_remote(interval=0.5)
    try:
        etcd_server.client.put(key, '{"db": {"port": 2}}')
        assert config.changed(timeout=15) is not None
        assert config.current()["port"] == 2
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_etcd_password_callable_is_read_at_the_login(etcd_auth_server: Any) -> None:
    key = f"ctor/{uuid.uuid4().hex[:8]}/config.json"
    etcd_auth_server.client.put(key, '{"db": {"port": 5}}')
    asked: list[int] = []

    def password() -> str:
        asked.append(1)
        return str(etcd_auth_server.password)

    source = Etcd(etcd_auth_server.url, key, username=etcd_auth_server.user, password=password)
    assert DynamicConfig(None, "db").remote(source).init()["port"] == 5
    assert asked == [1]
    source.close()
