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


def test_slow_down_is_a_throttle_carrying_the_servers_retry_after(monkeypatch):
    """A 503 SlowDown (which MinIO and moto do not send on demand, so a loopback server plays
    it) is a ThrottledError with the Retry-After seconds, which the call budget honours."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dynconf.errors import ThrottledError

    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")  # fmt: skip

    class SlowDown(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(503)
            self.send_header("Retry-After", "7")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = _answer

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowDown)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        source = s3_source("bucket", KEY, api_url=f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(ThrottledError) as raised:
            source.fetch()
        source.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert raised.value.retry_after == 7
    assert "SlowDown" in raised.value.message
