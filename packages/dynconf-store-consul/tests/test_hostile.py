"""A store answer or a pod's environment must not send the ACL token anywhere but the agent.

Loopback fakes stand in for what a real agent will not do on demand: answer 307 to another
host, or answer a blocking query at once with an index that did not move.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import WATCH_FLOOR, Fetched
from tests.fixtures.hostile import Listener, redirecting

pytestmark = pytest.mark.consul

KEY = "hostile/app/config.json"
TOKEN = "planted-consul-token-4f1c9e"


def test_token_is_not_sent_to_a_redirect_target(make_source):
    with redirecting() as (agent, elsewhere):
        source = make_source(agent.url, KEY, auth="token", token=TOKEN)
        with pytest.raises(RemoteError) as refused:
            source.fetch()
    assert agent.saw(TOKEN)  # the agent the spec names gets it, and only that one
    assert elsewhere.seen == []
    assert "307 redirecting to http://127.0.0.2:" in refused.value.message
    assert "follow_redirects" in refused.value.message
    assert TOKEN not in refused.value.message


def test_same_origin_redirect_is_followed_only_when_opted_in(make_source):
    with redirecting(same_origin=True) as (agent, moved):
        source = make_source(agent.url, KEY, auth="token", token=TOKEN)
        with pytest.raises(RemoteError, match="follow_redirects=true"):
            source.fetch()
        assert moved.seen == []
        opted = make_source(
            agent.url, KEY, auth="token", token=TOKEN, extra={"follow_redirects": "true"}
        )
        with pytest.raises(RemoteError):
            opted.fetch()  # followed; the moved path answers 502
    assert len(moved.seen) == 1


def test_opted_in_redirect_to_another_host_is_still_refused(make_source):
    with redirecting() as (agent, elsewhere):
        source = make_source(
            agent.url, KEY, auth="token", token=TOKEN, extra={"follow_redirects": "true"}
        )
        with pytest.raises(RemoteError, match="another origin"):
            source.fetch()
    assert elsewhere.seen == []


def test_environment_proxy_is_not_used(plain_consul, env_proxy, make_source):
    plain_consul.put(KEY, '{"v": 1}')
    env_proxy.engage()
    source = make_source(plain_consul.url, KEY, auth="token", token=TOKEN)
    assert source.fetch().text == '{"v": 1}'
    assert env_proxy.seen == []


def test_environment_proxy_is_used_when_opted_in(plain_consul, env_proxy, make_source):
    env_proxy.engage()
    source = make_source(
        plain_consul.url, KEY, auth="token", token=TOKEN, extra={"use_proxy": "true"}
    )
    with pytest.raises(RemoteError):
        source.fetch()  # the recording env_proxy answers 502
    assert len(env_proxy.seen) == 1


def test_unmoved_index_answered_at_once_keeps_queries_a_floor_apart(make_source):
    value = base64.b64encode(b'{"v": 1}').decode()
    body = json.dumps([{"Key": KEY, "Value": value, "ModifyIndex": 7}]).encode()
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Consul-Index: 7\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    agent = Listener("127.0.0.1", lambda _request: reply)
    source = make_source(agent.url, KEY, extra={"wait": "60s"})
    stop = threading.Event()
    delivered: list[Fetched] = []
    watch = threading.Thread(
        target=lambda: delivered.extend(source.changes(1.0, stop.is_set)), daemon=True
    )
    try:
        watch.start()
        time.sleep(3.0)
    finally:
        stop.set()
        watch.join(5)
        agent.close()
    assert delivered == []
    assert 2 <= len(agent.seen) <= 3.0 / WATCH_FLOOR + 1
