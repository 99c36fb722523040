"""A signed S3 request goes to the endpoint the spec names, never to a proxy or a redirect.

botocore signs every request with the credential and, left alone, reads ``HTTPS_PROXY`` /
``HTTP_PROXY`` from the environment; a loopback proxy stands in for those. A loopback fake
answers 307 to another loopback host (botocore never follows a ``Location``; the store must
say what happened instead of "retrying").
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from s3kit import s3_source

from dynconf.errors import RemoteError
from tests.fixtures.hostile import Listener, redirecting, request_path

pytestmark = pytest.mark.s3

KEY = "hostile/config.json"


def test_environment_proxy_is_not_used(aws_env: Any, bucket: str, env_proxy: Any) -> None:
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 1}')
    env_proxy.engage()
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    assert source.fetch().text == '{"v": 1}'
    assert env_proxy.seen == []


def test_environment_proxy_is_used_when_opted_in(aws_env: Any, bucket: str,
                                                 env_proxy: Any) -> None:  # fmt: skip
    env_proxy.engage()
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url, extra={"use_proxy": "true"})
    with pytest.raises(RemoteError):
        source.fetch()  # the recording proxy answers 502
    assert env_proxy.seen


def test_redirect_is_not_followed_and_is_named(aws_env: Any) -> None:
    with redirecting() as (server, elsewhere):
        source = s3_source("some-bucket", KEY, api_url=server.url)
        with pytest.raises(RemoteError) as refused:
            source.fetch()
    assert server.seen
    assert elsewhere.seen == []
    assert "307" in refused.value.message
    assert "redirect" in refused.value.message


SECRET_KEY = "planted-imds-secret-key-0b7d55"


def _imds_answer(request: bytes) -> bytes:
    path = request_path(request)
    if path.startswith("/latest/api/token"):
        body = "imds-session-token"
    elif path.rstrip("/") == "/latest/meta-data/iam/security-credentials":
        body = "dynconf-role"
    else:
        expires = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = json.dumps({
            "Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "AKIAPLANTEDIMDS0001",
            "SecretAccessKey": SECRET_KEY, "Token": "planted-imds-session", "Expiration": expires,
        })  # fmt: skip
    return (
        f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


def test_instance_metadata_credentials_are_not_fetched_through_the_proxy(
    aws_env: Any, bucket: str, env_proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 1}')
    imds = Listener("127.0.0.1", _imds_answer)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
    env_proxy.engage()
    try:
        source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
        assert source.fetch().text == '{"v": 1}'
    finally:
        imds.close()
    assert imds.seen
    assert env_proxy.seen == []
