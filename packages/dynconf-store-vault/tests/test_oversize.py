"""A secret past the document ceiling is refused while at most its bound has been read."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from vault_testlib import SpecFactory

from dynconf.errors import OversizeError
from dynconf.store_http import BODY_CHUNK
from dynconf.stores import Fetched
from dynconf_store_vault import VAULT_STORE
from dynconf_store_vault.transport import answer_bound

pytestmark = pytest.mark.vault

CEILING = 64 * 1024
VALUE_BYTES = 1024 * 1024
HEADROOM = 2 * BODY_CHUNK + 4096
"""What one bounded read may take past its bound: the chunk that crossed it, the socket
buffer's read-ahead, and the status line and headers."""


def put(vault_server: Any, path: str, data: dict[str, Any]) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(
        path, secret=data, mount_point="secret"
    )


def test_secret_past_the_ceiling_is_refused_within_the_bound(
    vault_server: Any, spec_for: SpecFactory, name: str, received: Callable[[int], list[int]]
) -> None:
    put(vault_server, name, {"v": "x" * VALUE_BYTES})
    source = VAULT_STORE.build(spec_for(f"secret/{name}", max_bytes=CEILING))
    total = received(int(vault_server.addr.rsplit(":", 1)[1]))
    try:
        with pytest.raises(OversizeError) as refused:
            source.fetch()
    finally:
        source.close()
    assert total[0] <= answer_bound(CEILING).limit + HEADROOM
    assert total[0] < VALUE_BYTES
    assert f"past the {CEILING}-byte ceiling" in refused.value.message
    assert "xxxx" not in refused.value.message


@pytest.mark.parametrize(
    "char",
    ["x", "<"],
    ids=["plain", "escaped-sixfold"],  # Vault sends each "<" as \u003c: six bytes for one
)
def test_secret_just_under_the_ceiling_still_reads(
    vault_server: Any, spec_for: SpecFactory, name: str, char: str
) -> None:
    fields = {"v": char * (CEILING - 16)}
    put(vault_server, name, fields)
    source = VAULT_STORE.build(spec_for(f"secret/{name}", max_bytes=CEILING))
    try:
        answer = source.fetch()
    finally:
        source.close()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == fields


def test_refused_read_drops_its_connection_and_the_next_read_works(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"v": "x" * VALUE_BYTES})
    source = VAULT_STORE.build(spec_for(f"secret/{name}", max_bytes=CEILING))
    try:
        with pytest.raises(OversizeError):
            source.fetch()
        put(vault_server, name, {"v": 1})
        answer = source.fetch()
    finally:
        source.close()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"v": 1}
