"""``Etcd(endpoint, key, ...)``: the typed constructor against a real etcd."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from dynconf.config import DynamicConfig
from dynconf_store_etcd import Etcd
from tests.fixtures.eventually import eventually


def test_etcd_constructor_loads_and_the_watch_sees_a_change(etcd_server: Any) -> None:
    key = f"ctor/{uuid.uuid4().hex[:8]}/config.json"
    etcd_server.client.put(key, '{"db": {"port": 1}}')
    source = Etcd(etcd_server.url, key)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    watch = config.watch_remote(interval=0.5)
    try:
        etcd_server.client.put(key, '{"db": {"port": 2}}')
        assert eventually(lambda: config.current()["port"] == 2, timeout=15), config.current()[
            "port"
        ]
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_etcd_password_callable_is_read_at_each_login(etcd_auth_server: Any) -> None:
    key = f"ctor/{uuid.uuid4().hex[:8]}/config.json"
    etcd_auth_server.client.put(key, '{"db": {"port": 5}}')
    asked: list[int] = []

    def password() -> str:
        asked.append(1)
        return str(etcd_auth_server.password)

    source = Etcd(etcd_auth_server.url, key, username=etcd_auth_server.user, password=password)
    assert DynamicConfig(None, "db").remote(source).init()["port"] == 5
    assert asked == [1]
    source.source._invalidate_token()  # type: ignore[attr-defined]  # what a stale token does
    source.fetch()
    assert asked == [1, 1]  # the login after it asked again
    source.close()


TRIALS = 400


def _txn_put(etcd: Any, values: dict[str, str]) -> None:
    client = etcd.client
    client.transaction(
        {
            "compare": [],
            "success": [
                {"request_put": {"key": _b64(key), "value": _b64(value)}}
                for key, value in values.items()
            ],
            "failure": [],
        }
    )


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def test_several_etcd_keys_merge_as_layers_later_winning(etcd_server: Any) -> None:
    base = f"ctor/{uuid.uuid4().hex[:8]}/"
    etcd_server.client.put(f"{base}base.yaml", "db:\n  port: 1\n  host: a\n")
    etcd_server.client.put(f"{base}local.json", '{"db": {"port": 2}}')
    source = Etcd(etcd_server.url, [f"{base}base.yaml", f"{base}local.json", f"{base}gone.json"])
    assert dict(DynamicConfig(None, "db").remote(source).init()) == {"port": 2, "host": "a"}
    source.close()


def test_the_watch_over_several_etcd_keys_sees_a_change_to_any(etcd_server: Any) -> None:
    base = f"ctor/{uuid.uuid4().hex[:8]}/"
    etcd_server.client.put(f"{base}a.json", '{"db": {"a": 1}}')
    etcd_server.client.put(f"{base}b.json", '{"db": {"b": 1}}')
    source = Etcd(etcd_server.url, [f"{base}a.json", f"{base}b.json"])
    config = DynamicConfig(None, "db").remote(source)
    assert dict(config.init()) == {"a": 1, "b": 1}
    watch = config.watch_remote(interval=0.5)
    try:
        etcd_server.client.put(f"{base}b.json", '{"db": {"b": 2}}')
        assert eventually(lambda: dict(config.current()) == {"a": 1, "b": 2}, timeout=15), dict(
            config.current()
        )
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_several_etcd_keys_are_read_at_one_revision(etcd_server: Any) -> None:
    """A writer changes both keys in one transaction; no read ever sees a mix."""
    base = f"ctor/{uuid.uuid4().hex[:8]}/"
    left, right = f"{base}left.json", f"{base}right.json"
    _txn_put(etcd_server, {left: '{"left": 0}', right: '{"right": 0}'})
    source = Etcd(etcd_server.url, [left, right])
    single = [Etcd(etcd_server.url, left), Etcd(etcd_server.url, right)]
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set() and n < 5000:
            n += 1
            _txn_put(etcd_server, {left: f'{{"left": {n}}}', right: f'{{"right": {n}}}'})

    thread = threading.Thread(target=writer)
    thread.start()
    mixed = torn = 0
    try:
        for _ in range(TRIALS):
            document = json.loads(source.fetch().text)  # type: ignore[union-attr]
            mixed += document["left"] != document["right"]
            one, two = (json.loads(s.fetch().text) for s in single)  # type: ignore[union-attr]
            torn += one["left"] != two["right"]
    finally:
        stop.set()
        thread.join(30)
        for each in (source, *single):
            each.close()
    print(f"etcd atomic read: {TRIALS} trials, {mixed} mixed; key-by-key reads: {torn} torn")
    assert mixed == 0
    assert torn > 0  # the control: reading key by key does tear under this writer
