"""The git store for dynconf: one file of a git ref's tree as a document, watched by ls-remote.

The plugin module (``dynconf_store_git.plugin``) is what discovery loads; GitPython is
imported only when a source reads a tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
from dynconf_store_git.plugin import GIT_STORE, GitStoreType
from dynconf_store_git.remote import Git

if TYPE_CHECKING:
    from dynconf_store_git.credential import Credential
    from dynconf_store_git.source import GitSource

__all__ = ["Git", "Credential", "GIT_STORE", "GitSource", "GitStoreType"]

__getattr__ = lazy_attributes(
    globals(),
    {
        "Credential": "dynconf_store_git.credential",
        "GitSource": "dynconf_store_git.source",
    },
)
"""Names imported on first use (:mod:`dynconf.lazy`): plugin discovery imports this
package, and an agent that uses another store must not pay for this one's client code."""
