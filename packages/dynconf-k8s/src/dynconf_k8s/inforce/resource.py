"""The installation as a cluster-scoped ``DynamicConfigInstallation``: its spec in, its status out.

The resource's ``spec`` is the installation document (the same keys as the mounted
``installation.yaml``), judged by the same parser; the API server stores it without a schema of
its own (``x-kubernetes-preserve-unknown-fields``), so there is one set of rules and one set of
messages, reported in ``status`` instead of at ``kubectl apply``.

Every replica of every component that follows the resource runs one :class:`ResourceWatch`:
it reads the object every few seconds, offers a new ``metadata.generation`` to its
:class:`~dynconf_k8s.inforce.holder.InstallationInForce`, and writes what it has in force with
server-side apply, in two parts:

- its own entry of ``status.replicas`` (a list keyed by ``name``) under a field manager of its
  own (``<component>-<identity>``), so replicas never overwrite each other's entries and a
  clean stop removes exactly its own (an apply that no longer names it);
- ``status.observedGeneration`` and the ``Valid`` condition under the shared manager
  :data:`STATUS_MANAGER`; every replica judges the same spec with the same parser, so they
  agree, and a replica that finds a newer generation already reported leaves them alone.

A refused generation also leaves a Warning Event (:data:`INVALID_REASON`) on the resource, one
per generation (its name is fixed, so the second replica's create is a harmless 409), in
namespace ``default``: the API server keeps the Events of a cluster-scoped object there. Status
and Events carry the parser's first problem, which names the field and the fix; the
installation holds no credentials (Secrets are named, never read), so no value there is one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

from dynconf_k8s.inforce.holder import InstallationInForce, Offer
from dynconf_k8s.webhook.kube import MissingIdentity

__all__ = [
    "APPLIED_REASON",
    "EVENT_NAMESPACE",
    "EVENT_RULES",
    "INVALID_REASON",
    "KIND",
    "PLURAL",
    "POLL_SECONDS",
    "RULES",
    "STATUS_MANAGER",
    "ResourceWatch",
]

log = logging.getLogger("dynconf_k8s.inforce")

GROUP: Final = "dynamic-config.rs"
VERSION: Final = "v1alpha1"
KIND: Final = "DynamicConfigInstallation"
PLURAL: Final = "dynamicconfiginstallations"
STATUS_MANAGER: Final = "dynamic-config-installation-status"
APPLIED_REASON: Final = "Applied"
"""``Valid`` is True: the newest generation parsed and is in force."""
INVALID_REASON: Final = "InstallationInvalid"
"""``Valid`` is False, and the Warning Event's reason: the newest generation was refused."""
POLL_SECONDS: Final = 5.0
RULES: Final = (
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get"]},
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
)
"""What a follower needs cluster-wide (the chart narrows it to the one resource's name)."""
EVENT_NAMESPACE: Final = "default"
"""Where an Event about a cluster-scoped object must live (the API server refuses others)."""
EVENT_RULES: Final = ({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},)
"""What it needs in :data:`EVENT_NAMESPACE`, for the Warning Event of a refused generation."""
_MESSAGE_LIMIT: Final = 1024

ClientFactory = Callable[[], AbstractContextManager[Any]]
"""Yields a ``kubernetes.client.ApiClient`` (a fresh one per round, or a shared one)."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class _Reported:
    observed: int
    applied: int
    valid: bool


class ResourceWatch:
    """One replica's follower of the ``DynamicConfigInstallation`` named ``name``.

    ``component`` (``webhook``, ``operator``) and ``identity`` (the pod's name) name this
    replica's status entry; ``events`` turns its Warning Events on. :attr:`synced` is set once
    a generation of the resource is in force here.
    """

    def __init__(
        self,
        name: str,
        holder: InstallationInForce,
        clients: ClientFactory,
        *,
        component: str,
        identity: str,
        events: bool = True,
        every: float = POLL_SECONDS,
        timeout: float = 10.0,
    ) -> None:
        self.name = name
        self.holder = holder
        self.clients = clients
        self.component = component
        self.identity = identity
        self.events = events
        self.every = every
        self.timeout = timeout
        self.synced = threading.Event()
        self._generation: int | None = None
        self._uid: str | None = None
        self._reported: _Reported | None = None
        self._transition: tuple[str, str] | None = None
        self._missing_logged = False
        self._rounds = 0
        self._round_done = threading.Condition()

    @property
    def manager(self) -> str:
        """This replica's own field manager (its ``status.replicas`` entry)."""
        return f"dynamic-config-{self.component}-{self.identity}"[:128]

    # -- one round -------------------------------------------------------------------------------

    def poll_once(self) -> Offer | None:
        """Read the resource; offer a new generation; report. The offer made, or ``None``."""
        from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
        from urllib3.exceptions import HTTPError

        offer = None
        try:
            with self.clients() as api_client:
                item = self._read(api_client)
                if item is not None:
                    offer = self._follow(item)
                    self._report(api_client, item, offer)
        except (ApiException, HTTPError, OSError) as exc:
            log.warning(
                "installation_resource_unreachable",
                extra={"resource": self.name, "error_type": type(exc).__name__,
                       "status": getattr(exc, "status", None)},
            )  # fmt: skip
        except MissingIdentity as exc:
            log.warning(
                "installation_resource_unreadable",
                extra={"resource": self.name, "error": str(exc)[:200]},
            )
        with self._round_done:
            self._rounds += 1
            self._round_done.notify_all()
        return offer

    def wait_rounds(self, count: int, timeout: float) -> bool:
        """Block until ``count`` more rounds finished (tests, start-up); False on timeout."""
        with self._round_done:
            target = self._rounds + count
            return self._round_done.wait_for(lambda: self._rounds >= target, timeout)

    def _custom(self, api_client: Any) -> Any:
        from kubernetes import client  # type: ignore[import-untyped]

        return client.CustomObjectsApi(api_client)

    def _read(self, api_client: Any) -> dict[str, Any] | None:
        from kubernetes.client.rest import ApiException

        try:
            item: dict[str, Any] = self._custom(api_client).get_cluster_custom_object(
                GROUP, VERSION, PLURAL, self.name, _request_timeout=self.timeout
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            if not self._missing_logged:
                log.warning(
                    "installation_resource_not_found",
                    extra={"resource": f"{KIND}/{self.name}",
                           "fix": "create it (the chart renders it with "
                                  "webhook.installation.resource.enabled)"},
                )  # fmt: skip
                self._missing_logged = True
            return None
        self._missing_logged = False
        return item

    def _follow(self, item: dict[str, Any]) -> Offer | None:
        meta = item.get("metadata") or {}
        generation = int(meta.get("generation") or 0)
        uid = meta.get("uid")
        if (uid, generation) == (self._uid, self._generation):
            return None  # a re-created resource starts at generation 1 again: the uid tells
        self._uid, self._generation = uid, generation
        spec = item.get("spec") or {}
        offer = self.holder.offer(
            json.dumps(spec, sort_keys=True), origin=f"{KIND}/{self.name} spec",
            generation=generation,
        )  # fmt: skip
        if offer.outcome != "refused":
            self.synced.set()
        return offer

    # -- status ----------------------------------------------------------------------------------

    def _report(self, api_client: Any, item: dict[str, Any], offer: Offer | None) -> None:
        if self._generation is None:
            return
        applied = self.holder.applied.generation if self.synced.is_set() else 0
        last = self.holder.last_offer
        valid = last.outcome != "refused"
        now = _Reported(self._generation, applied, valid)
        if now == self._reported:
            return
        custom = self._custom(api_client)
        reason = APPLIED_REASON if valid else INVALID_REASON
        message = (
            f"generation {self._generation} is in force"
            if valid
            else f"generation {self._generation} was refused and "
            + (
                f"generation {applied} stays in force"
                if applied
                else "no generation of this resource is in force yet"
            )
            + f": {last.first_problem}"
        )[:_MESSAGE_LIMIT]
        entry = {
            "name": self.identity,
            "component": self.component,
            "observedGeneration": self._generation,
            "appliedGeneration": applied,
            "valid": valid,
            "reason": reason,
            "message": message,
            "lastTransitionTime": _now(),
        }
        self._apply(custom, {"replicas": [entry]}, self.manager)
        status = item.get("status") or {}
        if int(status.get("observedGeneration") or 0) <= self._generation:
            self._apply(custom, {"observedGeneration": self._generation,
                                 "conditions": [self._valid(status, valid, reason, message)]},
                        STATUS_MANAGER)  # fmt: skip
        self._reported = now
        if offer is not None and offer.outcome == "refused":
            self._event(api_client, item, message)

    def _valid(
        self, status: dict[str, Any], valid: bool, reason: str, message: str
    ) -> dict[str, Any]:
        """The ``Valid`` condition; its transition time kept while status and reason hold."""
        state = "True" if valid else "False"
        since = _now()
        for condition in status.get("conditions") or []:
            if condition.get("type") == "Valid" and (
                condition.get("status"),
                condition.get("reason"),
            ) == (state, reason):
                since = condition.get("lastTransitionTime") or since
        return {
            "type": "Valid",
            "status": state,
            "reason": reason,
            "message": message,
            "observedGeneration": self._generation,
            "lastTransitionTime": since,
        }

    def _apply(self, custom: Any, status: dict[str, Any], manager: str) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": self.name},
            "status": status,
        }
        custom.patch_cluster_custom_object_status(
            GROUP, VERSION, PLURAL, self.name, body,
            field_manager=manager, force=True,
            _content_type="application/apply-patch+yaml", _request_timeout=self.timeout,
        )  # fmt: skip

    def _event(self, api_client: Any, item: dict[str, Any], message: str) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        if not self.events:
            return
        meta = item.get("metadata") or {}
        stamp = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{self.name}.{self._generation}.invalid",
                "namespace": EVENT_NAMESPACE,
            },
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "name": self.name,
                "uid": meta.get("uid"),
            },
            "reason": INVALID_REASON,
            "message": message,
            "type": "Warning",
            "action": "Apply",
            "source": {"component": f"dynamic-config-{self.component}"},
            "reportingComponent": f"dynamic-config-{self.component}",
            "reportingInstance": self.identity,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            client.CoreV1Api(api_client).create_namespaced_event(
                EVENT_NAMESPACE, body, _request_timeout=self.timeout
            )
        except ApiException as exc:
            if exc.status != 409:  # 409: another replica reported this generation already
                log.warning(
                    "installation_event_refused",
                    extra={"status": exc.status, "namespace": EVENT_NAMESPACE},
                )

    # -- the loop --------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Poll now, then every ``every`` seconds until ``stop``; then withdraw this replica."""
        while True:
            self.poll_once()
            if stop.wait(self.every):
                break
        self.withdraw()

    def withdraw(self) -> None:
        """Remove this replica's ``status.replicas`` entry (an apply that no longer names it)."""
        if self._reported is None:
            return
        with contextlib.suppress(Exception):
            with self.clients() as api_client:
                self._apply(self._custom(api_client), {}, self.manager)
            self._reported = None
