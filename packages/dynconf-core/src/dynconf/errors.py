"""One exception family for everything dynconf refuses.

Every error carries a *kind* (what went wrong, from a closed vocabulary that metrics and
retry decisions key on), the dotted *path* inside the document when there is one, and the
*origin* (which file, variable, store or runtime layer supplied the offending input).

The message is one sentence that names the field and the fix. It never contains a value
from a document, a credential, or a line of document text: callers build messages from
names, paths, line numbers and rules only. ``str(error)`` is therefore safe to log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final

__all__ = [
    "AuthError",
    "BackendError",
    "DecryptError",
    "DynconfError",
    "EnvError",
    "ErrorKind",
    "InvalidError",
    "IoError",
    "LimitError",
    "MissingError",
    "NotInitialisedError",
    "Origin",
    "OriginKind",
    "OversizeError",
    "ParseError",
    "Refusal",
    "RemoteError",
    "ThrottledError",
    "TypeMismatchError",
    "error_for_kind",
]


_MARK: Final = re.compile(r"\{field(?::([a-z_.+]+)(?:=([a-z0-9-]+))?)?\}")
"""``{field}``, ``{field:auth}``, ``{field:auth=jwt}`` or ``{field:a+b}``: where names go."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a store spec is refused, as data: which input, what is wrong with it, the fix.

    ``field`` names the input in the engine's own words (a :class:`~dynconf.stores.StoreSpec`
    field: ``auth_role``, ``token``, ``tls.cert_file``; a setting as ``extra.<name>``), or is
    ``None`` when the refusal is about the spec as a whole. Admission decides by ``field``
    alone (never by the words), so rewording a problem cannot change what is accepted.

    Each front end renders it in its own vocabulary — the agent's flag (``--auth-role``),
    the annotation (``dynamic-config.rs/auth-role``), a CSI attribute, a TOML key, a Python
    keyword — by passing its ``spell`` to :meth:`render`, so a front end never rewrites
    another's sentence. In ``problem`` and ``fix``, ``{field}`` marks where the input's name
    goes (at the front when there is no mark), ``{field:auth}`` where another input's name
    goes, ``{field:auth=jwt}`` an input set to a value (``--auth jwt``, ``auth="jwt"``) and
    ``{field:tls.cert_file+tls.key_file}`` inputs given together (said once where one name
    sets both, as the ``tls-secret`` annotation does).
    ``words`` says the problem already names its field in plain words (``the vault
    endpoint``), so no spelling is put in front. Neither text carries a credential or a
    document value.
    """

    field: str | None
    problem: str
    fix: str = ""
    words: bool = False

    def render(self, spell: Callable[[str], str]) -> str:
        """The one sentence, with every input spelled by ``spell``."""

        def mark(match: re.Match[str]) -> str:
            name, value = match.group(1) or self.field, match.group(2)
            if name is None:
                return match.group(0)
            spelled = " and ".join(dict.fromkeys(spell(part) for part in name.split("+")))
            if value is None:
                return spelled
            return f'{spelled}"{value}"' if spelled.endswith("=") else f"{spelled} {value}"

        text = _MARK.sub(mark, self.problem)
        if self.field is not None and not self.words and "{field}" not in self.problem:
            text = f"{spell(self.field)} {text}"
        fix = _MARK.sub(mark, self.fix)
        return f"{text}; {fix}" if fix else text


class ErrorKind(StrEnum):
    """The closed set of failure kinds; these strings are metric label values."""

    IO = "io"
    PARSE = "parse"
    MISSING = "missing"
    TYPE = "type"
    ENV = "env"
    INVALID = "invalid"
    REMOTE = "remote"
    AUTH = "auth"
    DECRYPT = "decrypt"
    BACKEND = "backend"


class OriginKind(StrEnum):
    """Where an input came from."""

    FILE = "file"
    ENV = "env"
    INLINE = "inline"
    REMOTE = "remote"
    RUNTIME = "runtime"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Origin:
    """Which source supplied a value or an error.

    ``name`` is a file path, a variable name, a store description (already redacted), or
    the runtime layer's name (``default``, ``command-line flag``, ``override``).
    """

    kind: OriginKind
    name: str = ""

    @classmethod
    def file(cls, path: str) -> Origin:
        return cls(OriginKind.FILE, str(path))

    @classmethod
    def env(cls, variable: str) -> Origin:
        return cls(OriginKind.ENV, variable)

    @classmethod
    def remote(cls, description: str) -> Origin:
        return cls(OriginKind.REMOTE, description)

    @classmethod
    def runtime(cls, layer: str) -> Origin:
        return cls(OriginKind.RUNTIME, layer)

    @classmethod
    def inline(cls) -> Origin:
        return cls(OriginKind.INLINE, "")

    def __str__(self) -> str:
        if self.kind is OriginKind.FILE:
            return f"in {self.name}"
        if self.kind in (OriginKind.ENV, OriginKind.REMOTE):
            return f"from {self.name}"
        if self.kind is OriginKind.INLINE:
            return "in an inline source"
        if self.kind is OriginKind.RUNTIME:
            return f"set as {self.name}"
        return "origin unknown"


UNKNOWN_ORIGIN = Origin(OriginKind.UNKNOWN)


class DynconfError(Exception):
    """Base of every dynconf error.

    ``message`` is the value-free sentence; ``path`` is the dotted document path (``""``
    for the whole document); ``origin`` says where the input came from.
    """

    kind: ClassVar[ErrorKind] = ErrorKind.BACKEND

    def __init__(self, message: str, *, path: str = "", origin: Origin | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.origin = origin if origin is not None else UNKNOWN_ORIGIN

    @property
    def origin_kind(self) -> OriginKind:
        return self.origin.kind

    def __str__(self) -> str:
        where = "" if self.origin.kind is OriginKind.UNKNOWN else f" ({self.origin})"
        return f"{self.message}{where}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(kind={self.kind.value!r}, path={self.path!r}, "
            f"origin={str(self.origin)!r})"
        )


class IoError(DynconfError):
    """A file or directory exists but could not be read or written."""

    kind = ErrorKind.IO


class ParseError(DynconfError):
    """Text that is not a valid document of its format (line and column, never the text)."""

    kind = ErrorKind.PARSE


class LimitError(ParseError):
    """A document past one of the engine's limits (:mod:`dynconf.limits`).

    Nesting deeper than ``MAX_DEPTH``, an integer longer than ``MAX_INTEGER_DIGITS``, a
    YAML alias expansion past ``MAX_YAML_VALUES``, or a lone surrogate (text with no UTF-8
    spelling). Raised when a document is parsed and again before one is written, so a
    document built in Python is held to the same limits; ``path`` names where.
    """


class MissingError(DynconfError):
    """A required value, section or document is not there."""

    kind = ErrorKind.MISSING


class TypeMismatchError(DynconfError):
    """A value or path has the wrong shape (a table where a scalar belongs, a bad path)."""

    kind = ErrorKind.TYPE


class EnvError(DynconfError):
    """An environment variable is refused (named, never its value)."""

    kind = ErrorKind.ENV


class InvalidError(DynconfError):
    """The resolved document does not satisfy its model or schema.

    ``errors`` holds the validator's report with every input value removed.
    """

    kind = ErrorKind.INVALID

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        origin: Origin | None = None,
        errors: list[dict[str, object]] | None = None,
    ) -> None:
        super().__init__(message, path=path, origin=origin)
        self.errors: list[dict[str, object]] = errors or []


class OversizeError(InvalidError):
    """A document past the size ceiling (``--max-document-bytes``), refused by its size.

    Its own type because a store may raise it before reading the value: a watch that meets
    one keeps watching (the document is wrong, not the connection), and the next write
    within the ceiling is delivered as ever.
    """


class RemoteError(DynconfError):
    """A store could not be reached or answered with an error; retry with backoff."""

    kind = ErrorKind.REMOTE


class ThrottledError(RemoteError):
    """A store said "too many requests" or "unavailable, come back later" (HTTP 429 / 503).

    Still a :class:`RemoteError` (retry with backoff), so every loop that retries remote
    failures keeps doing so; ``retry_after`` is the wait the store asked for, in seconds, when
    it named one (``Retry-After``), which the caller's call budget honours (capped) before
    the store's next request.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        path: str = "",
        origin: Origin | None = None,
    ) -> None:
        super().__init__(message, path=path, origin=origin)
        self.retry_after = retry_after


class AuthError(DynconfError):
    """A store refused the credential; retrying the same credential will not help."""

    kind = ErrorKind.AUTH


class DecryptError(DynconfError):
    """Encrypted input could not be decrypted."""

    kind = ErrorKind.DECRYPT


class BackendError(DynconfError):
    """An operation the engine or a plugin does not support, or a refused configuration."""

    kind = ErrorKind.BACKEND


class NotInitialisedError(MissingError):
    """``current()`` was read before the first successful load."""


_BY_KIND: dict[ErrorKind, type[DynconfError]] = {
    ErrorKind.IO: IoError,
    ErrorKind.PARSE: ParseError,
    ErrorKind.MISSING: MissingError,
    ErrorKind.TYPE: TypeMismatchError,
    ErrorKind.ENV: EnvError,
    ErrorKind.INVALID: InvalidError,
    ErrorKind.REMOTE: RemoteError,
    ErrorKind.AUTH: AuthError,
    ErrorKind.DECRYPT: DecryptError,
    ErrorKind.BACKEND: BackendError,
}


def error_for_kind(kind: ErrorKind | str) -> type[DynconfError]:
    """The exception class for a kind string (for errors that cross a process boundary)."""
    return _BY_KIND[ErrorKind(kind)]
