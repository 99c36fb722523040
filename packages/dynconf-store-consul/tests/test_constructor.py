"""``Consul(endpoint, key, ...)``: the typed constructor against real Consul agents."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import pytest

from dynconf.config import DynamicConfig
from dynconf.errors import BackendError
from dynconf_store_consul import Consul


def test_consul_constructor_loads_and_the_watch_sees_a_change(plain_consul: Any) -> None:
    key = f"ctor/{uuid.uuid4().hex[:8]}/config.json"
    plain_consul.put(key, '{"db": {"port": 1}}')
    source = Consul(plain_consul.url, key)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    watch = config.watch_remote(interval=0.5)
    try:
        plain_consul.put(key, '{"db": {"port": 2}}')
        assert config.changed(timeout=15) is not None
        assert config.current()["port"] == 2
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
