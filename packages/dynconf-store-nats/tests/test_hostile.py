"""NATS speaks its own protocol over its own connection: proxy variables never apply.

nats-py has no proxy support; this pins that a pod's ``HTTP_PROXY``/``ALL_PROXY`` does not
start routing the CONNECT (with its credentials) through a proxy after a client upgrade.
"""

from __future__ import annotations

from typing import Any

import pytest
from natskit import admin, bucket, run, source

pytestmark = pytest.mark.nats

KEY = "app/config.json"


def test_environment_proxy_is_not_used(nats_server: Any, env_proxy: Any) -> None:
    async def scenario() -> Any:
        client = await admin(nats_server.url)
        kv = await bucket(client, "hostile")
        await kv.put(KEY, b'{"v": 1}')
        env_proxy.engage()
        src = source(nats_server.url, f"hostile/{KEY}")
        try:
            return await src.fetch()
        finally:
            await src.aclose()
            await client.close()

    assert run(scenario).text == '{"v": 1}'
    assert env_proxy.seen == []
