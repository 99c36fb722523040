"""etcd faults on private servers: restart mid-watch, unreachable during a change, token expiry,
TLS and username/password together."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import Fetched

pytestmark = [pytest.mark.etcd, pytest.mark.slow]


def text_of(answer: Any) -> str:
    assert isinstance(answer, Fetched), answer
    return answer.text


def test_server_killed_and_restarted_mid_watch_reports_and_delivers_next_change(
    private_etcd: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_etcd()
    kit.put(server.url, "app/config.json", '{"v": 0}')
    with kit.Watch(kit.build(server.url, "app/config.json")) as watch:
        server.kill()
        deadline = time.monotonic() + 10
        while not watch.failures and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watch.failures and isinstance(watch.failures[0], RemoteError)
        server.start()
        watch.wait_watching(timeout=30)
        kit.put(server.url, "app/config.json", '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'


def test_change_made_while_unreachable_is_delivered_when_it_returns(
    private_etcd: Callable[..., Any], proxy: Callable[[int], Any], kit: SimpleNamespace
) -> None:
    server = private_etcd()
    path = proxy(server.port)
    kit.put(server.url, "app/config.json", '{"v": 0}')
    with kit.Watch(kit.build(f"http://127.0.0.1:{path.port}", "app/config.json")) as watch:
        path.cut()
        kit.put(server.url, "app/config.json", '{"v": "while away"}')
        time.sleep(1.0)
        assert watch.failures, "the dropped stream was not reported"
        path.restore()
        assert text_of(watch.next(timeout=20)) == '{"v": "while away"}'
        kit.put(server.url, "app/config.json", '{"v": 2}')
        assert text_of(watch.next()) == '{"v": 2}'


def test_expired_token_is_reacquired_for_reads_and_the_watch(
    private_etcd: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_etcd(extra=["--auth-token", "simple", "--auth-token-ttl", "1"])
    root = uuid.uuid4().hex
    server.enable_auth(root)
    source = kit.build(server.url, "app/config.json", auth_username="root", password=root)
    token = kit.post(server.url, "auth/authenticate", {"name": "root", "password": root})["token"]
    kit.put(server.url, "app/config.json", '{"v": 0}', token)
    assert text_of(source.fetch()) == '{"v": 0}'
    first = source._token
    time.sleep(2.5)  # the 1 s simple token expires unused
    assert text_of(source.fetch()) == '{"v": 0}'
    assert source._token != first, "the expired token was not replaced"
    with kit.Watch(source) as watch:
        token = kit.post(server.url, "auth/authenticate", {"name": "root", "password": root})
        kit.put(server.url, "app/config.json", '{"v": 1}', token["token"])
        assert text_of(watch.next()) == '{"v": 1}'


def nameless_client_certificate(ca_dir: Path, out: Path) -> tuple[Path, Path]:
    """A client certificate with no CommonName (identity in the SAN), signed by the test CA."""
    from tests.fixtures.certs import Authority

    authority = Authority.from_files(ca_dir / "ca.crt", ca_dir / "ca.key")
    leaf = authority.issue(None, ["dynconf-client"], server=False, client=True)
    cert, key = out / "nameless.crt", out / "nameless.key"
    leaf.write(cert, key)
    return cert, key


def test_client_certificate_and_username_password_together(
    private_etcd: Callable[..., Any],
    kit: SimpleNamespace,
    etcd_tls_server: Any,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    ca_dir = etcd_tls_server.ca_cert.parent
    cert, key = nameless_client_certificate(ca_dir, tmp_path)
    certs = {"ca": etcd_tls_server.ca_cert, "cert": ca_dir / "server.crt",
             "key": ca_dir / "server.key", "client_cert": etcd_tls_server.client_cert,
             "client_key": etcd_tls_server.client_key}  # fmt: skip
    server = private_etcd(tls=certs)
    root = uuid.uuid4().hex
    server.enable_auth(root)
    ctx = kit.tls_context(certs["ca"], cert, key)
    token = kit.post(server.url, "auth/authenticate", {"name": "root", "password": root},
                     context=ctx)["token"]  # fmt: skip
    kit.put(server.url, "app/config.yaml", "v: 0\n", token, context=ctx)
    settings = kit.TlsSettings(ca_file=str(certs["ca"]), cert_file=str(cert),
                               key_file=str(key))  # fmt: skip
    source = kit.build(server.url, "app/config.yaml", auth_username="root", password=root,
                       tls=settings)  # fmt: skip
    answer = source.fetch()
    assert text_of(answer) == "v: 0\n" and answer.format == "yaml"
    with kit.Watch(source) as watch:
        kit.put(server.url, "app/config.yaml", "v: 1\n", token, context=ctx)
        assert text_of(watch.next()) == "v: 1\n"
    named = kit.TlsSettings(ca_file=str(certs["ca"]), cert_file=str(certs["client_cert"]),
                            key_file=str(certs["client_key"]))  # fmt: skip
    with pytest.raises(AuthError, match="without a CommonName"):
        kit.build(server.url, "app/config.yaml", auth_username="root", password=root,
                  tls=named).fetch()  # fmt: skip
    assert root not in caplog.text
