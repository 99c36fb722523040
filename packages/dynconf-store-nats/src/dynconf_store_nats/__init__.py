"""The nats store for dynconf: one key of a JetStream KV bucket as a document, pushed on change.

The plugin module (``dynconf_store_nats.plugin``) is what discovery loads; the client
library (nats-py) is imported only when a source is built and used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
from dynconf_store_nats.plugin import (
    CREDENTIAL_MODES,
    NATS_STORE,
    NatsKey,
    NatsStoreType,
    credential_mode,
    parse_key,
)
from dynconf_store_nats.remote import Nats

if TYPE_CHECKING:
    from dynconf_store_nats.source import NatsSource, NoSuchBucket

__all__ = [
    "Nats",
    "CREDENTIAL_MODES",
    "NATS_STORE",
    "NatsKey",
    "NatsSource",
    "NatsStoreType",
    "NoSuchBucket",
    "credential_mode",
    "parse_key",
]

__getattr__ = lazy_attributes(
    globals(),
    {
        "NatsSource": "dynconf_store_nats.source",
        "NoSuchBucket": "dynconf_store_nats.source",
    },
)
"""Names imported on first use (:mod:`dynconf.lazy`): plugin discovery imports this
package, and an agent that uses another store must not pay for this one's client code."""
