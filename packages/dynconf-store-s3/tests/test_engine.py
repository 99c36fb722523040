"""The engine drives the blocking source in its worker threads."""

from __future__ import annotations

import pytest
from s3kit import s3_source

from dynconf import DynamicConfig
from tests.fixtures.eventually import eventually

pytestmark = pytest.mark.s3


def test_watch_remote_reloads_when_the_object_changes(aws_env, bucket):
    aws_env.client.put_object(Bucket=bucket, Key="app.json", Body=b'{"app": {"v": 1}}')
    src = s3_source(bucket, "app.json", api_url=aws_env.endpoint_url)
    config = DynamicConfig(None, "app").remote(src)
    config.refresh_remote()
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.1)
    try:
        aws_env.client.put_object(Bucket=bucket, Key="app.json", Body=b'{"app": {"v": 2}}')
        # the watch can install the put before a changed() call would begin to wait
        assert eventually(lambda: config.current()["v"] == 2, timeout=10)
    finally:
        watch.stop()
        watch.join(5)
        src.close()
