"""Redis speaks RESP over its own connection: the environment's proxy variables never apply.

redis-py has no proxy support; this pins that a pod's ``HTTP_PROXY``/``ALL_PROXY`` does not
start routing the AUTH command through a proxy after a client upgrade.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = pytest.mark.redis


def test_environment_proxy_is_not_used(redis_server: Any, kit: SimpleNamespace,
                                       env_proxy: Any) -> None:  # fmt: skip
    key = f"dynconf-test:{uuid.uuid4().hex}:config.json"
    redis_server.client.set(key, '{"v": 1}')
    env_proxy.engage()
    url = f"redis://{redis_server.host}:{redis_server.port}/0"
    assert kit.build(url, key).fetch().text == '{"v": 1}'
    assert env_proxy.seen == []
