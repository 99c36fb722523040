"""The ldap_server fixture gives a working slapd: user bind, bad password, group lookup."""

from __future__ import annotations

import pytest

from tests.fixtures.servers import LdapServer

pytestmark = pytest.mark.ldap


def test_user_binds_with_its_password(ldap_server: LdapServer) -> None:
    conn = ldap_server.connect(ldap_server.user_dn, ldap_server.user_password)
    try:
        assert conn.bound
    finally:
        conn.unbind()


def test_wrong_password_does_not_bind(ldap_server: LdapServer) -> None:
    conn = ldap_server.connect(ldap_server.user_dn, "wrong")
    assert not conn.bound


def test_group_lists_the_user(ldap_server: LdapServer) -> None:
    conn = ldap_server.connect()
    try:
        assert conn.search(
            ldap_server.groups_dn, f"(member={ldap_server.user_dn})", attributes=["cn"]
        )
        assert [str(e.cn) for e in conn.entries] == ["cfg-readers"]
    finally:
        conn.unbind()
