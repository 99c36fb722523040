"""The operator assembled: three watched kinds, the wiring between them, the workers.

:class:`Operator` is what ``dynamic-config-operator`` runs and what the tests run in-process:
informers over Renders, namespaced classes and cluster classes; a Render event queues that
Render (creation, deletion, or a spec change — ``metadata.generation`` moved; our own status
writes do not requeue); a class event queues every Render that references the class, found
in the Render cache, never by listing the API. Workers start once every cache has synced, so
a Render is never judged against a class list that is still loading.

With :class:`~dynconf_k8s.operator.restarts.RestartSettings` given (the chart's
``operator.restarts.enabled``), three more informers follow Deployments, StatefulSets and
DaemonSets, and a second controller judges the ones annotated ``restart-on-change``: queued when
the workload itself changes, and ``settle`` seconds after a Render writes a target it consumes.
Without the settings the operator neither watches nor can patch a workload.

With :class:`~dynconf_k8s.operator.podaudit.PodAuditSettings` given (the chart's
``operator.podAudit.enabled``, on by default), a third controller runs one key: every
``interval`` it lists the pods and reports those that asked for injection and have no agent
(:mod:`dynconf_k8s.operator.podaudit`). It keeps no pod cache.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client  # type: ignore[import-untyped]

from dynconf.stores import Fetched, StoreSpec
from dynconf.tracing import Tracing
from dynconf_k8s.operator.cluster import Cluster
from dynconf_k8s.operator.controller import Controller, Informer, object_key
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.podaudit import AUDIT_KEY, AuditFailed, PodAudit, PodAuditSettings
from dynconf_k8s.operator.reconcile import ReconcileFailed, Reconciler
from dynconf_k8s.operator.restarts import (
    RESTART_ANNOTATION,
    WORKLOAD_KINDS,
    Restarter,
    RestartFailed,
    RestartSettings,
    WorkloadKey,
)
from dynconf_k8s.operator.targets import TargetRef
from dynconf_k8s.operator.types import (
    CLASS_KIND,
    CLUSTER_CLASS_KIND,
    GROUP,
    PLURALS,
    RENDER_KIND,
    VERSION,
)

__all__ = ["Operator"]

SYNC_TIMEOUT = 60.0

log = logging.getLogger("dynconf_k8s.operator.manager")


def _generation(item: dict[str, Any] | None) -> object:
    return None if item is None else (item.get("metadata") or {}).get("generation")


def _spec(item: dict[str, Any] | None) -> dict[str, Any]:
    return {} if item is None else dict(item.get("spec") or {})


def _plain(call: Callable[..., Any]) -> Callable[..., Any]:
    """A typed list call that answers dicts, as the custom-object calls do (watches unchanged)."""

    @functools.wraps(call)
    def listing(**kwargs: Any) -> Any:
        if kwargs.get("watch"):
            return call(**kwargs)
        return json.loads(call(**kwargs, _preload_content=False).data)

    return listing


def _asked_or_template(item: dict[str, Any] | None) -> tuple[object, object]:
    if item is None:
        return (None, None)
    meta = item.get("metadata") or {}
    asked = (meta.get("annotations") or {}).get(RESTART_ANNOTATION)
    return (asked, (item.get("spec") or {}).get("template"))


class Operator:
    """Watches, queue and workers for one API server; ``start`` then ``stop``."""

    def __init__(
        self,
        api_client: Any,
        *,
        identity: str = "dynamic-config-operator",
        workers: int = 4,
        metrics: OperatorMetrics | None = None,
        fetch: Callable[[StoreSpec], Fetched] | None = None,
        tracing: Tracing | None = None,
        restarts: RestartSettings | None = None,
        pod_audit: PodAuditSettings | None = None,
    ) -> None:
        self.metrics = metrics or OperatorMetrics()
        custom = client.CustomObjectsApi(api_client)
        self.renders = Informer(
            RENDER_KIND,
            custom.list_cluster_custom_object,
            group=GROUP,
            version=VERSION,
            plural=PLURALS[RENDER_KIND],
        )
        self.classes = Informer(
            CLASS_KIND,
            custom.list_cluster_custom_object,
            group=GROUP,
            version=VERSION,
            plural=PLURALS[CLASS_KIND],
        )
        self.cluster_classes = Informer(
            CLUSTER_CLASS_KIND,
            custom.list_cluster_custom_object,
            group=GROUP,
            version=VERSION,
            plural=PLURALS[CLUSTER_CLASS_KIND],
        )
        cluster = Cluster(api_client, identity=identity)
        self.workloads: dict[str, Informer] = {}
        self.restarter: Restarter | None = None
        self.restart_controller: Controller[WorkloadKey] | None = None
        if restarts is not None:
            apps = client.AppsV1Api(api_client)
            for plural, call in (
                ("deployments", apps.list_deployment_for_all_namespaces),
                ("statefulsets", apps.list_stateful_set_for_all_namespaces),
                ("daemonsets", apps.list_daemon_set_for_all_namespaces),
            ):
                informer = Informer(WORKLOAD_KINDS[plural], _plain(call))
                informer.add_handler(functools.partial(self._on_workload, plural))
                self.workloads[plural] = informer
            self.restarter = Restarter(cluster, self, self.metrics, restarts)
            self.restart_controller = Controller(
                self.restarter.reconcile,
                workers=2,
                reported=(RestartFailed,),
                name="restart",
                subject="workload",
                spread_success=False,
            )
        self.reconciler = Reconciler(
            cluster,
            self,
            self.metrics,
            fetch=fetch,
            tracing=tracing,
            written=self._written if restarts is not None else None,
        )
        self._settle = restarts.settle if restarts is not None else 0.0
        self.pod_audit: PodAudit | None = None
        self.audit_controller: Controller[str] | None = None
        if pod_audit is not None:
            self.pod_audit = PodAudit(cluster, self.metrics, pod_audit)
            self.audit_controller = Controller(
                self.pod_audit.reconcile,
                workers=1,
                reported=(AuditFailed,),
                name="pod-audit",
                subject="audit",
                spread_success=False,
            )
        self.controller: Controller[tuple[str, str]] = Controller(
            self._reconcile, workers=workers, reported=(ReconcileFailed,)
        )
        self.renders.add_handler(self._on_render)
        self.classes.add_handler(self._on_class)
        self.cluster_classes.add_handler(self._on_cluster_class)
        self._stop = threading.Event()
        self._watchers: list[tuple[Informer, threading.Thread]] = []

    # -- ClassLookup, served from the caches ---------------------------------------------------

    def namespaced_class(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.classes.get(namespace, name)

    def cluster_class(self, name: str) -> dict[str, Any] | None:
        return self.cluster_classes.get("", name)

    # -- WorkloadLookup, served from the caches ------------------------------------------------

    def render_items(self) -> list[dict[str, Any]]:
        return self.renders.items()

    def workload(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self.workloads.get(plural)
        return None if informer is None else informer.get(namespace, name)

    def workload_items(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (plural, item)
            for plural, informer in self.workloads.items()
            for item in informer.items()
        ]

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the watches, wait for their first lists, then start the workers."""
        informers = [self.classes, self.cluster_classes, self.renders, *self.workloads.values()]
        for informer in informers:
            thread = threading.Thread(
                target=informer.run, args=(self._stop,), name=f"watch-{informer.name}", daemon=True
            )
            thread.start()
            self._watchers.append((informer, thread))
        for informer in informers:
            if not informer.synced.wait(SYNC_TIMEOUT):
                self.stop()  # the watches already run: a failed start leaves none behind
                raise TimeoutError(f"the {informer.name} list did not load within {SYNC_TIMEOUT} s")
        self.controller.start(self._stop)
        if self.restart_controller is not None:
            self.restart_controller.start(self._stop)
        if self.audit_controller is not None:
            self.audit_controller.start(self._stop)
            self.audit_controller.enqueue(AUDIT_KEY)
        log.info("operator_started", extra={"renders": len(self.renders.items())})

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the watches, let the workers finish the reconcile they are in, and join all.

        Returns once every thread ``start`` made has ended (or ``timeout`` passed, logged): a
        watch thread left running would keep calling the API server, and logging, after its
        owner is gone. A watch can open between one ``Informer.stop`` and the thread's next look
        at the stop event, so the stop is repeated until the thread is seen to end.
        """
        deadline = time.monotonic() + timeout
        self._stop.set()
        for informer, _ in self._watchers:
            informer.stop()
        self.controller.join(timeout)
        for extra in (self.restart_controller, self.audit_controller):
            if extra is not None:
                extra.join(max(0.0, deadline - time.monotonic()))
        for informer, thread in self._watchers:
            while thread.is_alive() and time.monotonic() < deadline:
                informer.stop()
                thread.join(0.1)
        left = [thread.name for thread in self.threads() if thread.is_alive()]
        if left:
            log.warning("operator_stop_incomplete", extra={"threads": left, "timeout": timeout})

    def threads(self) -> list[threading.Thread]:
        """Every thread ``start`` made: the watches and the workers."""
        threads = [thread for _, thread in self._watchers] + self.controller.threads()
        for extra in (self.restart_controller, self.audit_controller):
            if extra is not None:
                threads += extra.threads()
        return threads

    # -- wiring --------------------------------------------------------------------------------

    def _reconcile(self, key: tuple[str, str]) -> float | None:
        raw = self.renders.get(*key)
        if raw is None:
            return None
        return self.reconciler.reconcile(raw)

    def _written(self, namespace: str, ref: TargetRef) -> None:
        """A target changed: judge the workloads consuming it once the burst has settled."""
        assert self.restarter is not None
        assert self.restart_controller is not None
        for key in self.restarter.written(namespace, ref):
            self.restart_controller.enqueue(key, self._settle)

    def _on_workload(
        self, plural: str, kind: str, item: dict[str, Any], before: dict[str, Any] | None
    ) -> None:
        assert self.restart_controller is not None
        asked, _ = _asked_or_template(item)
        if asked != "true" and kind != "DELETED":
            return  # a workload that did not ask is never judged
        namespace, name = object_key(item)
        key = (plural, namespace, name)
        if kind == "DELETED":
            self.restart_controller.forget(key)
            if asked == "true":
                self.restart_controller.enqueue(key)  # finds it gone, drops what it remembers
        elif kind == "ADDED" or _asked_or_template(item) != _asked_or_template(before):
            self.restart_controller.enqueue(key)

    def _on_render(self, kind: str, item: dict[str, Any], before: dict[str, Any] | None) -> None:
        key = object_key(item)
        if kind == "DELETED":
            self.controller.forget(key)
        elif kind == "ADDED" or _generation(item) != _generation(before):
            self.controller.enqueue(key)

    def _on_class(self, kind: str, item: dict[str, Any], before: dict[str, Any] | None) -> None:
        if kind == "MODIFIED" and _spec(item) == _spec(before):
            return
        namespace, name = object_key(item)
        for render in self.renders.items():
            render_ns, _ = object_key(render)
            if render_ns == namespace and _spec(render).get("class") == name:
                self.controller.enqueue(object_key(render))

    def _on_cluster_class(
        self, kind: str, item: dict[str, Any], before: dict[str, Any] | None
    ) -> None:
        if kind == "MODIFIED" and _spec(item) == _spec(before):
            return
        _, name = object_key(item)
        for render in self.renders.items():
            spec = _spec(render)
            if spec.get("class") == name and spec.get("classKind") == CLUSTER_CLASS_KIND:
                self.controller.enqueue(object_key(render))
