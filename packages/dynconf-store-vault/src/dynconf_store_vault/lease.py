"""When to touch a Vault lease next, as pure arithmetic the agent and the source share.

A renewable lease is renewed at 65 % of what Vault last granted, spread so a fleet started
together does not renew together; a lease Vault marked non-renewable (every ``pki/issue``,
a database credential at its role's maximum) is never sent a renewal and is re-issued at
90 % instead. The fractions differ on purpose: a renewal that fails still leaves a third of
the lease to get a new credential in, while re-issuing early only shortens the credential in
use and wakes every reader of the file.

Retries back off as usual, except that no wait may outlast the lease: a credential that
expires in twenty seconds must not be retried in five minutes.

Nothing here does I/O; times are ``time.monotonic()`` seconds unless a name says ``epoch``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from dynconf.stores import Lease

__all__ = [
    "REISSUE_FRACTION",
    "RENEW_FRACTION",
    "RENEW_SPREAD",
    "LeaseAction",
    "LeaseSchedule",
    "certificate_ttl",
]

RENEW_FRACTION: Final = 0.65
"""Renew a renewable lease when this share of its granted TTL has passed."""
RENEW_SPREAD: Final = 0.05
"""± share of the TTL the renewal moment is spread by (so 60 % to 70 %)."""
REISSUE_FRACTION: Final = 0.9
"""Re-issue a non-renewable lease when this share of its TTL has passed."""
IDLE_SECONDS: Final = 3600.0
"""How long to wait when there is no lease to look after (a lease of TTL 0 never expires)."""


class LeaseAction(StrEnum):
    """What to do with a lease when its moment comes."""

    RENEW = "renew"
    """Extend the same credential (no re-render)."""
    REISSUE = "reissue"
    """Read the path again for a new credential (re-renders)."""
    NONE = "none"
    """The lease never expires; nothing to schedule."""


@dataclass(frozen=True)
class LeaseSchedule:
    """One lease as granted at ``granted_at`` (monotonic), and when to act on it.

    Build a new schedule after every grant (issue or renewal): the TTL Vault answered is the
    one believed, because a role's ``max_ttl`` can cut a renewal short and the pod cannot
    see it.
    """

    lease: Lease
    granted_at: float = field(default_factory=time.monotonic)
    spread: float = RENEW_SPREAD
    rng: random.Random = field(
        default_factory=random.Random,
        compare=False,
        repr=False,  # jitter, not crypto
    )
    _fraction: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.lease.renewable:
            fraction = RENEW_FRACTION + self.rng.uniform(-self.spread, self.spread)
        else:
            fraction = REISSUE_FRACTION
        object.__setattr__(self, "_fraction", fraction)

    @property
    def action(self) -> LeaseAction:
        if self.lease.ttl_seconds <= 0:
            return LeaseAction.NONE
        return LeaseAction.RENEW if self.lease.renewable else LeaseAction.REISSUE

    @property
    def expires_at(self) -> float | None:
        """Monotonic moment the lease runs out; ``None`` for a lease that never does."""
        if self.lease.ttl_seconds <= 0:
            return None
        return self.granted_at + self.lease.ttl_seconds

    @property
    def act_at(self) -> float:
        """Monotonic moment of the next renewal or re-issue."""
        if self.lease.ttl_seconds <= 0:
            return self.granted_at + IDLE_SECONDS
        return self.granted_at + self._fraction * self.lease.ttl_seconds

    def due_in(self, now: float | None = None) -> float:
        """Seconds until :attr:`act_at` (0 when it has passed)."""
        now = time.monotonic() if now is None else now
        return max(0.0, self.act_at - now)

    def remaining(self, now: float | None = None) -> float | None:
        """Seconds of lease left (0 when expired); ``None`` for a lease that never expires."""
        expires = self.expires_at
        if expires is None:
            return None
        now = time.monotonic() if now is None else now
        return max(0.0, expires - now)

    def bounded(self, wait: float, now: float | None = None) -> float:
        """A backoff ``wait`` shortened so it never sleeps past the lease's end.

        Once the lease has run out there is nothing left to protect and the ordinary
        backoff applies (a zero wait would spin).
        """
        left = self.remaining(now)
        return wait if left is None or left <= 0 else min(wait, left)


def certificate_ttl(
    lease_seconds: float, expiration_epoch: float | None, now_epoch: float | None = None
) -> float:
    """The life of a ``pki/issue`` answer: the earlier of its lease and its notAfter.

    Vault reports the certificate's notAfter as ``data.expiration`` (epoch seconds) by *its*
    wall clock, which is not the pod's. A certificate that looks already expired from here
    is far likelier clock skew than a certificate Vault chose to issue expired, so the
    lease's own number wins then, instead of re-issuing in a tight loop.
    """
    if expiration_epoch is None:
        return lease_seconds
    now_epoch = time.time() if now_epoch is None else now_epoch
    left = expiration_epoch - now_epoch
    if left <= 0:
        return lease_seconds
    if lease_seconds <= 0:
        return left
    return min(lease_seconds, left)
