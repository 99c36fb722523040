"""No credential and no document value ever reaches a log line or an exception text."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest
from test_auth import approle
from vault_testlib import SpecFactory, Watcher

from dynconf.errors import DynconfError
from dynconf.stores import StoreSpec
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault

PLANTED_VALUE = "value-planted-7f3a9c"
PLANTED_PASSWORD = "password-planted-51be2d"


def test_secrets_never_reach_logs_or_errors(
    vault_server: Any,
    spec_for: SpecFactory,
    policy: Any,
    enabled_auth: Any,
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []

    def capture(error: BaseException) -> None:
        texts.extend([str(error), repr(error), "".join(traceback.format_exception(error))])

    vault_server.client.secrets.kv.v2.create_or_update_secret(
        name, secret={"password": PLANTED_VALUE}
    )
    mount = enabled_auth("approle")
    nothing = policy(f"nothing-{name}", 'path "secret/data/elsewhere" { capabilities = ["read"] }')
    role_id, secret_id = approle(vault_server, mount, [nothing])
    root = vault_server.token
    specs = [
        # refused login, with the planted string as the secret id
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=PLANTED_PASSWORD,
        ),
        # a real login, then the policy refuses the read twice
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        ),
        # userpass with the planted password on a mount that does not exist
        spec_for(f"secret/{name}", auth="userpass", auth_username="u", password=PLANTED_PASSWORD),
        # unreachable server carrying the root token
        StoreSpec(
            source="vault",
            endpoint="http://127.0.0.1:9",
            key=f"secret/{name}",
            token=root,
            timeout=1.0,
        ),
    ]
    for spec in specs:
        source = VAULT_STORE.build(spec)
        texts.extend([source.describe(), repr(spec), repr(source.keeper)])
        try:
            source.fetch()
        except DynconfError as error:
            capture(error)
        else:
            pytest.fail("every spec above must fail")
    # a watch that reports failures while the server is unreachable
    watched = VAULT_STORE.build(
        StoreSpec(
            source="vault",
            endpoint="http://127.0.0.1:9",
            key=f"secret/{name}",
            token=root,
            timeout=0.5,
        )
    )
    watched.on_failure = capture
    with Watcher(watched, interval=0.1) as watch:
        watch.quiet(1.0)
    # and a successful read, whose document holds the planted value
    VAULT_STORE.build(spec_for(f"secret/{name}")).fetch()

    assert len(texts) > 12
    everything = "\n".join([*texts, caplog.text])
    for secret in (PLANTED_VALUE, PLANTED_PASSWORD, secret_id, root):
        assert secret not in everything
