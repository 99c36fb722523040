"""Credentials against real servers: anonymous, a token, a .creds file (operator mode)."""

from __future__ import annotations

import logging

import pytest
from natskit import Operator, admin, bucket, run, source

from dynconf.errors import AuthError
from dynconf.stores import Fetched

pytestmark = pytest.mark.nats

DOC = '{"greeting": "hello"}'


def test_anonymous_reads_a_server_without_authorization(nats_server):
    async def scenario():
        client = await admin(nats_server.url)
        kv = await bucket(client, "authanon")
        await kv.put("app/config.json", DOC.encode())
        src = source(nats_server.url, "authanon/app/config.json")
        try:
            return await src.fetch()
        finally:
            await src.aclose()
            await client.close()

    answer = run(scenario)
    assert isinstance(answer, Fetched)
    assert answer.text == DOC


def _seed_token_server(nats_server):
    async def seed():
        client = await admin(nats_server.token_url, token=nats_server.token)
        kv = await bucket(client, "authtok")
        await kv.put("app/config.json", DOC.encode())
        await client.close()

    run(seed)


def test_token_from_the_token_slot_reads(nats_server):
    _seed_token_server(nats_server)

    async def scenario():
        src = source(nats_server.token_url, "authtok/app/config.json", token=nats_server.token)
        try:
            return await src.fetch()
        finally:
            await src.aclose()

    assert run(scenario).text == DOC


@pytest.mark.parametrize("token", [None, "not-the-token"])
def test_missing_or_wrong_token_is_auth(nats_server, token):
    _seed_token_server(nats_server)

    async def scenario():
        src = source(nats_server.token_url, "authtok/app/config.json", token=token)
        try:
            await src.fetch()
        finally:
            await src.aclose()

    with pytest.raises(AuthError, match="refused the credential"):
        run(scenario)


def test_token_never_appears_in_errors_or_logs(nats_server, caplog):
    _seed_token_server(nats_server)
    secret = nats_server.token + "-but-wrong"
    caplog.set_level(logging.DEBUG)

    async def scenario():
        src = source(nats_server.token_url, "authtok/app/config.json", token=secret)
        try:
            await src.fetch()
        finally:
            await src.aclose()

    with pytest.raises(AuthError) as caught:
        run(scenario)
    text = str(caught.value) + repr(caught.value) + caplog.text
    assert secret not in text
    assert nats_server.token not in text


@pytest.fixture
def operator_nats(own_nats, tmp_path):
    operator = Operator()
    server = own_nats(operator.server_config(tmp_path / "operator"), name="operator")
    return operator, server


def _seed_with(creds, url, name="creds"):
    async def seed():
        client = await admin(url, user_credentials=str(creds))
        kv = await bucket(client, name)
        await kv.put("app/config.json", DOC.encode())
        await client.close()

    run(seed)


def test_creds_file_named_by_auth_token_path_reads(operator_nats, tmp_path):
    operator, server = operator_nats
    creds = operator.creds(tmp_path / "reader.creds")
    _seed_with(creds, server.url)

    async def scenario():
        src = source(server.url, "creds/app/config.json", auth_token_path=str(creds))
        try:
            return await src.fetch()
        finally:
            await src.aclose()

    assert run(scenario).text == DOC


def test_creds_file_is_read_again_at_every_connect(operator_nats, tmp_path):
    operator, server = operator_nats
    creds = tmp_path / "mounted.creds"
    operator.creds(creds)
    _seed_with(creds, server.url)

    async def scenario():
        src = source(server.url, "creds/app/config.json", auth_token_path=str(creds))
        try:
            assert (await src.fetch()).text == DOC
            operator.foreign_creds(creds)  # the Secret was replaced by one this server rejects
            server.kill()
            server.start()
            with pytest.raises(AuthError):
                await src.fetch()  # the reconnect presented the new file
            operator.creds(creds)  # and rotated again to a valid user
            assert (await src.fetch()).text == DOC
            assert src.connects == 2  # two successful connects; the refused one between
        finally:
            await src.aclose()

    run(scenario)


def test_creds_of_an_unknown_account_is_auth(operator_nats, tmp_path):
    operator, server = operator_nats
    creds = operator.foreign_creds(tmp_path / "stranger.creds")

    async def scenario():
        src = source(server.url, "creds/app/config.json", auth_token_path=str(creds))
        try:
            await src.fetch()
        finally:
            await src.aclose()

    with pytest.raises(AuthError):
        run(scenario)


def test_creds_seed_never_appears_in_errors_or_logs(operator_nats, tmp_path, caplog):
    operator, server = operator_nats
    creds = operator.foreign_creds(tmp_path / "stranger.creds")
    seed_line = next(line for line in creds.read_text().splitlines() if line.startswith("SU"))
    caplog.set_level(logging.DEBUG)

    async def scenario():
        src = source(server.url, "creds/app/config.json", auth_token_path=str(creds))
        try:
            await src.fetch()
        finally:
            await src.aclose()

    with pytest.raises(AuthError) as caught:
        run(scenario)
    assert seed_line not in str(caught.value) + caplog.text


def test_creds_file_that_does_not_exist_is_named(nats_server, tmp_path):
    missing = tmp_path / "gone.creds"

    async def scenario():
        src = source(nats_server.url, "authanon/app/config.json", auth_token_path=str(missing))
        try:
            await src.fetch()
        finally:
            await src.aclose()

    with pytest.raises(Exception, match=str(missing)):
        run(scenario)
