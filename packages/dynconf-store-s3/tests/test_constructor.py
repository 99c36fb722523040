"""``S3(bucket, key, ...)``: the typed constructor against a real S3 server (moto)."""

from __future__ import annotations

from typing import Any

import pytest

from dynconf import DynamicConfig
from dynconf_store_s3 import S3
from tests.fixtures.eventually import eventually

pytestmark = pytest.mark.s3


def test_s3_constructor_loads_and_the_watch_sees_a_change(aws_env: Any, bucket: str) -> None:
    aws_env.client.put_object(Bucket=bucket, Key="ctor.json", Body=b'{"app": {"v": 1}}')
    source = S3(bucket, "ctor.json", api_url=aws_env.endpoint_url)
    assert not source.built
    config = DynamicConfig(None, "app").remote(source)
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.1)
    try:
        aws_env.client.put_object(Bucket=bucket, Key="ctor.json", Body=b'{"app": {"v": 2}}')
        assert eventually(lambda: config.current()["v"] == 2, timeout=10), config.current()["v"]
    finally:
        watch.stop()
        watch.join(5)
        source.close()
