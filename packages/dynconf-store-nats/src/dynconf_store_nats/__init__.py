"""The nats store for dynconf: one key of a JetStream KV bucket as a document, pushed on change.

The plugin module (``dynconf_store_nats.plugin``) is what discovery loads; the client
library (nats-py) is imported only when a source is built and used.
"""

from dynconf_store_nats.plugin import (
    CREDENTIAL_MODES,
    NATS_STORE,
    NatsKey,
    NatsStoreType,
    credential_mode,
    parse_key,
)
from dynconf_store_nats.source import NatsSource, NoSuchBucket

__all__ = [
    "CREDENTIAL_MODES",
    "NATS_STORE",
    "NatsKey",
    "NatsSource",
    "NatsStoreType",
    "NoSuchBucket",
    "credential_mode",
    "parse_key",
]
