"""https: a private CA (http.sslCAInfo) and a client certificate (http.sslCert/sslKey)."""

from __future__ import annotations

import pytest

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import TlsSettings

pytestmark = pytest.mark.git


def test_private_ca_is_trusted(repo, tls_front, pki, make_source):
    front = tls_front()
    source = make_source(f"{front.base}/{repo.name}", tls=TlsSettings(ca_file=str(pki.ca)))
    assert source.fetch().text == "greeting: hello\n"


def test_unknown_ca_is_a_remote_error(repo, tls_front, pki, make_source):
    front = tls_front()
    source = make_source(f"{front.base}/{repo.name}", tls=TlsSettings(ca_file=str(pki.other_ca)))
    with pytest.raises(RemoteError) as caught:
        source.fetch()
    assert not isinstance(caught.value, AuthError)
    assert "BEGIN" not in str(caught.value)


def test_client_certificate_is_presented(repo, tls_front, pki, make_source):
    front = tls_front(require_client_cert=True)
    url = f"{front.base}/{repo.name}"
    with_cert = TlsSettings(ca_file=str(pki.ca), cert_file=str(pki.client_cert),
                            key_file=str(pki.client_key))  # fmt: skip
    assert make_source(url, tls=with_cert).fetch().text == "greeting: hello\n"
    with pytest.raises(RemoteError):
        make_source(url, tls=TlsSettings(ca_file=str(pki.ca))).fetch()


def test_skip_verify_is_honoured_and_logged(repo, tls_front, make_source, caplog):
    front = tls_front()
    source = make_source(f"{front.base}/{repo.name}", tls=TlsSettings(skip_verify=True))
    assert source.fetch().text == "greeting: hello\n"
    assert "store_tls_skip_verify" in [r.getMessage() for r in caplog.records]
