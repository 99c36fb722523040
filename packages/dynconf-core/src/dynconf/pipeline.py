"""The one path from a fetched document to published files, shared by every caller.

fetch → resolve → validate → render → publish, for a set of outputs cut from one fetch,
all or none: :func:`prepare` does everything that can fail on the document's account
(size ceiling, parse, sections, schema, every output rendered to bytes) and writes
nothing; :func:`publish` then writes each file (history, atomic rename) and the meta
files. A failure in the third output therefore leaves the first two untouched, and a
failed render leaves the last good files serving.

The agent, the operator, the node agent and ``dynconf render`` call these functions; none
of them re-implements a step. Callers with an async loop run :func:`render_once` (or
``fetch`` + :func:`prepare`) in a worker thread.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dynconf.document import Document, Value, walk_leaves
from dynconf.errors import BackendError, DynconfError, InvalidError, MissingError, Origin
from dynconf.formats import parse_text
from dynconf.publish import (
    MAX_HISTORY,
    MetaInfo,
    Published,
    digest,
    publish_file,
    read_published,
    write_meta,
)
from dynconf.render import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    OutputSpec,
    check_size,
    render_output,
    select_section,
)
from dynconf.stores import Absent, Fetched, RemoteSource

__all__ = [
    "Prepared",
    "PublishResult",
    "RenderRequest",
    "entry_value",
    "env_entries",
    "fetch_present",
    "log_rendered",
    "prepare",
    "publish",
    "publish_empty",
    "render_once",
    "verbatim_entries",
]


@dataclass(frozen=True)
class RenderRequest:
    """What to render from each fetched document.

    The first output is the main one (its fingerprint is the one applications
    acknowledge; its section is what the schema checks). ``history`` keeps replaced
    generations of every output (0 to 10); ``meta`` writes a meta file beside each.
    ``root`` is the trusted directory every output lies under (a volume whose inside
    someone else can write): publishing walks from it without following a symlink and
    creates the directories below it. Without it each output's own directory is its root.
    """

    outputs: list[OutputSpec]
    schema: Path | None = None
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    history: int = 0
    meta: bool = False
    root: Path | None = None

    def __post_init__(self) -> None:
        if not self.outputs:
            raise BackendError("a render needs at least one output file; give --out")
        paths = [spec.path for spec in self.outputs]
        if len(set(paths)) != len(paths):
            raise BackendError(
                "two outputs name the same file; give each output its own path",
                origin=Origin.file(str(paths[0])),
            )
        if self.root is not None and not all(
            path != self.root and path.is_relative_to(self.root) for path in paths
        ):
            raise BackendError(
                "every output must lie inside the volume it is published in",
                origin=Origin.file(str(self.root)),
            )
        if not 0 <= self.history <= MAX_HISTORY:
            raise BackendError(f"--history keeps 0 to {MAX_HISTORY} generations")
        if self.max_document_bytes < 1:
            raise BackendError("--max-document-bytes must be a positive number of bytes")

    @property
    def main(self) -> OutputSpec:
        return self.outputs[0]


@dataclass(frozen=True)
class Prepared:
    """Every output of one fetch, rendered and validated, not yet written.

    ``outputs`` maps each output path to its bytes, in request order (the main output
    first). ``fingerprint`` is ``sha256:`` + hex of the main output's bytes — the digest
    the meta file records and an application acknowledges.
    """

    outputs: dict[Path, bytes]
    fingerprint: str
    revision: str | None = None
    document: Document = field(default_factory=dict, repr=False, compare=False)
    """The parsed document the outputs were cut from (never logged)."""

    def unchanged_from(self, previous: Prepared | None) -> bool:
        """Whether every output's bytes equal what ``previous`` held (nothing to write)."""
        return previous is not None and previous.outputs == self.outputs


@dataclass(frozen=True)
class PublishResult:
    """What one publish wrote."""

    files: list[Published]
    fingerprint: str
    revision: str | None
    rendered_at: int

    @property
    def paths(self) -> list[Path]:
        return [published.path for published in self.files]

    @property
    def size(self) -> int:
        return sum(published.size for published in self.files)


def prepare(fetched: Fetched, request: RenderRequest, *, origin: Origin | None = None) -> Prepared:
    """Check, parse, validate and render every output of ``request``; write nothing.

    ``origin`` names the store for parse errors (default: a remote origin without a
    name). The schema file, like a template file, is re-read on every call. Raises the
    engine's errors: :class:`InvalidError` for the size ceiling, a schema violation or a
    template error, :class:`ParseError`, :class:`MissingError` for a missing section.

    It raises nothing else: whatever a hostile document provokes below (a ``RecursionError``
    from nesting, a ``ValueError`` from an integer past Python's digit limit, a
    ``UnicodeEncodeError`` from a lone surrogate, a ``MemoryError``) becomes one
    :class:`InvalidError` naming the kind of failure, never the document's text — so every
    caller that serves other documents treats it as this document's failed render.
    """
    try:
        return _prepare(fetched, request, origin)
    except DynconfError:
        raise
    except Exception as error:  # the document's failure, never the process's
        raise InvalidError(
            f"the document cannot be rendered ({type(error).__name__}); it is too deep, too "
            "large or not representable — fix it in the store; the last good file stays",
            origin=origin,
        ) from None


def _prepare(fetched: Fetched, request: RenderRequest, origin: Origin | None) -> Prepared:
    check_size(fetched.text, request.max_document_bytes)
    document = parse_text(fetched.text, fetched.format, origin or Origin.remote("the store"))
    if request.schema is not None:
        # jsonschema is imported only by a render that has a schema: most never do
        from dynconf.schema import check_schema, load_schema

        schema = load_schema(request.schema)
        check_schema(
            select_section(document, request.main.section),
            schema,
            origin=Origin.file(str(request.schema)),
        )
    outputs = {spec.path: render_output(document, spec) for spec in request.outputs}
    return Prepared(
        outputs=outputs,
        fingerprint=digest(outputs[request.main.path]),
        revision=fetched.revision,
        document=document,
    )


def log_rendered(log: logging.Logger, result: PublishResult, prepared: Prepared) -> None:
    """The one ``rendered`` line a publish logs, in every program that publishes (the agent,
    ``dynconf render``): names, sizes and digests, never a value."""
    log.info(
        "rendered",
        extra={
            "files": [str(path) for path in result.paths],
            "bytes": result.size,
            "fingerprint": prepared.fingerprint,
            "revision": prepared.revision,
        },
    )


def publish(
    prepared: Prepared,
    request: RenderRequest,
    *,
    now: int | None = None,
    after_files: Callable[[], None] | None = None,
) -> PublishResult:
    """Write every output (history, then atomic rename, each in turn), then the meta files.

    ``after_files`` runs once every document is renamed and before any meta file is
    written — where the agent fires its notify hook. A failed write raises
    :class:`IoError`; outputs already renamed stay (each write is its own rename).
    """
    stamp = now if now is not None else int(time.time())
    written = [
        publish_file(
            spec.path,
            prepared.outputs[spec.path],
            mode=spec.mode,
            history=request.history,
            now=stamp,
            root=request.root,
        )
        for spec in request.outputs
    ]
    if after_files is not None:
        after_files()
    if request.meta:
        meta = MetaInfo(revision=prepared.revision, rendered_at=stamp)
        written = [
            _with_meta(
                published,
                write_meta(
                    spec.path, published.fingerprint, meta, mode=spec.mode, root=request.root
                ),
            )
            for spec, published in zip(request.outputs, written, strict=True)
        ]
    return PublishResult(
        files=written,
        fingerprint=prepared.fingerprint,
        revision=prepared.revision,
        rendered_at=stamp,
    )


def _with_meta(published: Published, meta_file: Path) -> Published:
    return Published(
        path=published.path,
        fingerprint=published.fingerprint,
        size=published.size,
        history_entry=published.history_entry,
        meta_file=meta_file,
    )


def publish_empty(
    request: RenderRequest, *, only_missing: bool = False, now: int | None = None
) -> list[Path]:
    """Write empty content to the outputs (``--on-delete remove``; ``best-effort`` start).

    With ``only_missing``, an output that already holds something is left alone. Same
    modes and history as a render; no meta file (there is no render to describe).
    """
    paths: list[Path] = []
    for spec in _outputs_to_empty(request, only_missing):
        publish_file(
            spec.path, b"", mode=spec.mode, history=request.history, now=now, root=request.root
        )
        paths.append(spec.path)
    return paths


def _outputs_to_empty(request: RenderRequest, only_missing: bool) -> list[OutputSpec]:
    if not only_missing:
        return list(request.outputs)
    return [spec for spec in request.outputs if not read_published(spec.path, root=request.root)]


def render_once(source: RemoteSource, request: RenderRequest) -> PublishResult:
    """Fetch once, render every output, publish: the init container's whole job.

    Raises :class:`MissingError` when the store holds no document.
    """
    origin = Origin.remote(source.describe())
    return publish(prepare(fetch_present(source), request, origin=origin), request)


def fetch_present(source: RemoteSource) -> Fetched:
    """Fetch once; a store answering that the document is gone is a :class:`MissingError`.

    The one-shot callers (the init container, the operator) have no ``--on-delete`` policy
    to apply, so an absent document is simply a failed render.
    """
    answer = source.fetch()
    if isinstance(answer, Absent):
        raise MissingError(
            "the document is not in the store; write it there first or fix --key",
            origin=Origin.remote(source.describe()),
        )
    return answer


# -- entries: one key per leaf, for publishers whose unit is a key/value map -----------------

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def entry_value(value: Value) -> str:
    """A leaf as an entry's text: strings bare, null empty, anything else compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def verbatim_entries(document: Mapping[str, Value]) -> dict[str, str]:
    """Every leaf of ``document`` keyed by its dotted path, spelled exactly as in the store.

    For consumers whose key names are someone else's contract (``postgres-password`` stays
    ``postgres-password``). The ``$schema`` annotation is not a leaf of the configuration.
    """
    return {path: entry_value(value) for path, value in walk_leaves(document) if path != "$schema"}


def env_entries(document: Mapping[str, Value]) -> dict[str, str]:
    """Every leaf keyed in the environment dialect: dotted path, non-alphanumerics → ``_``,
    upper-cased (``db.pool_size`` → ``DB_POOL_SIZE``).

    Two leaves that spell the same variable (``a.b`` and ``a_b``) are refused rather than
    letting one silently shadow the other; the message names both paths, never a value.
    """
    entries: dict[str, str] = {}
    seen: dict[str, str] = {}
    for path, value in walk_leaves(document):
        if path == "$schema":
            continue
        name = _NOT_ALNUM.sub("_", path).upper()
        if name in seen:
            raise InvalidError(
                f"the leaves `{seen[name]}` and `{path}` both become the variable {name}; "
                "rename one of them in the store",
                path=path,
            )
        seen[name] = path
        entries[name] = entry_value(value)
    return entries
