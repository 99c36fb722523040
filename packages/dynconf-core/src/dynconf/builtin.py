"""The built-in plugin: formats, template filters and the embedded ``file`` store.

Registered through the same entry-point group third parties use (``builtin`` in
dynconf-core's metadata), so a plugin lock pins it like any other. Each hook returns what
the module that owns the concept exports; nothing is defined here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from dynconf.plugins import FormatType, hookimpl

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

if TYPE_CHECKING:
    from dynconf.stores import StoreType


@hookimpl
def dynconf_formats() -> Iterable[FormatType]:
    from dynconf.formats import BUILTIN_FORMATS

    return BUILTIN_FORMATS


@hookimpl
def dynconf_template_filters() -> Mapping[str, Callable[..., Any]]:
    from dynconf.template_filters import BUILTIN_FILTERS

    return BUILTIN_FILTERS


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    from dynconf.file_store import FILE_STORE

    return [FILE_STORE]
