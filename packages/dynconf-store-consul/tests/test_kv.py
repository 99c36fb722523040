"""Reading one Consul KV key: the document, its format, its index, and a missing key."""

from __future__ import annotations

import uuid

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched

pytestmark = pytest.mark.consul


def _key(ext: str = "json") -> str:
    return f"app/{uuid.uuid4().hex}/config.{ext}"


def test_fetch_returns_text_format_and_index(plain_consul, make_source):
    key = _key()
    plain_consul.put(key, '{"port": 8080}')
    answer = make_source(plain_consul.url, key).fetch()
    assert isinstance(answer, Fetched)
    assert answer.text == '{"port": 8080}'
    assert answer.format == "json"
    assert answer.numeric_revision is not None and answer.numeric_revision > 0


def test_format_follows_the_key_extension(plain_consul, make_source):
    key = _key("yml")
    plain_consul.put(key, "port: 1\n")
    answer = make_source(plain_consul.url, key).fetch()
    assert isinstance(answer, Fetched)
    assert answer.format == "yaml"


def test_format_setting_names_the_format_of_a_key_without_extension(plain_consul, make_source):
    key = f"app/{uuid.uuid4().hex}/config"
    plain_consul.put(key, "port = 1\n")
    answer = make_source(plain_consul.url, key, extra={"format": "toml"}).fetch()
    assert isinstance(answer, Fetched)
    assert answer.format == "toml"


def test_missing_key_is_absent_not_an_error(plain_consul, make_source):
    assert make_source(plain_consul.url, _key()).fetch() is ABSENT


def test_leading_slash_of_the_key_is_ignored(plain_consul, make_source):
    key = _key()
    plain_consul.put(key, "{}")
    answer = make_source(plain_consul.url, "/" + key).fetch()
    assert isinstance(answer, Fetched)


def test_revision_moves_with_each_write(plain_consul, make_source):
    key = _key()
    source = make_source(plain_consul.url, key)
    plain_consul.put(key, '{"v": 1}')
    first = source.fetch()
    plain_consul.put(key, '{"v": 2}')
    second = source.fetch()
    assert second.numeric_revision > first.numeric_revision


def test_own_datacenter_reads_and_unknown_datacenter_is_remote(plain_consul, make_source):
    key = _key()
    plain_consul.put(key, "{}")
    assert isinstance(
        make_source(plain_consul.url, key, extra={"datacenter": "dc1"}).fetch(), Fetched
    )
    with pytest.raises(RemoteError) as caught:
        make_source(plain_consul.url, key, extra={"datacenter": "mars-1"}).fetch()
    assert "dc mars-1" in str(caught.value)


def test_empty_value_is_reported_as_holding_no_value(plain_consul, make_source):
    key = _key()
    plain_consul.put(key, "")
    # Consul stores an empty PUT body as a key whose Value is null.
    with pytest.raises(RemoteError, match="holds no value"):
        make_source(plain_consul.url, key).fetch()


def test_value_that_is_not_utf8_is_refused_without_quoting_it(plain_consul, make_source):
    key = _key()
    status, _ = plain_consul.api("PUT", f"/v1/kv/{key}", b"\xff\xfe secret-ish")
    assert status == 200
    with pytest.raises(RemoteError) as caught:
        make_source(plain_consul.url, key).fetch()
    assert "UTF-8" in str(caught.value)
    assert "secret-ish" not in str(caught.value)


def test_unreachable_agent_is_a_prompt_remote_error(make_source, free_port):
    source = make_source(f"http://127.0.0.1:{free_port}", _key(), timeout=2.0)
    with pytest.raises(RemoteError, match="cannot be reached"):
        source.fetch()


def test_describe_names_store_address_key_and_datacenter(make_source):
    source = make_source("http://127.0.0.1:8500", "app/config.json", extra={"datacenter": "dc2"})
    assert source.describe() == "consul http://127.0.0.1:8500 kv/app/config.json dc dc2"
