"""The one grammar for ``<application>`` and ``<profile>``, shared by client and server."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["NAME", "is_name"]

NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""1 to 64 characters: a letter or digit first, then letters, digits, `.`, `_`, `-`."""


def is_name(text: str) -> bool:
    """Whether ``text`` is a routable application or profile name."""
    return bool(NAME.match(text)) and text not in (".", "..")
