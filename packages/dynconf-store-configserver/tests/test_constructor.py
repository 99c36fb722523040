"""``ConfigServer(url, application/profile, ...)``: the typed constructor against our server."""

from __future__ import annotations

from typing import Any

from dynconf import DynamicConfig
from dynconf_store_configserver import ConfigServer
from tests.fixtures.eventually import eventually

from .conftest import TOKEN


def test_config_server_constructor_loads_and_the_watch_sees_a_change(
    billing: Any, config_dir: Any
) -> None:
    source = ConfigServer(billing.url, "billing/prod", auth="token", token=TOKEN)
    config = DynamicConfig(None, "billing").whole_document().remote(source)
    assert config.init()["db"]["host"] == "db.prod"
    watch = config.watch_remote(interval=0.5)
    try:
        config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.pushed"\n')
        assert eventually(lambda: config.current()["db"]["host"] == "db.pushed", timeout=15), (
            config.current()["db"]["host"]
        )
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_config_server_token_callable_is_asked_at_each_request(billing: Any) -> None:
    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return TOKEN

    source = ConfigServer(billing.url, "billing/prod", auth="token", token=token)
    config = DynamicConfig(None, "billing").whole_document().remote(source)
    config.init()
    config.refresh_remote()
    assert len(asked) == 2
    source.close()
