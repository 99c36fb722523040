"""Fixtures for the vault store tests: the dev OpenBao, a TLS OpenBao, specs and policies."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from vault_testlib import SpecFactory, TlsBao, bao_binary, make_pki

from dynconf.stores import StoreSpec


@pytest.fixture
def name() -> str:
    """A path segment no other test uses."""
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
def spec_for(vault_server: Any) -> SpecFactory:
    """A StoreSpec against the dev server; keyword arguments override its fields."""

    def make(key: str, **fields: Any) -> StoreSpec:
        fields.setdefault(
            "token", None if fields.get("auth") not in (None, "token") else vault_server.token
        )
        return StoreSpec.from_inputs(source="vault", endpoint=vault_server.addr, key=key, **fields)

    return make


@pytest.fixture
def policy(vault_server: Any) -> Callable[[str, str], str]:
    """``policy(name, hcl)`` writes a policy on the dev server and returns its name."""

    def write(policy_name: str, hcl: str) -> str:
        vault_server.client.sys.create_or_update_policy(name=policy_name, policy=hcl)
        return policy_name

    return write


@pytest.fixture
def read_policy(policy: Callable[[str, str], str], name: str) -> str:
    """A policy granting read on ``secret/data/<name>`` and its metadata."""
    return policy(
        f"read-{name}",
        f'path "secret/data/{name}" {{ capabilities = ["read"] }}\n'
        f'path "secret/metadata/{name}" {{ capabilities = ["read"] }}\n',
    )


@pytest.fixture
def enabled_auth(vault_server: Any) -> Callable[[str], str]:
    """``enabled_auth(method)`` enables ``method`` at a fresh mount and returns the mount."""

    def enable(method: str) -> str:
        mount = f"{method}-{uuid.uuid4().hex[:8]}"
        vault_server.client.sys.enable_auth_method(method, path=mount)
        return mount

    return enable


@pytest.fixture(scope="session")
def tls_bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBao]:
    """An OpenBao with a TLS listener and file storage (KV v2 at ``secret/``), stopped after."""
    binary = bao_binary()
    if binary is None:
        pytest.skip("bao is not installed; run `scripts/testenv install vault`")
    directory = tmp_path_factory.mktemp("tlsbao")
    server = TlsBao(binary=binary, directory=directory, pki=make_pki(directory))
    try:
        server.start()
        server.call("POST", "sys/mounts/secret", {"type": "kv", "options": {"version": "2"}})
        yield server
    finally:
        server.stop()
