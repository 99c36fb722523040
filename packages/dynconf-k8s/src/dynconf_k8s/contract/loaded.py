"""What this process's plugin lock adds to the contract: stores beyond the nine.

The book's contract names nine stores; a tenth is a third party's distribution that the
image's plugin lock pins. The webhook, the operator's parser and the node agent learn of it
here, from the same registry the agent builds stores from, so an image that carries a tenth
store admits it with no edit to our tables, and an image that does not refuses it by name.
Read once per process (the registry is enumerated at start and never changes).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from dynconf_k8s.vocabulary import STORES as BOOK_STORES

if TYPE_CHECKING:
    from dynconf.stores import StoreType

__all__ = ["admitted_stores", "loaded_stores"]

EMBEDDED: frozenset[str] = frozenset({"file"})
"""Stores of the agent's own (a local file outside Kubernetes): never a pod's source."""


@functools.cache
def loaded_stores() -> tuple[StoreType, ...]:
    """Every store this process's registry loaded (its plugin lock's).

    A registry that cannot load gives none: the process that needs a store reports that
    failure where it builds one, with the store's name.
    """
    from dynconf.plugins import default_registry

    try:
        return tuple(default_registry().stores.values())
    except Exception:
        return ()


def admitted_stores() -> tuple[str, ...]:
    """The stores a pod may name: the nine in the contract's order, then any other the lock
    loads (sorted), never an embedded one."""
    extra = sorted(
        store.name
        for store in loaded_stores()
        if store.name not in BOOK_STORES and store.name not in EMBEDDED
    )
    return (*BOOK_STORES, *extra)
