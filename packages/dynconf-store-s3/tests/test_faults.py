"""Faults: the object deleted and recreated; the server gone and back mid-watch."""

from __future__ import annotations

import pytest
from s3kit import s3_source, wait_for

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched
from tests.fixtures.relay import Relay

pytestmark = [pytest.mark.s3, pytest.mark.slow]

KEY = "prod/db.json"


def test_object_deleted_and_recreated_is_absent_then_the_new_document(aws_env, bucket, watcher):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": "old"}')
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    watch = watcher(source, interval=0.1)
    wait_for(lambda: source.connected)
    aws_env.client.delete_object(Bucket=bucket, Key=KEY)
    assert watch.next() is ABSENT
    put = aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": "new"}')
    delivered = watch.next()
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": "new"}'
    assert delivered.revision == put["ETag"].strip('"')


def test_server_gone_mid_watch_is_reported_and_the_next_change_delivered(aws_env, bucket, watcher):
    port = int(aws_env.endpoint_url.rsplit(":", 1)[1])
    proxy = Relay(port)
    try:
        aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 1}')
        source = s3_source(bucket, KEY, api_url=proxy.url, timeout=1)
        watch = watcher(source, interval=0.1)
        wait_for(lambda: source.connected)
        proxy.cut()
        wait_for(lambda: watch.failures, timeout=20)
        assert isinstance(watch.failures[0], RemoteError)
        assert not source.connected
        aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": "while cut off"}')
        assert watch.quiet(0.5)
        proxy.restore()
        delivered = watch.next(timeout=30)
        assert delivered.text == '{"v": "while cut off"}'
        assert watch.error is None
    finally:
        proxy.close()
