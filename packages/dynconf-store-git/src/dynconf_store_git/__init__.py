"""The git store for dynconf: one file of a git ref's tree as a document, watched by ls-remote.

The plugin module (``dynconf_store_git.plugin``) is what discovery loads; GitPython is
imported only when a source reads a tree.
"""

from dynconf_store_git.credential import Credential
from dynconf_store_git.plugin import GIT_STORE, GitStoreType
from dynconf_store_git.source import GitSource

__all__ = ["GIT_STORE", "Credential", "GitSource", "GitStoreType"]
