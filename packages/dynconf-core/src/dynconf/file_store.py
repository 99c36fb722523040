"""The embedded ``file`` store: a local document, watched through file events.

It is the reference implementation of the store contract (validate, describe, build,
fetch answering Fetched or ABSENT, a push watch that primes silently and yields each
change) and the store the Quick start uses, so everything downstream of a store can be
exercised without a server.

The key is the document's path. With an endpoint, the endpoint is a base directory and
the key must stay inside it (absolute keys and ``..`` are refused), which is how a
deployment confines which files a render may read.
"""

from __future__ import annotations

import hashlib
import queue
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final

from dynconf.errors import IoError, Origin, Refusal, RemoteError
from dynconf.stores import (
    ABSENT,
    Absent,
    AuthMethod,
    Fetched,
    StoreSpec,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
    same_document,
)
from dynconf.watch import FileWatch

__all__ = ["FILE_STORE", "FileSource", "FileStoreType"]


class FileSource:
    """Reads one local document; ``changes`` follows it through directory events."""

    capability = WatchCapability.PUSH

    def __init__(self, path: Path, format_name: str) -> None:
        self._path = path
        self._format = format_name

    @property
    def path(self) -> Path:
        return self._path

    def describe(self) -> str:
        return f"file {self._path}"

    def fetch(self) -> Fetched | Absent:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return ABSENT
        except IsADirectoryError:
            raise IoError(
                f"{self._path} is a directory; name the document file as the key",
                origin=Origin.file(str(self._path)),
            ) from None
        except OSError as exc:
            raise IoError(
                f"{self._path} cannot be read ({exc.strerror}); check its permissions",
                origin=Origin.file(str(self._path)),
            ) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise RemoteError(
                f"{self._path} is not UTF-8 text; save it as UTF-8",
                origin=Origin.file(str(self._path)),
            ) from None
        revision = hashlib.sha256(data).hexdigest()[:12]
        return Fetched(text=text, format=self._format, revision=revision)

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield the document after each settled edit, or ABSENT once it is removed.

        The first observation primes the marker and yields nothing; a burst of events that
        leaves the bytes as they were yields nothing either.
        """
        settled: queue.Queue[Path] = queue.Queue()
        target = self._path.resolve(strict=False)

        def relevant(path: Path) -> bool:
            return (
                path == self._path
                or path.name.startswith("..")
                or (path.resolve(strict=False) == target)
            )

        watch = FileWatch(
            [self._path.parent],
            relevant,
            settled.put,
            debounce=min(0.05, max(interval, 0.001)),
            name="dynconf-file-store",
        ).start()
        last = self.fetch()
        try:
            while not stop():
                try:
                    settled.get(timeout=0.1)
                except queue.Empty:
                    continue
                answer = self.fetch()
                if same_document(answer, last):
                    continue
                last = answer
                yield answer
        finally:
            watch.stop()

    def close(self) -> None:
        """Nothing to release: every read opens and closes the file."""


class FileStoreType(StoreTypeBase):
    """The ``file`` store type (no auth, no TLS: the filesystem's permissions decide)."""

    name = "file"
    capability = WatchCapability.PUSH
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth = None

    def credential_hint(self) -> str:
        return "the filesystem's permissions"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        if not spec.key:
            refusals.append(Refusal("key", "the file store needs {field}",
                                    "the path of the document"))  # fmt: skip
        elif format_from_key(spec.key) is None and "format" not in spec.extra:
            refusals.append(
                Refusal("key", f"the key {spec.key} has no extension naming a format",
                        "name the file with .json, .toml, .yaml, .ini, .properties or .env",
                        words=True)
            )  # fmt: skip
        if spec.endpoint and spec.key:
            key = Path(spec.key)
            if key.is_absolute() or ".." in key.parts:
                refusals.append(
                    Refusal("key", "with an endpoint (a base directory) the key must be a "
                            "relative path without `..`", "name a file inside the directory",
                            words=True)
                )  # fmt: skip
        if spec.tls.configured:
            refusals.append(
                Refusal("tls", "the file store takes no TLS settings",
                        "remove {field:tls.ca_file}/{field:tls.cert_file+tls.key_file}",
                        words=True)
            )  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        return f"file {self._path(spec)}"

    def build(self, spec: StoreSpec) -> FileSource:
        format_name = spec.extra.get("format") or format_from_key(spec.key) or "json"
        return FileSource(self._path(spec), format_name)

    @staticmethod
    def _path(spec: StoreSpec) -> Path:
        return Path(spec.endpoint) / spec.key if spec.endpoint else Path(spec.key)


FILE_STORE: Final = FileStoreType()
