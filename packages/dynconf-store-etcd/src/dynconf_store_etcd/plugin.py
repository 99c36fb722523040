"""The etcd store type, contributed through the ``dynconf_stores`` hook.

There is no ``--auth`` for etcd: the flags present are the method. ``--auth-username`` with
the password Secret logs in to etcd's auth; ``--tls-cert``/``--tls-key`` present a client
certificate; both together are etcd's own combination (the certificate authenticates the
channel, the user the principal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.store_http import HTTP_SETTINGS, HttpPolicy
from dynconf.stores import (
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
    redact_url,
)
from dynconf_store_etcd.endpoint import parse_endpoint, spec_refusals

if TYPE_CHECKING:
    from dynconf_store_etcd.source import EtcdSource

__all__ = ["ETCD_STORE", "EtcdStoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""


class EtcdStoreType(StoreTypeBase):
    """etcd v3 through its gRPC gateway: one key, watched by the gateway's watch stream."""

    constructor = "dynconf_store_etcd.remote:Etcd"
    """The typed Python constructor (``from dynconf.remote import Etcd``)."""

    name = "etcd"
    settings = ("format", *HTTP_SETTINGS)
    inputs = (StoreInput("keys", "list", summary="several keys read as one"),)
    capability = WatchCapability.PUSH
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth = None

    def credential_hint(self) -> str:
        return (
            "{field:auth_username} with the password Secret, a client certificate "
            "({field:tls.cert_file+tls.key_file}), or both"
        )

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        return spec_refusals(spec)

    def describe(self, spec: StoreSpec) -> str:
        return f"etcd {redact_url(spec.endpoint)} key {','.join(spec.keys or (spec.key,))}"

    def build(self, spec: StoreSpec) -> EtcdSource:
        endpoint, _problems = parse_endpoint(spec.endpoint)
        unusable = "the etcd endpoint cannot be used" if endpoint is None else None
        described = self.admit(spec, unusable=unusable)
        assert endpoint is not None  # admit refused it otherwise
        from dynconf_store_etcd.source import EtcdSource

        return EtcdSource(
            endpoint,
            spec.key,
            spec.extra.get("format") or format_from_key(spec.key) or "json",
            described=described,
            username=spec.auth_username,
            password=spec.password,
            tls=spec.tls,
            timeout=spec.timeout,
            policy=HttpPolicy.from_settings(spec.extra),
            keys=[
                (each, spec.extra.get("format") or format_from_key(each) or "json")
                for each in spec.keys
            ],
            max_bytes=spec.max_bytes,
        )


ETCD_STORE: Final = EtcdStoreType()


@hookimpl
def dynconf_stores() -> list[StoreType]:
    return [ETCD_STORE]
