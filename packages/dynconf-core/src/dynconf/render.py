"""Rendering: one output's bytes from a resolved document.

Without a template the document is written verbatim in the format its output extension
names (or the spec's ``format``), through the format plugin's emitter: same keys, same
shapes, only the spelling changes. A template owns the bytes instead, which frees the
extension (``.env``, ``.conf``). A template given as a file is re-read at every render, so
editing it takes effect on the next render with no restart.

Nothing here writes a file; :mod:`dynconf.publish` does that, after every output of a set
rendered (see :mod:`dynconf.pipeline`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dynconf.document import Document, Value, get_path
from dynconf.errors import (
    BackendError,
    IoError,
    MissingError,
    Origin,
    OversizeError,
    TypeMismatchError,
)
from dynconf.limits import MAX_DOCUMENT_BYTES
from dynconf.plugins import FormatType, default_registry

__all__ = [
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "SCHEMA_KEY",
    "OutputSpec",
    "TemplateSource",
    "check_byte_count",
    "check_size",
    "output_format",
    "render_output",
    "select_section",
]

DEFAULT_MAX_DOCUMENT_BYTES: Final = MAX_DOCUMENT_BYTES
"""The engine's document size ceiling (:data:`dynconf.limits.MAX_DOCUMENT_BYTES`)."""

SCHEMA_KEY: Final = "$schema"
"""A top-level key that annotates the document for editors and is never rendered."""


@dataclass(frozen=True, slots=True)
class TemplateSource:
    """A template: inline text, or a file that is re-read at every render."""

    text: str | None = None
    path: Path | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.path is None):
            raise BackendError(
                "a template is either inline text or a file, exactly one of the two; "
                "give --template or --template-inline, not both"
            )

    @classmethod
    def inline(cls, text: str) -> TemplateSource:
        return cls(text=text)

    @classmethod
    def file(cls, path: str | os.PathLike[str]) -> TemplateSource:
        return cls(path=Path(path))

    @property
    def origin(self) -> Origin:
        return Origin.file(str(self.path)) if self.path is not None else Origin.inline()

    def read(self) -> str:
        """The template text as of now (a file is read again on every call)."""
        if self.text is not None:
            return self.text
        assert self.path is not None
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise IoError(
                "the template file does not exist; mount it or fix the --template path",
                origin=self.origin,
            ) from None
        except UnicodeDecodeError:
            raise IoError(
                "the template file is not UTF-8 text; save it as UTF-8", origin=self.origin
            ) from None
        except OSError as exc:
            raise IoError(
                f"the template file cannot be read ({exc.strerror}); check its permissions",
                origin=self.origin,
            ) from None


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One file to render: where, which section, which mode, and how.

    ``section`` is a dotted path into the fetched document (``None``: the whole document,
    without a top-level ``$schema``). ``mode`` is the file's permission bits (``None``:
    what the process umask gives). ``format`` names a format instead of the extension;
    ``template`` renders through a template instead of a format.
    """

    path: Path
    section: str | None = None
    mode: int | None = None
    template: TemplateSource | None = None
    format: str | None = None


def check_size(text: str | bytes, ceiling: int = DEFAULT_MAX_DOCUMENT_BYTES) -> None:
    """Refuse a fetched document larger than ``ceiling`` bytes, before it is parsed."""
    check_byte_count(len(text.encode("utf-8")) if isinstance(text, str) else len(text), ceiling)


def check_byte_count(size: int, ceiling: int = DEFAULT_MAX_DOCUMENT_BYTES) -> None:
    """Refuse a document of ``size`` bytes past ``ceiling``: the one refusal, whether the
    engine measured the fetched text or a store learned the size before reading the value
    (:attr:`dynconf.stores.StoreSpec.max_bytes`), so both read alike."""
    if size > ceiling:
        raise OversizeError(
            f"the store answered with {size} bytes, past the {ceiling}-byte ceiling; raise it "
            "with --max-document-bytes if the document is meant to be that large"
        )


def _kind(value: Value) -> str:
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    return "a scalar"


def select_section(document: Document, section: str | None) -> Document:
    """The table an output renders: the section at a dotted path, or the whole document.

    Raises :class:`MissingError` naming a missing section and :class:`TypeMismatchError`
    when the path holds something other than a table.
    """
    if section is None or section == "":
        return {key: value for key, value in document.items() if key != SCHEMA_KEY}
    try:
        found = get_path(document, section)
    except KeyError:
        raise MissingError(
            f"the section `{section}` is not in the document; fix the section name or add it "
            "to the document in the store",
            path=section,
        ) from None
    if not isinstance(found, Mapping):
        raise TypeMismatchError(
            f"the section `{section}` is {_kind(found)}, not a table; name a table to render",
            path=section,
        )
    return dict(found)


def output_format(spec: OutputSpec) -> FormatType:
    """The format an output without a template is written in, able to write."""
    registry = default_registry()
    if spec.format is not None:
        found = registry.format_named(spec.format)
    else:
        suffix = spec.path.suffix
        candidate = registry.format_for_extension(suffix) if suffix else None
        if candidate is None or candidate.dump is None:
            known = ", ".join(
                f".{ext}"
                for ext, name in sorted(registry.extensions.items())
                if registry.formats[name].dump is not None
            )
            raise BackendError(
                f"the output {spec.path.name} has no extension a format writes; use one of "
                f"{known}, or render it through a template, which frees the extension",
                origin=Origin.file(str(spec.path)),
            )
        found = candidate
    if found.dump is None:
        raise BackendError(
            f"the {found.name} format is read-only here; render to another format or through "
            "a template",
            origin=Origin.file(str(spec.path)),
        )
    return found


def render_output(document: Document, spec: OutputSpec) -> bytes:
    """The bytes of one output: ``spec.section`` of ``document``, formatted or templated.

    ``document`` is the whole fetched document; the section is cut here. Raises the
    engine's errors (missing section, a value the format cannot hold, a template error);
    writes nothing.
    """
    table = select_section(document, spec.section)
    if spec.template is not None:
        source = spec.template.read()
        # jinja2 is imported only by a render that has a template: most never do
        from dynconf.template import render_template

        return render_template(source, table, origin=spec.template.origin).encode("utf-8")
    fmt = output_format(spec)
    assert fmt.dump is not None
    return fmt.dump(table).encode("utf-8")
