"""The client's bearer goes to the config server it names and nowhere else.

A loopback fake answers 307 to another loopback host; a loopback proxy stands in for
``HTTP_PROXY`` and its siblings; the real server (started by the test) answers the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dynconf.errors import RemoteError
from dynconf_store_configserver.server.auth import _review
from dynconf_store_configserver.server.settings import KubernetesSettings
from tests.fixtures.hostile import redirecting

from .conftest import TOKEN, client_source

pytestmark = pytest.mark.configserver

CALLER_TOKEN = "planted-pod-service-account-token-77c1"
SERVER_SA_TOKEN = "planted-server-service-account-token-3b9e"


def test_bearer_is_not_sent_to_a_redirect_target() -> None:
    with redirecting() as (server, elsewhere):
        source = client_source(server.url)
        with pytest.raises(RemoteError) as refused:
            source.fetch()
    assert server.saw(TOKEN)
    assert elsewhere.seen == []
    assert "307 redirecting to http://127.0.0.2:" in refused.value.message
    assert "follow_redirects" in refused.value.message


def test_same_origin_redirect_is_followed_when_opted_in() -> None:
    with redirecting(same_origin=True) as (server, moved):
        source = client_source(server.url, extra={"follow_redirects": "true"})
        with pytest.raises(RemoteError, match="answered 502"):
            source.fetch()
    assert len(moved.seen) == 1


def test_environment_proxy_is_not_used(billing: Any, env_proxy: Any) -> None:
    env_proxy.engage()
    source = client_source(billing.url)
    assert source.fetch().format == "json"
    assert env_proxy.seen == []


def _kube(api_server: str, tmp_path: Path) -> KubernetesSettings:
    own = tmp_path / "server-token"
    own.write_text(SERVER_SA_TOKEN)
    return KubernetesSettings(api_server=api_server, ca=own, token_path=own, audience=None,
                              grants={"shop:shop": frozenset({"shop"})})  # fmt: skip


def test_token_review_is_not_posted_to_a_redirect_target(tmp_path: Path) -> None:
    with redirecting() as (api_server, elsewhere):
        verdict = _review(_kube(api_server.url, tmp_path), CALLER_TOKEN)
    assert verdict == (None, False)  # a failure, not a verdict: nothing is cached
    assert api_server.saw(CALLER_TOKEN)
    assert elsewhere.seen == []


def test_token_review_does_not_use_the_environment_proxy(tmp_path: Path, env_proxy: Any) -> None:
    with redirecting() as (api_server, _elsewhere):
        env_proxy.engage()
        _review(_kube(api_server.url, tmp_path), CALLER_TOKEN)
    assert api_server.seen
    assert env_proxy.seen == []
