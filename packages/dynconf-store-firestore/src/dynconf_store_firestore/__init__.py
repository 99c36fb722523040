"""The firestore store for dynconf: one Firestore document's fields, watched by a listener.

The plugin module (``dynconf_store_firestore.plugin``) is what discovery loads; the client
library (google-cloud-firestore) is imported only when a source is built.
"""

from dynconf_store_firestore.plugin import FIRESTORE_STORE, FirestoreStoreType, Target
from dynconf_store_firestore.source import Connection, FirestoreSource

__all__ = ["FIRESTORE_STORE", "Connection", "FirestoreSource", "FirestoreStoreType", "Target"]
