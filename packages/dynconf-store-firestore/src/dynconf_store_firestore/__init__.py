"""The firestore store for dynconf: one Firestore document's fields, watched by a listener.

The plugin module (``dynconf_store_firestore.plugin``) is what discovery loads; the client
library (google-cloud-firestore) is imported only when a source is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
from dynconf_store_firestore.plugin import FIRESTORE_STORE, FirestoreStoreType, Target
from dynconf_store_firestore.remote import Firestore

if TYPE_CHECKING:
    from dynconf_store_firestore.source import Connection, FirestoreSource

__all__ = [
    "Firestore",
    "Connection",
    "FIRESTORE_STORE",
    "FirestoreSource",
    "FirestoreStoreType",
    "Target",
]

__getattr__ = lazy_attributes(
    globals(),
    {
        "Connection": "dynconf_store_firestore.source",
        "FirestoreSource": "dynconf_store_firestore.source",
    },
)
"""Names imported on first use (:mod:`dynconf.lazy`): plugin discovery imports this
package, and an agent that uses another store must not pay for this one's client code."""
