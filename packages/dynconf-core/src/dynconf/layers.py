"""Readers that turn each configured source into layer contributions (engine-contract §1.1).

Each function here reads one kind of source and answers tables already cut down to the
section being resolved, with the origin that :mod:`dynconf.resolve` records for provenance.
None of them merges: the fold, the alias pass and the diagnostics live in
:mod:`dynconf.resolve`. Every refusal names the file, variable or field and the fix, never
a value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from dynconf.document import Document, Value
from dynconf.errors import EnvError, IoError, LimitError, Origin, ParseError, TypeMismatchError
from dynconf.limits import MAX_DEPTH
from dynconf.plugins import FormatType
from dynconf.text import type_text

__all__ = [
    "SCHEMA_KEY",
    "STRICT_ENV_WORDS",
    "Contribution",
    "EnvMatcher",
    "InlineSource",
    "RemoteDocument",
    "Sectioned",
    "expand_home",
    "parse_document",
    "profile_from_env",
    "profile_variant",
    "read_dotenv",
    "read_secrets_dir",
    "read_text_file",
    "section_of",
]

SCHEMA_KEY: Final = "$schema"
STRICT_ENV_WORDS: Final = frozenset({"yes", "no", "on", "off", "null", "nil", "none"})
_ASCII_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, slots=True)
class InlineSource:
    """Document text given in place of a listed file (origin: an inline source)."""

    text: str
    format: str

    def __repr__(self) -> str:
        return f"InlineSource(format={self.format!r}, chars={len(self.text)})"


@dataclass(frozen=True, slots=True)
class RemoteDocument:
    """The document a remote store last answered; resolution merges it without any I/O.

    ``description`` is the store's already-redacted ``describe()``, used as the origin.
    """

    text: str
    format: str
    description: str

    def __repr__(self) -> str:
        return f"RemoteDocument(format={self.format!r}, description={self.description!r})"


@dataclass(slots=True)
class Contribution:
    """One layer's table, as the fold sees it.

    ``layer`` is the engine's layer name (``default``, ``discovered``, ``file``, ``remote``,
    ``secrets``, ``.env``, ``environment``, ``binding``, ``flag``, ``override``).
    ``variables`` narrows provenance inside the environment layer: dotted path of what a
    variable supplied → that variable's name.
    """

    layer: str
    origin: Origin
    table: Document
    variables: dict[str, str] | None = field(default=None, repr=False)

    def origin_at(self, path: str) -> Origin:
        """The origin of the value this layer supplies at ``path`` (narrowed for env layers)."""
        if self.variables:
            probe = path
            while True:
                variable = self.variables.get(probe)
                if variable is not None:
                    return Origin.env(variable)
                cut = probe.rfind(".")
                if cut < 0:
                    break
                probe = probe[:cut]
        return self.origin


@dataclass(slots=True)
class Sectioned:
    """A parsed document split into the section being resolved and its siblings."""

    section: Document | None
    siblings: Document


def read_text_file(path: Path) -> str | None:
    """The UTF-8 text of a file, or ``None`` when it does not exist (missing is not an error)."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise IoError(
            f"{path} is a directory, not a document; name a file",
            origin=Origin.file(str(path)),
        ) from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise IoError(
            f"{path} exists but cannot be read ({reason}); check its permissions",
            origin=Origin.file(str(path)),
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise IoError(
            f"{path} is not valid UTF-8; save it as UTF-8",
            origin=Origin.file(str(path)),
        ) from None


def parse_document(text: str, fmt: FormatType, origin: Origin) -> Document:
    """Parse document text; blank text is an empty table whatever the format."""
    if not text.strip():
        return {}
    document = fmt.parse(text, origin)
    if not isinstance(document, dict):
        raise ParseError(
            "the document is not a table at the top level; write a mapping of sections",
            origin=origin,
        )
    return document


def section_of(document: Document, key: str, whole_document: bool, origin: Origin) -> Sectioned:
    """Cut a document into the section named ``key`` and the other sections.

    Every top-level value must be a table (``$schema`` excepted); otherwise the error names
    the key and points at ``whole_document``.
    """
    if whole_document or not key:
        if SCHEMA_KEY in document:
            document = {k: v for k, v in document.items() if k != SCHEMA_KEY}
        return Sectioned(document, {})
    section: Document | None = None
    siblings: Document = {}
    for name, value in document.items():
        if name == SCHEMA_KEY:
            continue
        if not isinstance(value, dict):
            raise ParseError(
                f"the top-level key `{name}` is not a table, but every top-level key is a "
                f"section; make it a table, or set whole_document to read the whole "
                f"document as the `{key}` section",
                path=name,
                origin=origin,
            )
        if name == key:
            section = value
        else:
            siblings[name] = value
    return Sectioned(section, siblings)


def profile_from_env(variable: str | None, environ: Mapping[str, str]) -> str | None:
    """The active profile named by ``variable``: trimmed, empty meaning none, never a path."""
    if variable is None:
        return None
    profile = environ.get(variable, "").strip()
    if any(bad in profile for bad in ("/", "\\", "..", "\x00")):
        raise EnvError(
            f"the profile variable {variable} must name a profile, not a path (no `/`, `\\`, "
            "`..` or NUL); set it to a plain name such as `production`",
            origin=Origin.env(variable),
        )
    return profile or None


def profile_variant(path: Path, profile: str) -> Path | None:
    """``dir/config.toml`` → ``dir/config.<profile>.toml`` (under ``.age`` for encrypted)."""
    name = path.name
    encrypted = name.endswith(".age")
    base = name[:-4] if encrypted else name
    stem, dot, extension = base.rpartition(".")
    if not dot or not stem:
        return None
    variant = f"{stem}.{profile}.{extension}" + (".age" if encrypted else "")
    return path.with_name(variant)


def expand_home(directory: Path, environ: Mapping[str, str]) -> Path | None:
    """Expand a leading ``~`` through HOME (or USERPROFILE); ``None`` when it cannot be."""
    text = str(directory)
    if not text.startswith("~"):
        return directory
    rest = text[1:]
    if rest and rest[0] not in "/\\":
        return None
    home = environ.get("HOME") or environ.get("USERPROFILE")
    if not home:
        return None
    return Path(home + rest)


def read_secrets_dir(
    directory: Path, nest: str, allow_external_symlinks: bool
) -> Iterator[tuple[Path, list[str], str]]:
    """Yield ``(file, path segments, text)`` for each secret file, in sorted order.

    One directory level; directories (Kubernetes ``..data``) and dangling links are skipped;
    a link resolving outside the directory is refused unless allowed. Values are strings
    with exactly one trailing newline removed: secrets are never typed.
    """
    origin = Origin.file(str(directory))
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise IoError(
            f"the secrets dir {directory} is not a directory; name a directory of files",
            origin=origin,
        ) from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise IoError(
            f"the secrets dir {directory} cannot be read ({reason}); check its permissions",
            origin=origin,
        ) from None
    root = os.path.realpath(directory)
    for entry in entries:
        file = Path(entry.path)
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if not os.path.exists(target):
                continue
            inside = os.path.commonpath([root, target]) == root
            if not inside and not allow_external_symlinks:
                raise IoError(
                    f"the secret file {file} is a symlink that resolves outside {directory}; "
                    "point it inside the directory, or set allow_external_symlinks",
                    origin=Origin.file(str(file)),
                )
        if not entry.is_file(follow_symlinks=True):
            continue
        segments = entry.name.replace(nest, ".").split(".")
        if any(segment == "" for segment in segments):
            continue
        text = read_text_file(file)
        if text is None:
            continue
        if text.endswith("\r\n"):
            text = text[:-2]
        elif text.endswith("\n"):
            text = text[:-1]
        yield file, segments, text


def read_dotenv(path: Path) -> list[tuple[str, str, int]] | None:
    """The ``(name, raw value, line number)`` entries of a ``.env`` file; ``None`` if missing.

    One ``KEY=value`` per line, ``export `` allowed, ``#`` comments and blank lines skipped,
    split on the first ``=``, value trimmed and one matching pair of quotes removed; no
    interpolation. A malformed line is reported by number only.
    """
    text = read_text_file(path)
    if text is None:
        return None
    entries: list[tuple[str, str, int]] = []
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, equals, value = line.partition("=")
        name = name.strip()
        if not equals or not name:
            raise ParseError(
                f"line {number} of {path} is not `NAME=value`; write one assignment per line",
                origin=Origin.file(str(path)),
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        entries.append((name, value, number))
    return entries


class EnvMatcher:
    """Turns variable names under ``{prefix}{KEY}_`` into section paths (env and ``.env``).

    The prefix is compared ASCII case-insensitively (non-ASCII names are compared by
    characters, so they never crash), the rest is split on ``nest``, each segment trimmed
    and ASCII-lowercased; a name with an empty segment is skipped.
    """

    __slots__ = ("allow_empty", "length", "nest", "prefix", "strict", "upper")

    def __init__(
        self, prefix: str, key: str, nest: str, *, allow_empty: bool, strict: bool
    ) -> None:
        if not nest:
            raise TypeMismatchError(
                "the nesting separator is empty; use a separator such as `__`",
            )
        self.prefix = f"{prefix}{key.upper()}_" if key else prefix
        self.upper = self.prefix.translate(_ASCII_UPPER)
        self.length = len(self.prefix)
        self.nest = nest
        self.allow_empty = allow_empty
        self.strict = strict

    @property
    def pattern(self) -> str:
        """The variables this layer reads, as shown in diagnostics (``APP_DB_*``)."""
        return f"{self.prefix}*"

    def segments(self, name: str) -> list[str] | None:
        """The section path a variable name maps to, or ``None`` when it is not ours."""
        if name[:1].isspace() or name[-1:].isspace():
            name = name.strip()
        if len(name) <= self.length:
            return None
        head = name[: self.length]
        if head != self.prefix:
            if head.isascii():
                if head.upper() != self.upper:
                    return None
            elif head.translate(_ASCII_UPPER) != self.upper:
                return None
        segments = [
            segment.strip().translate(_ASCII_LOWER)
            for segment in name[self.length :].split(self.nest)
        ]
        if any(segment == "" for segment in segments):
            return None
        return segments

    def typed(self, name: str, raw: str, origin: Origin) -> tuple[bool, Value]:
        """``(present, value)`` for a raw variable value under the blank and strict rules."""
        stripped = raw.strip()
        if not stripped and not self.allow_empty:
            return False, None
        if self.strict and stripped.translate(_ASCII_LOWER) in STRICT_ENV_WORDS:
            raise EnvError(
                f"{name} holds a word strict_env refuses (yes, no, on, off, null, nil or "
                "none); write true or false, or unset the variable",
                origin=origin,
            )
        return True, type_text(raw)

    def build(self, entries: list[tuple[list[str], Value, str]]) -> tuple[Document, dict[str, str]]:
        """Build a table from ``(segments, value, variable)``; the deeper name always wins.

        Entries are placed shallowest first, so a scalar in the way of a deeper name is
        replaced by a table and a table is never replaced by a scalar. A name of more than
        :data:`~dynconf.limits.MAX_DEPTH` segments is refused, as a parser refuses a key.
        """
        for segments, _, variable in entries:
            if len(segments) > MAX_DEPTH:
                raise LimitError(
                    f"{variable} nests past the limit of {MAX_DEPTH} levels (more than "
                    f"{MAX_DEPTH} `{self.nest}`-separated segments); shorten the name",
                    path=".".join(segments[: MAX_DEPTH + 1]),
                    origin=Origin.env(variable),
                )
        entries.sort(key=lambda entry: (len(entry[0]), entry[2]))
        table: Document = {}
        variables: dict[str, str] = {}
        for segments, value, variable in entries:
            node = table
            for segment in segments[:-1]:
                child = node.get(segment)
                if not isinstance(child, dict):
                    child = {}
                    node[segment] = child
                node = child
            last = segments[-1]
            if isinstance(node.get(last), dict) and not isinstance(value, dict):
                continue
            node[last] = value
            variables[".".join(segments)] = variable
        return table, variables
