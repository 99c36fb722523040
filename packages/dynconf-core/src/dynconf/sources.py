"""What every store source does the same way: health hooks, watch waits, error wording.

Nine stores were written in parallel and each grew its own copy of four small things: a
``_report`` that logs one ``store_watch_failed`` line and calls ``on_failure``, a
``_pause`` that sleeps in short slices so ``stop()`` is honoured within a quarter second,
and ``_remote`` / ``_auth`` that prefix an error with the source's description and mark it
:meth:`Origin.remote`. :class:`SourceSupport` is the one copy; a source inherits it and
sets ``description`` (and, where its log line differs, the class attributes or
:meth:`SourceSupport.failure_fields`), so the agent and the metrics see the same shape from
every store.

The hook helpers :func:`report_failure` / :func:`report_watching` live here too (and are
re-exported by :mod:`dynconf.stores`) because they are the contract :class:`SourceSupport`
implements; callers that are not sources (tests, third-party stores) keep using them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import ClassVar, Final

from dynconf.errors import AuthError, DynconfError, Origin, RemoteError, ThrottledError

__all__ = ["STOP_SLICE", "SourceSupport", "report_failure", "report_watching"]

STOP_SLICE: Final = 0.25
"""Longest a waiting watch sleeps before asking ``stop()`` again (seconds)."""
_NEVER_SET: Final = threading.Event()
"""Waited on with a timeout by :meth:`SourceSupport.pause`; nothing sets it."""


def report_failure(source: object, error: BaseException) -> None:
    """Call the source's ``on_failure`` hook, if the caller set one."""
    hook = getattr(source, "on_failure", None)
    if callable(hook):
        hook(error)


def report_watching(source: object) -> None:
    """Call the source's ``on_watching`` hook, if the caller set one."""
    hook = getattr(source, "on_watching", None)
    if callable(hook):
        hook()


class SourceSupport:
    """Base for store sources: the health hooks, the stop-aware wait and error wording.

    A subclass sets ``description`` (store kind, redacted address and key; never a
    credential) before it raises or reports anything, or overrides :meth:`describe` when
    the description moves (git names the commit it read); everything here goes through
    :meth:`describe`. The agent sets ``on_failure`` and ``on_watching`` before iterating
    ``changes``; both stay ``None`` for one-shot reads.

    A log line's message is its event name (:mod:`dynconf.logs`): ``failure_event``, which a
    store keeps unless operators already query another name; ``failure_detail`` is the
    store's own sentence, carried as the ``detail`` field, and :meth:`failure_fields` the hook
    for a store whose line carries other fields.
    Error wording follows the same rule: :attr:`error_subject` / :attr:`auth_subject`
    start every message and default to the description.
    """

    description: str
    on_failure: Callable[[DynconfError], None] | None = None
    on_watching: Callable[[], None] | None = None
    reports_watching: ClassVar[bool] = False
    """The source's watch calls ``on_watching`` once its stream is up (a poll store: after
    each poll), so a follower can wait for that instead of guessing; a store whose watch
    does sets this True."""

    failure_log: ClassVar[logging.Logger] = logging.getLogger("dynconf.store")
    failure_event: ClassVar[str] = "store_watch_failed"
    failure_detail: ClassVar[str] = "store watch failed; retrying"
    failure_store: ClassVar[str | None] = None
    """When set, the log line's ``store`` is this kind and the description is ``source``."""

    def describe(self) -> str:
        """Store kind, address and key; never a credential."""
        return self.description

    # ------------------------------------------------------------------ health
    def report(self, error: DynconfError) -> None:
        """Log a failure the watch survives by retrying, then tell ``on_failure``."""
        self.failure_log.warning(self.failure_event, extra=self.failure_fields(error))
        report_failure(self, error)

    def failure_fields(self, error: DynconfError) -> dict[str, object]:
        """The structured fields of the failure log line (never the document or a secret).

        Built in one order so every store's JSON line reads the same way; a store that
        names itself by kind (``failure_store``) adds ``source`` right after ``store``.
        """
        where: dict[str, object] = {"store": self.describe()}
        if self.failure_store is not None:
            where = {"store": self.failure_store, "source": self.describe()}
        return {**where, "kind": str(error.kind), "reason": error.message,
                "detail": self.failure_detail}  # fmt: skip

    @staticmethod
    def pause(seconds: float, stop: Callable[[], bool]) -> bool:
        """Sleep up to ``seconds`` in short slices; ``True`` when ``stop()`` turned true.

        Slices keep shutdown prompt: a watch backing off for minutes still ends within
        :data:`STOP_SLICE` of being asked to.
        """
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if stop():
                return True
            # an event's wait rather than time.sleep: the same pause, and one a shifted wall
            # clock cannot break (libfaketime, which the clock-skew tests preload, refuses
            # the absolute monotonic deadline time.sleep asks for)
            _NEVER_SET.wait(min(STOP_SLICE, left))
        return stop()

    # ------------------------------------------------------------------ errors
    @property
    def error_subject(self) -> str:
        """What a remote error's message starts with; the description unless overridden."""
        return self.describe()

    @property
    def auth_subject(self) -> str:
        """What an auth error's message starts with; :attr:`error_subject` by default."""
        return self.error_subject

    def remote_error(self, what: str) -> RemoteError:
        """A retryable store failure: ``"<subject> <what>"``, from this remote."""
        return RemoteError(f"{self.error_subject} {what}", origin=Origin.remote(self.describe()))

    def throttled_error(self, what: str, retry_after: float | None = None) -> ThrottledError:
        """The store asked us to slow down (429 / 503): retryable, and ``retry_after`` (the
        seconds it named, if any) holds this store's next calls (:mod:`dynconf.budget`)."""
        return ThrottledError(
            f"{self.error_subject} {what}",
            retry_after=retry_after,
            origin=Origin.remote(self.describe()),
        )

    def auth_error(self, what: str) -> AuthError:
        """A refused credential (ends the watch): ``"<subject> <what>"``, from this remote."""
        return AuthError(f"{self.auth_subject} {what}", origin=Origin.remote(self.describe()))
