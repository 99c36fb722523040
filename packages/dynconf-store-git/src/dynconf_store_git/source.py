"""The git source: one file of one ref's tree, watched by asking where the ref points.

``fetch`` asks the remote where the ref points (``git ls-remote <url> <ref>``; nothing for
``commit:``), transfers that commit at depth 1 into the cache's bare object database only
when it is not already there, and reads the file from the commit's tree in process
(GitPython over ``git cat-file --batch``: no checkout, no work tree). The commit id is the revision;
a file that is not in the tree is :data:`ABSENT`.

``changes`` asks the same cheap question each ``interval`` and reads (transferring) only
when the ref moved; the first answer primes and is not delivered. A document identical to
the last one (a commit that touched other files) is not delivered either. A failed check is
reported and retried next interval; a refused credential is raised, and that exact
credential is never sent again by this source.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from dynconf.errors import AuthError, DynconfError, Origin, RemoteError
from dynconf.sources import SourceSupport
from dynconf.stores import ABSENT, Absent, Fetched, report_watching, same_document
from dynconf_store_git.cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_PACKS, CloneDir
from dynconf_store_git.endpoint import Ref, RefKind, shown_endpoint
from dynconf_store_git.plugin import GitStoreType
from dynconf_store_git.transport import GitRunner

if TYPE_CHECKING:
    from git import Repo
    from git.objects import Blob, Tree

__all__ = ["DEFAULT_MAX_FILE_BYTES", "FailureSink", "GitSource"]

DEFAULT_MAX_FILE_BYTES: Final = 1024 * 1024
"""The largest file the store reads (checked from the object header, before reading)."""
HEAD_REF: Final = "refs/dynconf/head"
_MAX_LINKS: Final = 8
_TREE, _BLOB, _LINK, _GITLINK = 0o04, 0o10, 0o12, 0o16

FailureSink = Callable[[DynconfError], None]

log = logging.getLogger("dynconf.store.git")


class GitSource(SourceSupport):
    """A blocking :class:`~dynconf.stores.RemoteSource` over one file in a git repository."""

    reports_watching = True

    capability = GitStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "git watch check failed; retrying next interval"

    def __init__(
        self,
        runner: GitRunner,
        clone: CloneDir,
        ref: Ref,
        key: str,
        format_name: str,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_packs: int = DEFAULT_MAX_PACKS,
        max_cache_bytes: int = DEFAULT_MAX_BYTES,
        on_failure: FailureSink | None = None,
    ) -> None:
        self._runner = runner
        self._clone = clone
        self._ref = ref
        self._key = key
        self._format = format_name
        self._max_file_bytes = max_file_bytes
        self._max_packs = max_packs
        self._max_cache_bytes = max_cache_bytes
        self._shown = shown_endpoint(runner.endpoint.url)
        self._commit: str | None = None
        self._refused: str | None = None
        self.on_failure = on_failure
        self.connected = False
        """True while the watch's last check reached the remote (``watch_connected``)."""
        self.transfers = 0
        """How many fetches moved objects (the bench and the tests count them)."""

    # ------------------------------------------------------------------ protocol
    def describe(self) -> str:
        if self._commit is None:
            return f"git {self._shown} {self._ref}:{self._key}"
        return f"git {self._shown}@{self._commit[:12]}:{self._key}"

    @property
    def error_subject(self) -> str:
        """Git errors name the file after the description: ``<describe()>: <key> …``."""
        return f"{self.describe()}: {self._key}"

    def fetch(self) -> Fetched | Absent:
        """Read the file at the ref's current commit: its document, or ABSENT."""
        with self._clone.locked():
            return self._read(self._remote_commit())

    def check(self) -> str:
        """The commit the ref points at now (the watch's cheap question; no transfer)."""
        with self._clone.locked():
            return self._remote_commit()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield each new document (or ABSENT) when the ref moves, asking every ``interval``."""
        seen: str | None = None
        last: Fetched | Absent | None = None
        while not stop():
            try:
                with self._clone.locked():
                    commit = self._remote_commit()
                    self.connected = True
                    if commit != seen:
                        answer = self._read(commit)
                        seen = self._commit or commit
                    else:
                        answer = None
            except AuthError:
                self.connected = False
                raise
            except DynconfError as exc:
                self.connected = False
                self.report(exc)
            else:
                report_watching(self)
                if answer is not None:
                    if last is not None and not same_document(answer, last):
                        last = answer
                        yield answer
                    elif last is None:
                        last = answer
            if self.pause(interval, stop):
                return

    def close(self) -> None:
        """Nothing to release: every call is its own process and the cache stays for reuse."""
        self.connected = False

    # ------------------------------------------------------------------ the cheap question
    def _secret(self) -> str | None:
        """The credential as it is now; refuses, without I/O, one the server refused before."""
        credential = self._runner.credential
        secret = credential.secret(self.describe())
        if self._refused is not None and credential.fingerprint(secret) == self._refused:
            raise AuthError(
                f"{self.describe()}: this credential was refused before and is not sent again; "
                "replace it (rotate the token or key) or rebuild the source",
                origin=Origin.remote(self.describe()),
            )
        return secret

    def _call(self, args: list[str], what: str) -> str:
        secret = self._secret()
        self._runner.warn_skip_verify()
        try:
            outcome = self._runner.run(args, secret, what=what)
        except AuthError:
            self._refused = self._runner.credential.fingerprint(secret)
            raise
        if outcome.status != 0:
            raise self._runner.remote_error(what, outcome)
        return outcome.stdout

    def _remote_commit(self) -> str:
        if self._ref.kind is RefKind.COMMIT:
            return self._ref.name
        name = self._ref.remote_name
        out = self._call(
            ["ls-remote", "--", self._runner.endpoint.url, name, f"{name}^{{}}"],
            "asking where the ref points (ls-remote)",
        )
        found: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, refname = line.partition("\t")
            found[refname.strip()] = sha.strip()
        commit = found.get(f"{name}^{{}}") or found.get(name)
        if not commit:
            raise RemoteError(
                f"{self.describe()}: the repository has no {self._ref}; push it, or fix --ref",
                origin=Origin.remote(self.describe()),
            )
        return commit

    # ------------------------------------------------------------------ transfer and read
    def _ensure_repo(self) -> None:
        if (self._clone.repo / "HEAD").exists():
            return
        self._clone.prepare()
        self._call(["init", "--quiet", "--bare", str(self._clone.repo)], "preparing the cache")

    def _has(self, commit: str) -> bool:
        repo = self._open()
        try:
            # info() asks cat-file, which sees packs; has_object() looks at loose objects only
            repo.odb.info(bytes.fromhex(commit))
            return True
        except ValueError:
            return False
        finally:
            repo.close()

    def _transfer(self, commit: str) -> None:
        """Fetch one commit at depth 1 (by ref name, so a ref that moved since is followed)."""
        if self._clone.over_ceiling(self._max_packs, self._max_cache_bytes):
            log.info(
                "store_cache_compacted",
                extra={
                    "detail": "the cache is over its ceiling; re-cloning",
                    "store": self.describe(),
                },
            )
            self._clone.empty()
        self._ensure_repo()
        git_dir = f"--git-dir={self._clone.repo}"
        if self._ref.kind is RefKind.COMMIT:
            refspec = commit
        else:
            refspec = f"+{self._ref.remote_name}:{HEAD_REF}"
        self._call(
            [git_dir, "fetch", "--quiet", "--depth=1", "--no-tags", "--no-write-fetch-head",
             "--", self._runner.endpoint.url, refspec],
            "transferring the commit (fetch --depth 1)",
        )  # fmt: skip
        self.transfers += 1

    def _read(self, commit: str) -> Fetched | Absent:
        self._ensure_repo()
        if not self._has(commit):
            self._transfer(commit)
            if self._ref.kind is not RefKind.COMMIT:
                commit = self._local_head()
        answer = self._read_file(commit)
        self._commit = commit
        if isinstance(answer, Fetched):
            return Fetched(text=answer.text, format=answer.format, revision=commit)
        return answer

    def _local_head(self) -> str:
        repo = self._open()
        try:
            return str(repo.commit(HEAD_REF).hexsha)
        except (ValueError, LookupError):
            raise RemoteError(
                f"{self.describe()}: the fetch brought no commit; the ref may have been "
                "deleted meanwhile",
                origin=Origin.remote(self.describe()),
            ) from None
        finally:
            repo.close()

    def _open(self) -> Repo:
        """The cache's object database, read through ``git cat-file --batch`` (GitPython).

        The reading processes get the same isolation as the network calls: this repository
        named explicitly, no system or global configuration.
        """
        from git import Repo

        repo = Repo(str(self._clone.repo))
        repo.git.update_environment(
            GIT_DIR=str(self._clone.repo),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_COUNT="0",
        )
        return repo

    def _read_file(self, commit: str) -> Fetched | Absent:
        repo = self._open()
        try:
            try:
                tree = repo.commit(commit).tree
            except (ValueError, LookupError):
                raise self.remote_error(f"the commit {commit[:12]} is not in the cache") from None
            blob = self._resolve(tree, self._key)
            if blob is None:
                return ABSENT
            if blob.size > self._max_file_bytes:
                raise self.remote_error(
                    f"the file is {blob.size} bytes, over the {self._max_file_bytes}-byte "
                    "ceiling; split it, or raise max_bytes"
                )
            data = blob.data_stream.read()
        finally:
            repo.close()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.remote_error("the file is not UTF-8 text; commit it as UTF-8") from None
        return Fetched(text=text, format=self._format)

    def _resolve(self, root: Tree, key: str) -> Blob | None:
        """Walk ``key`` from the tree's root, following symlinks that stay inside the tree."""
        pending = key.split("/")
        done: list[str] = []
        current = root
        links = 0
        while pending:
            name = pending.pop(0)
            entry = _entry(current, name)
            if entry is None:
                return None
            kind = entry.mode >> 12
            if kind == _LINK:
                links += 1
                if links > _MAX_LINKS:
                    raise self.remote_error(
                        "follows more than 8 symlinks; point the key at the file"
                    )
                target = entry.data_stream.read().decode("utf-8", "replace")
                if target.startswith("/") or "\x00" in target:
                    raise self._refuse_link()
                joined = posixpath.normpath(posixpath.join(*done, target))
                if joined in (".", "..") or joined.startswith("../"):
                    raise self._refuse_link()
                pending = [p for p in joined.split("/") if p] + pending
                done, current = [], root
                continue
            if kind == _GITLINK:
                raise self.remote_error(
                    "is inside a submodule; the store reads this repository only"
                )
            if kind == _TREE:
                done.append(name)
                current = entry
                if not pending:
                    raise self.remote_error(
                        "names a folder; name the one file holding the document"
                    )
                continue
            if pending:  # a file where the key needs a folder: the path is not in the tree
                return None
            return entry  # type: ignore[no-any-return]
        return None

    # ------------------------------------------------------------------ reporting
    def _refuse_link(self) -> RemoteError:
        return self.remote_error(
            "is reached through a symlink that points outside the repository; the store "
            "never reads outside the tree"
        )

    def __repr__(self) -> str:
        return f"GitSource({self.describe()!r})"


def _entry(tree: Tree, name: str):  # type: ignore[no-untyped-def]
    for item in tree:
        if item.name == name:
            return item
    return None
