"""The etcd fixtures give working etcd servers: plain with a watch, TLS client certs, auth."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fixtures.servers import EtcdAuthServer, EtcdServer, EtcdTlsServer

pytestmark = pytest.mark.etcd


def test_watch_sees_the_next_put(etcd_server: EtcdServer) -> None:
    client = etcd_server.client
    key = f"/smoke/{uuid.uuid4().hex}"
    client.put(key, "v1")
    [(value, meta)] = client.get(key, metadata=True)
    assert value == b"v1"

    events, cancel = client.watch(key, start_revision=int(meta["mod_revision"]) + 1)
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(next, events)
            client.put(key, "v2")
            event = first.result(timeout=10)
    finally:
        cancel()
    assert event["kv"]["value"] == b"v2"


def test_tls_client_certificate_is_accepted(etcd_tls_server: EtcdTlsServer) -> None:
    key = f"/smoke/tls/{uuid.uuid4().hex}"
    etcd_tls_server.client.put(key, "secure")
    assert etcd_tls_server.client.get(key) == [b"secure"]


def test_tls_without_client_certificate_is_refused(etcd_tls_server: EtcdTlsServer) -> None:
    import requests
    from etcd3gw.client import Etcd3Client
    from etcd3gw.exceptions import ConnectionFailedError

    session = requests.Session()
    session.trust_env = False  # else REQUESTS_CA_BUNDLE replaces the test CA
    session.verify = str(etcd_tls_server.ca_cert)
    anonymous = Etcd3Client(
        host=etcd_tls_server.host,
        port=etcd_tls_server.port,
        protocol="https",
        timeout=5,
        session=session,
    )
    with pytest.raises(ConnectionFailedError):
        anonymous.get("/smoke/anything")


def test_auth_user_can_write_and_anonymous_cannot(etcd_auth_server: EtcdAuthServer) -> None:
    from etcd3gw.client import Etcd3Client
    from etcd3gw.exceptions import Etcd3Exception

    key = f"/smoke/auth/{uuid.uuid4().hex}"
    etcd_auth_server.client.put(key, "mine")
    assert etcd_auth_server.client.get(key) == [b"mine"]

    anonymous = Etcd3Client(host=etcd_auth_server.host, port=etcd_auth_server.port, timeout=5)
    with pytest.raises(Etcd3Exception):
        anonymous.put(key, "theirs")
