"""``Consul(endpoint, key, ...)``: the typed constructor against real Consul agents."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest

from dynconf.config import DynamicConfig
from dynconf.errors import BackendError
from dynconf_store_consul import Consul
from tests.fixtures.eventually import eventually

TRIALS = 400


def test_consul_constructor_loads_and_the_watch_sees_a_change(plain_consul: Any) -> None:
    key = f"ctor/{uuid.uuid4().hex[:8]}/config.json"
    plain_consul.put(key, '{"db": {"port": 1}}')
    source = Consul(plain_consul.url, key)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    watch = config.watch_remote(interval=0.5)
    try:
        plain_consul.put(key, '{"db": {"port": 2}}')
        assert eventually(lambda: config.current()["port"] == 2, timeout=15), config.current()[
            "port"
        ]
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_consul_token_callable_is_asked_again_after_a_refusal(acl_consul: Any) -> None:
    prefix = f"ctor-{uuid.uuid4().hex[:8]}/"
    key = f"{prefix}config.json"
    acl_consul.put(key, '{"db": {"port": 3}}')
    acl_consul.reader_policy(f"r-{prefix[:-1]}", prefix)
    first = acl_consul.token_for(f"r-{prefix[:-1]}")
    second = acl_consul.token_for(f"r-{prefix[:-1]}")
    current = [first]
    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return str(current[0]["SecretID"])

    source = Consul(acl_consul.url, key, auth="token", token=token)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 3
    acl_consul.admin("DELETE", f"/v1/acl/token/{first['AccessorID']}")
    current[0] = second
    before = len(asked)
    config.refresh_remote()
    assert config.reload()["port"] == 3
    assert len(asked) > before  # the old token is deleted: only a fresh read can pass
    source.close()


def test_consul_constructor_refuses_with_the_python_keyword() -> None:
    with pytest.raises(BackendError, match=r"auth_mount= names a consul auth method") as caught:
        Consul("http://127.0.0.1:8500", "app/config.json", auth_mount="k8s")
    assert "--" not in str(caught.value)


def test_building_a_constructor_imports_no_client_until_the_first_read() -> None:
    probe = (
        "import sys\n"
        "from dynconf.remote import Consul, Etcd, Firestore, Nats, Redis, S3\n"
        "Etcd('http://127.0.0.1:1', 'a.json'); Redis('redis://127.0.0.1:1', 'a.json')\n"
        "S3('bucket', 'a.json'); Nats('nats://127.0.0.1:1', 'b/a.json')\n"
        "Firestore('p', 'c/d', auth='emulator', api_url='127.0.0.1:1')\n"
        "heavy = {'etcd3gw', 'redis', 'botocore', 'nats', 'google.cloud.firestore'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def _txn_set(consul: Any, values: dict[str, str]) -> None:
    import base64
    import json

    ops = [
        {"KV": {"Verb": "set", "Key": key, "Value": base64.b64encode(value.encode()).decode()}}
        for key, value in values.items()
    ]
    status, body = consul.api("PUT", "/v1/txn", json.dumps(ops))
    assert status == 200, body[:200]


def test_several_consul_keys_merge_as_layers_later_winning(plain_consul: Any) -> None:
    base = f"ctor/{uuid.uuid4().hex[:8]}/"
    plain_consul.put(f"{base}base.toml", '[db]\nport = 1\nhost = "a"\n')
    plain_consul.put(f"{base}local.json", '{"db": {"port": 2}}')
    source = Consul(plain_consul.url, [f"{base}base.toml", f"{base}local.json", f"{base}gone.json"])
    config = DynamicConfig(None, "db").remote(source)
    assert dict(config.init()) == {"port": 2, "host": "a"}
    source.close()


def test_several_consul_keys_are_read_at_one_instant(plain_consul: Any) -> None:
    """A writer changes both keys in one transaction; no read ever sees a mix."""
    base = f"ctor/{uuid.uuid4().hex[:8]}/"
    left, right = f"{base}left.json", f"{base}right.json"
    _txn_set(plain_consul, {left: '{"left": 0}', right: '{"right": 0}'})
    source = Consul(plain_consul.url, [left, right])
    single = [Consul(plain_consul.url, left), Consul(plain_consul.url, right)]
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set() and n < 5000:
            n += 1
            _txn_set(plain_consul, {left: f'{{"left": {n}}}', right: f'{{"right": {n}}}'})

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
    print(f"consul atomic read: {TRIALS} trials, {mixed} mixed; key-by-key reads: {torn} torn")
    assert mixed == 0
    assert torn > 0  # the control: reading key by key does tear under this writer


def test_the_watch_over_several_consul_keys_sees_a_change_to_any(plain_consul: Any) -> None:
    base = f"ctor/{uuid.uuid4().hex[:8]}/"
    plain_consul.put(f"{base}a.json", '{"db": {"a": 1}}')
    plain_consul.put(f"{base}b.json", '{"db": {"b": 1}}')
    source = Consul(plain_consul.url, [f"{base}a.json", f"{base}b.json"])
    config = DynamicConfig(None, "db").remote(source)
    assert dict(config.init()) == {"a": 1, "b": 1}
    watch = config.watch_remote(interval=0.5)
    try:
        plain_consul.put(f"{base}b.json", '{"db": {"b": 2}}')
        assert eventually(lambda: dict(config.current()) == {"a": 1, "b": 2}, timeout=15), dict(
            config.current()
        )
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_several_keys_are_refused_by_a_store_that_cannot_read_them_at_once() -> None:
    from dynconf.remote import StoreSource
    from dynconf.stores import StoreSpec

    with pytest.raises(BackendError, match=r"^keys=\[\.\.\.\] is consul and etcd's; remove it"):
        StoreSource(StoreSpec("redis", "redis://127.0.0.1:1", "a.json", keys=("a.json", "b.json")))
