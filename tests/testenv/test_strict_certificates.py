"""Every certificate the tests and the test servers mint passes strict verification.

Python 3.13 verifies with ``ssl.VERIFY_X509_STRICT`` by default, which refuses a CA without
KeyUsage or a subject key identifier and a leaf without an authority key identifier. Each
handshake here sets the flag itself, so a certificate that only 3.13 would refuse fails on
every Python.
"""

from __future__ import annotations

import ssl
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.certs import Authority, Issued, strict_handshake

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from testenv_lib import stores
from testenv_lib.kube import mint_certificates


def _pair(directory: Path, name: str, leaf: Issued) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    leaf.write(cert, key)
    return cert, key


@pytest.mark.parametrize("rsa_key", [False, True], ids=["ec", "rsa"])
def test_a_test_authority_server_and_client_pass_a_strict_mutual_handshake(
    tmp_path: Path, rsa_key: bool
) -> None:
    authority = Authority("strict test CA")
    ca = tmp_path / "ca.pem"
    ca.write_bytes(authority.cert_pem())
    leaf = authority.issue("localhost", ["localhost", "127.0.0.1"], rsa_key=rsa_key)
    server = _pair(tmp_path, "server", leaf)
    client = _pair(tmp_path, "client", authority.issue("agent", server=False, client=True))

    assert not strict_handshake(ca, *server, "127.0.0.1", client=client)


def test_a_test_authority_client_without_a_common_name_passes_strict_verification(
    tmp_path: Path,
) -> None:
    authority = Authority("strict test CA")
    ca = tmp_path / "ca.pem"
    ca.write_bytes(authority.cert_pem())
    server = _pair(tmp_path, "server", authority.issue("localhost", ["127.0.0.1"]))
    nameless = authority.issue(None, ["dynconf-client"], server=False, client=True)
    client = _pair(tmp_path, "nameless", nameless)

    assert not strict_handshake(ca, *server, "127.0.0.1", client=client)


def test_a_ca_without_key_usage_is_refused_by_the_strict_handshake(tmp_path: Path) -> None:
    """The check can fail: the same CA re-signed with only BasicConstraints, as the test kits
    once minted it, verifies the same leaf on a plain handshake but not on a strict one."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    authority = Authority("strict test CA")
    key = authority.issued.key
    now = dt.datetime.now(dt.UTC)
    bare = (
        x509.CertificateBuilder()
        .subject_name(authority.cert.subject)
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    ca = tmp_path / "ca.pem"
    ca.write_bytes(bare.public_bytes(serialization.Encoding.PEM))
    server = _pair(tmp_path, "server", authority.issue("localhost", ["127.0.0.1"]))

    with pytest.raises(ssl.SSLCertVerificationError, match="key usage"):
        strict_handshake(ca, *server, "127.0.0.1")


def test_the_test_servers_certificates_pass_a_strict_mutual_handshake(tmp_path: Path) -> None:
    paths = stores.test_certs(SimpleNamespace(data_dir=lambda name: _made(tmp_path / name)))  # type: ignore[arg-type]
    server = (paths["server_cert"], paths["server_key"])
    client = (paths["client_cert"], paths["client_key"])

    assert not strict_handshake(paths["ca"], *server, "127.0.0.1", client=client)


def test_the_test_cluster_certificates_pass_a_strict_mutual_handshake(tmp_path: Path) -> None:
    mint_certificates(tmp_path)
    server = (tmp_path / "apiserver.crt", tmp_path / "apiserver.key")
    client = (tmp_path / "admin.crt", tmp_path / "admin.key")

    assert not strict_handshake(tmp_path / "ca.crt", *server, "127.0.0.1", client=client)


def _made(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory
