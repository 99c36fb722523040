"""The conditional watch: HEAD with If-None-Match each interval, one GET only on a change."""

from __future__ import annotations

import time

import pytest
from s3kit import Requests, s3_source, wait_for

from dynconf.errors import AuthError
from dynconf.stores import ABSENT, Fetched, WatchCapability

pytestmark = pytest.mark.s3

KEY = "prod/db.json"


def test_capability_is_conditional(aws_env, bucket):
    assert s3_source(bucket, KEY).capability is WatchCapability.CONDITIONAL


def test_unchanged_object_is_never_downloaded(aws_env, bucket, watcher):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 1}')
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    sent = Requests(source)
    watch = watcher(source, interval=0.1)
    wait_for(lambda: sent.count("HEAD") >= 8)
    assert watch.quiet(0.1)
    assert sent.count("GET") == 0
    conditional = [h for m, _u, h in sent.sent if m == "HEAD"][1:]
    assert all(h.get("If-None-Match", "").strip('"') for h in conditional)


def test_change_costs_one_get_and_carries_the_new_etag(aws_env, bucket, watcher):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 1}')
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    sent = Requests(source)
    watch = watcher(source, interval=0.1)
    wait_for(lambda: sent.count("HEAD") >= 2)
    put = aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 2}')
    delivered = watch.next()
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": 2}'
    assert delivered.revision == put["ETag"].strip('"')
    assert watch.quiet(0.5)
    assert sent.count("GET") == 1


def test_starting_value_is_not_announced(aws_env, bucket, watcher):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"{}")
    watch = watcher(s3_source(bucket, KEY, api_url=aws_env.endpoint_url), interval=0.1)
    assert watch.quiet(1.0)


def test_watch_of_a_missing_object_delivers_its_creation(aws_env, bucket, watcher):
    watch = watcher(s3_source(bucket, KEY, api_url=aws_env.endpoint_url), interval=0.1)
    watch.wait_watching()  # the object's absence is observed before it is created
    assert watch.quiet(0.3)
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"born": true}')
    assert watch.next().text == '{"born": true}'


def test_stop_ends_the_watch_within_a_slice(aws_env, bucket, watcher):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"{}")
    watch = watcher(s3_source(bucket, KEY, api_url=aws_env.endpoint_url), interval=30)
    time.sleep(0.5)
    started = time.monotonic()
    watch.stop()
    assert not watch.thread.is_alive()
    assert time.monotonic() - started < 1.0


def test_refused_credential_ends_the_watch_with_auth(own_moto, aws_env, watcher):
    # moto checks signatures against its IAM when INITIAL_NO_AUTH_ACTION_COUNT is set;
    # the key in the environment is not one it issued, so every request is refused.
    server = own_moto(env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    watch = watcher(s3_source("some-bucket", KEY, api_url=server.url), interval=0.1)
    watch.thread.join(15)
    assert isinstance(watch.error, AuthError)
    assert "InvalidAccessKeyId" in str(watch.error)


def test_refused_credential_on_fetch_is_auth(own_moto, aws_env):
    server = own_moto(env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    with pytest.raises(AuthError, match="refused the credential"):
        s3_source("some-bucket", KEY, api_url=server.url).fetch()


def test_deleted_object_is_absent_once(aws_env, bucket, watcher):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"{}")
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    watch = watcher(source, interval=0.1)
    wait_for(lambda: source.connected)
    aws_env.client.delete_object(Bucket=bucket, Key=KEY)
    assert watch.next() is ABSENT
    assert watch.quiet(0.6)
