"""The vault store for dynconf: KV v2 watched by version, dynamic secrets with leases.

``VAULT_STORE`` and the lease arithmetic import nothing heavy; ``VaultSource`` (which needs
hvac) is imported on first use, so plugin discovery stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
from dynconf_store_vault.lease import (
    REISSUE_FRACTION,
    RENEW_FRACTION,
    LeaseAction,
    LeaseSchedule,
    certificate_ttl,
)
from dynconf_store_vault.plugin import AUTH_METHODS, VAULT_STORE, VaultStoreType
from dynconf_store_vault.remote import Vault

if TYPE_CHECKING:
    from dynconf_store_vault.source import VaultSource

__all__ = [
    "Vault",
    "AUTH_METHODS",
    "REISSUE_FRACTION",
    "RENEW_FRACTION",
    "VAULT_STORE",
    "LeaseAction",
    "LeaseSchedule",
    "VaultSource",
    "VaultStoreType",
    "certificate_ttl",
]


__getattr__ = lazy_attributes(globals(), {"VaultSource": "dynconf_store_vault.source"})
