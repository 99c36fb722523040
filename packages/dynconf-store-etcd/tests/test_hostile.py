"""A gateway answer or a pod's environment must not carry the etcd password anywhere else.

A loopback fake answers 307 to another loopback host (requests would re-POST the login body
there); a loopback proxy stands in for ``HTTP_PROXY`` and its siblings.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.errors import RemoteError
from tests.fixtures.hostile import redirecting

pytestmark = pytest.mark.etcd

PASSWORD = "planted-etcd-password-a93e17"


def test_login_password_is_not_posted_to_a_redirect_target(kit: SimpleNamespace) -> None:
    with redirecting() as (gateway, elsewhere):
        source = kit.build(gateway.url, "app/config.json", auth_username="app",
                           password=PASSWORD)  # fmt: skip
        with pytest.raises(RemoteError) as refused:
            source.fetch()
    assert gateway.saw(PASSWORD)
    assert elsewhere.seen == []
    assert "307 redirecting to http://127.0.0.2:" in refused.value.message
    assert "follow_redirects" in refused.value.message


def test_environment_proxy_is_not_used(
    etcd_server: Any, env_proxy: Any, kit: SimpleNamespace
) -> None:
    kit.put(etcd_server.url, "hostile/config.json", '{"v": 1}')
    env_proxy.engage()
    source = kit.build(etcd_server.url, "hostile/config.json")
    assert source.fetch().text == '{"v": 1}'
    assert env_proxy.seen == []


def test_environment_proxy_is_not_used_for_the_login(env_proxy: Any, kit: SimpleNamespace) -> None:
    with redirecting() as (gateway, _elsewhere):
        env_proxy.engage()
        source = kit.build(gateway.url, "app/config.json", auth_username="app",
                           password=PASSWORD)  # fmt: skip
        with pytest.raises(RemoteError):
            source.fetch()
    assert not env_proxy.saw(PASSWORD)
    assert env_proxy.seen == []
