"""The operator's leader election: one replica reconciles at a time.

The Lease is ``dynamic-config-operator`` in the pod's namespace, with a 15 s term. A candidate
tries every ``retry`` seconds (2 s, client-go's retry period) until it leads; the leader renews
every ``renew`` seconds. A follower judges expiry from when it last saw the record change, so
after a leader dies it takes over a term after the last renewal it saw, plus up to one retry
on each side: a shorter retry is what keeps a failover near the term. The
rules of the Lease (create, renew, take over an expired term, 409 = someone else) are
:class:`dynconf_k8s.lease.LeaderLease`'s; what is the operator's own is the pacing and that a
*lost* lease ends the process ("the leader lease was lost"), so it can never reconcile beside a
new leader. A clean stop hands the lease back so a follower takes over within one poll instead
of a whole term.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Final

from dynconf_k8s.lease import LeaderLease, Round

__all__ = ["LEASE_NAME", "LOST_MESSAGE", "LeaderElector"]

LEASE_NAME: Final = "dynamic-config-operator"
LOST_MESSAGE: Final = "the leader lease was lost"

log = logging.getLogger("dynconf_k8s.operator.election")


class LeaderElector:
    """Acquire, hold and release the operator's Lease; ``on_lost`` runs once if it is lost."""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        identity: str,
        *,
        name: str = LEASE_NAME,
        lease_seconds: float = 15.0,
        renew_seconds: float = 5.0,
        retry_seconds: float = 2.0,
    ) -> None:
        self.api_client = api_client
        self.lease = LeaderLease(name, namespace, identity, term=lease_seconds)
        self.renew_seconds = renew_seconds
        self.retry_seconds = retry_seconds

    @property
    def identity(self) -> str:
        return self.lease.identity

    @property
    def leading(self) -> bool:
        return self.lease.leading

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this candidate leads (True) or ``stop`` is set (False)."""
        announced = False
        while not stop.is_set():
            outcome = self.lease.try_hold(self.api_client)
            if outcome.leading:
                log.info(
                    "leader_elected", extra={"identity": self.identity, "lease": self.lease.name}
                )
                return True
            if not announced and outcome is Round.FOLLOWING:
                log.info("leader_waiting", extra={"holder": self.lease.holder})
                announced = True
            stop.wait(self.retry_seconds)
        return False

    def hold(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew until ``stop``; calls ``on_lost`` and returns when leadership is lost."""
        while not stop.wait(self.renew_seconds):
            if self.lease.try_hold(self.api_client) is Round.LOST:
                log.error(LOST_MESSAGE, extra={"identity": self.identity})
                on_lost()
                return

    def release(self) -> None:
        """Hand the lease back if we hold it, so a follower need not wait out the term."""
        if self.lease.release(self.api_client):
            log.info("leader_released", extra={"identity": self.identity})
