"""Reading one object: document, ETag revision, ABSENT, addressing, region and credentials."""

from __future__ import annotations

import logging
import time

import pytest
from s3kit import Requests, s3_source

from dynconf.errors import InvalidError, RemoteError
from dynconf.stores import ABSENT, Fetched, is_async_source

pytestmark = pytest.mark.s3

KEY = "prod/db.json"


def test_source_is_blocking(aws_env, bucket):
    assert not is_async_source(s3_source(bucket, KEY, api_url=aws_env.endpoint_url))


def test_fetch_reads_the_object_with_its_etag_as_revision(aws_env, bucket):
    put = aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"db": "primary"}')
    answer = s3_source(bucket, KEY, api_url=aws_env.endpoint_url).fetch()
    assert isinstance(answer, Fetched)
    assert (answer.text, answer.format) == ('{"db": "primary"}', "json")
    assert answer.revision == put["ETag"].strip('"')


def test_missing_object_is_absent(aws_env, bucket):
    assert s3_source(bucket, "prod/none.json", api_url=aws_env.endpoint_url).fetch() is ABSENT


def test_missing_bucket_is_a_remote_error_that_says_so(aws_env):
    with pytest.raises(RemoteError, match="no such bucket"):
        s3_source("no-such-bucket-here", KEY, api_url=aws_env.endpoint_url).fetch()


def test_object_that_is_not_utf8_is_refused_without_its_bytes(aws_env, bucket):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"\xff\xfe planted-value")
    with pytest.raises(RemoteError, match="not UTF-8") as caught:
        s3_source(bucket, KEY, api_url=aws_env.endpoint_url).fetch()
    assert "planted-value" not in str(caught.value)


def test_api_url_uses_path_style_and_the_placeholder_region(aws_env, bucket):
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"{}")
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    sent = Requests(source)
    source.fetch()
    _method, url, headers = sent.sent[0]
    assert url == f"{aws_env.endpoint_url}/{bucket}/{KEY}"
    assert "/us-east-1/s3/aws4_request" in headers["Authorization"]


def test_a_configured_region_wins_over_the_placeholder(aws_env, bucket, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"{}")
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    sent = Requests(source)
    source.fetch()
    assert "/eu-west-3/s3/aws4_request" in sent.sent[0][2]["Authorization"]


def test_static_keys_come_from_the_aws_environment(aws_env, bucket, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADYNCONFTESTKEY01")
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b"{}")
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url)
    sent = Requests(source)
    source.fetch()
    assert "Credential=AKIADYNCONFTESTKEY01/" in sent.sent[0][2]["Authorization"]


def test_no_credentials_anywhere_is_a_remote_error_naming_the_fix(aws_env, bucket, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(RemoteError, match="found no AWS credentials"):
        s3_source(bucket, KEY, api_url=aws_env.endpoint_url).fetch()


def test_unreachable_server_is_a_prompt_remote_error(aws_env):
    started = time.monotonic()
    with pytest.raises(RemoteError, match="cannot be reached"):
        s3_source("some-bucket", KEY, api_url="http://127.0.0.1:1", timeout=1).fetch()
    assert time.monotonic() - started < 10


def test_build_does_no_io(aws_env):
    source = s3_source("some-bucket", KEY, api_url="http://127.0.0.1:1")
    assert source._client is None


def test_secret_key_never_appears_in_errors_or_logs(aws_env, monkeypatch, caplog):
    secret = "planted-secret-access-key-0123456789"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(RemoteError) as caught:
        s3_source("no-such-bucket-here", KEY, api_url=aws_env.endpoint_url).fetch()
    assert secret not in str(caught.value) + repr(caught.value)
    assert secret not in caplog.text


def test_an_object_past_the_ceiling_is_refused_by_its_length(aws_env, bucket):
    """``StoreSpec.max_bytes`` (the agent's ``--max-document-bytes``) bounds what is held:
    the answer's length refuses it, naming the size and the flag, never the value."""
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": "planted-value"}' + b" " * 2000)
    source = s3_source(bucket, KEY, api_url=aws_env.endpoint_url, max_bytes=1000)
    with pytest.raises(InvalidError, match="2022 bytes, past the 1000-byte ceiling") as caught:
        source.fetch()
    assert "--max-document-bytes" in str(caught.value)
    assert "planted-value" not in str(caught.value)
    aws_env.client.put_object(Bucket=bucket, Key=KEY, Body=b'{"v": 1}')
    assert isinstance(source.fetch(), Fetched)  # within it: read as ever
