"""The s3_server fixture gives a working S3: put, get, and the ETag changing with content."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from tests.fixtures.servers import S3Server

pytestmark = pytest.mark.s3


def test_etag_changes_when_the_object_changes(s3_server: S3Server) -> None:
    s3 = s3_server.client
    bucket = f"smoke-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="app.yaml", Body=b"greeting: hello\n")
    first = s3.get_object(Bucket=bucket, Key="app.yaml")
    assert first["Body"].read() == b"greeting: hello\n"
    etag = first["ETag"]

    with pytest.raises(ClientError) as unchanged:
        s3.get_object(Bucket=bucket, Key="app.yaml", IfNoneMatch=etag)
    assert unchanged.value.response["Error"]["Code"] == "304"

    s3.put_object(Bucket=bucket, Key="app.yaml", Body=b"greeting: bye\n")
    changed = s3.get_object(Bucket=bucket, Key="app.yaml", IfNoneMatch=etag)
    assert changed["ETag"] != etag
    assert changed["Body"].read() == b"greeting: bye\n"
