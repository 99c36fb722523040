"""The redis store type, contributed through the ``dynconf_stores`` hook.

There is no ``--auth`` for redis: ``requirepass`` passwords and ACL users ride in the URL
(``redis://user:password@host:port/db``), which is why such a URL travels as
endpoint-secret and is redacted wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.stores import (
    AuthMethod,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
)
from dynconf_store_redis.address import parse_url, shown_url, spec_refusals

if TYPE_CHECKING:
    from dynconf_store_redis.source import RedisSource

__all__ = ["REDIS_STORE", "RedisStoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""


class RedisStoreType(StoreTypeBase):
    """Redis: one string key, watched through keyspace notifications."""

    constructor = "dynconf_store_redis.remote:Redis"
    """The typed Python constructor (``from dynconf.remote import Redis``)."""

    name = "redis"
    settings = ("format",)
    capability = WatchCapability.PUSH
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth = None

    def credential_hint(self) -> str:
        return "the URL (redis://user:password@host:port/db), delivered through endpoint-secret"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        return spec_refusals(spec)

    def describe(self, spec: StoreSpec) -> str:
        return f"redis {shown_url(spec.endpoint)} key {spec.key}"

    def build(self, spec: StoreSpec) -> RedisSource:
        address, _problems = parse_url(spec.endpoint)
        unusable = "the redis URL cannot be used" if address is None else None
        described = self.admit(spec, unusable=unusable)
        assert address is not None  # admit refused it otherwise
        from dynconf_store_redis.source import RedisSource

        return RedisSource(
            address,
            spec.key,
            spec.extra.get("format") or format_from_key(spec.key) or "json",
            described=described,
            tls=spec.tls,
            timeout=spec.timeout,
            max_bytes=spec.max_bytes,
        )


REDIS_STORE: Final = RedisStoreType()


@hookimpl
def dynconf_stores() -> list[StoreType]:
    return [REDIS_STORE]
