"""The handler: one Render in, its target current and its status true, or a reported failure.

:meth:`Reconciler.reconcile` is what the controller calls for each queued Render. It resolves
the class (from the controller's caches), validates the target, renders through the agent's
path (:func:`dynconf_k8s.operator.targets.render_data`), and writes only when the target's data
differs. It returns the base requeue interval; the controller owns spread, backoff and
retries. A failure is reported (status ``Ready=False`` with its reason, ``lastError``, a
``RenderFailed`` Event) and re-raised as :class:`ReconcileFailed` so the controller backs off.
A read the store's call budget held back (:class:`~dynconf.budget.BudgetExceeded`) is neither:
the Render keeps its target and status and is read again after its interval.

Each call is one ``reconcile`` span (:mod:`dynconf.tracing`, exported only when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set) naming the Render's namespace and name and the outcome
— ``written``, ``unchanged``, ``unreadable``, ``budget`` or the failure's reason — never the
document.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
from pydantic import ValidationError
from urllib3.exceptions import HTTPError

from dynconf.budget import BudgetExceeded
from dynconf.errors import DynconfError
from dynconf.stores import Fetched, StoreSpec
from dynconf.tracing import Span, Tracing
from dynconf_k8s.operator.cluster import Cluster, api_failure
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.targets import (
    RenderRefused,
    ResolvedClass,
    TargetRef,
    check_target,
    render_data,
)
from dynconf_k8s.operator.types import (
    API_VERSION,
    CLUSTER_CLASS_KIND,
    RENDER_KIND,
    ClusterDynamicConfigClass,
    DynamicConfigClass,
    DynamicConfigRender,
    Reason,
)

__all__ = ["ClassLookup", "ReconcileFailed", "Reconciler", "owner_reference"]

RENDERED_MESSAGE = "the target carries the store's current document"
RENDERED_NOTE = "the target now carries the store's document"

log = logging.getLogger("dynconf_k8s.operator.reconcile")


class ClassLookup(Protocol):
    """Classes as the controller's caches hold them (no API call per reconcile)."""

    def namespaced_class(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def cluster_class(self, name: str) -> dict[str, Any] | None: ...


class ReconcileFailed(Exception):
    """The attempt failed and was reported; the controller backs off and retries."""


@dataclass(frozen=True)
class _Failure:
    reason: str
    message: str
    render_failure: bool


def owner_reference(render: DynamicConfigRender) -> dict[str, Any]:
    """The controller reference that lets Kubernetes' GC delete the target with its Render."""
    return {
        "apiVersion": API_VERSION,
        "kind": RENDER_KIND,
        "name": render.name,
        "uid": render.uid,
        "controller": True,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Reconciler:
    """Renders one DynamicConfigRender per call; safe to call from several worker threads."""

    def __init__(
        self,
        cluster: Cluster,
        classes: ClassLookup,
        metrics: OperatorMetrics,
        *,
        fetch: Callable[[StoreSpec], Fetched] | None = None,
        tracing: Tracing | None = None,
        written: Callable[[str, TargetRef], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.written = written  # told of every target write: restarts follow writes
        self.classes = classes
        self.metrics = metrics
        self.fetch = fetch
        self.tracing = tracing or Tracing()
        # Renders (by uid) whose target was written but whose status write failed: the next
        # attempt finds the target current, and must still record the write in the status.
        self._unreported: set[str] = set()
        self._unreported_lock = threading.Lock()

    def reconcile(self, raw: dict[str, Any]) -> float:
        """Make the Render's target current; the seconds until the next render."""
        started = time.monotonic()
        meta = raw.get("metadata") or {}
        try:
            with self.tracing.span(
                "reconcile", namespace=meta.get("namespace"), name=meta.get("name")
            ) as span:
                return self._attempt(raw, span)
        finally:
            self.metrics.reconcile_duration.observe(time.monotonic() - started)

    def _attempt(self, raw: dict[str, Any], span: Span) -> float:
        try:
            render = DynamicConfigRender.from_api(raw)
        except ValidationError as error:
            fields = ", ".join(".".join(map(str, item["loc"])) for item in error.errors())
            meta = raw.get("metadata") or {}
            log.warning(
                "render_unreadable",
                extra={
                    "render": f"{meta.get('namespace')}/{meta.get('name')}",
                    "spec_fields": fields,
                },
            )
            self.metrics.reconcile_failures.inc()
            span.set(outcome="unreadable")
            raise ReconcileFailed(f"the Render's spec does not parse ({fields})") from None
        try:
            resolved, ref = self._resolve(render)
            data = render_data(render.spec, resolved, fetch=self.fetch)
            changed = self._publish(render, ref, data)
        except BudgetExceeded:
            # The store's call budget held the read back (counted as outcome="budget" and
            # logged by the ledger): a deferred read, not a failure of the Render. Its target
            # keeps its data, its status stays, and the next interval reads again.
            span.set(outcome="budget")
            return float(max(1, render.spec.interval_seconds))
        except (DynconfError, ApiException, HTTPError) as error:
            failure = _failure(error)
            span.set(outcome=str(failure.reason))
            self._report_failure(render, failure)
            raise ReconcileFailed(failure.message) from None
        span.set(outcome="written" if changed else "unchanged")
        self._report_success(render, changed)
        return float(max(1, render.spec.interval_seconds))

    # -- steps ---------------------------------------------------------------------------------

    def _resolve(self, render: DynamicConfigRender) -> tuple[ResolvedClass, TargetRef]:
        spec = render.spec
        namespace = render.namespace or ""
        if spec.class_kind == CLUSTER_CLASS_KIND:
            raw = self.classes.cluster_class(spec.class_name)
            if raw is None:
                raise RenderRefused(
                    f'cluster class "{spec.class_name}" does not exist',
                    reason=Reason.CLASS_NOT_FOUND,
                )
            cluster = ClusterDynamicConfigClass.from_api(raw).spec
            if cluster.namespaces is not None and namespace not in cluster.namespaces:
                raise RenderRefused(
                    f'cluster class "{spec.class_name}" does not allow namespace "{namespace}": '
                    "its `namespaces` list is the platform team's boundary",
                    reason=Reason.CLASS_NOT_ALLOWED,
                )
            ref = check_target(spec.target, cluster.source)
            token = None
            if cluster.token_secret is not None:
                secret = cluster.token_secret
                token = self.cluster.read_token(secret.namespace, secret.name, secret.key)
            return ResolvedClass(cluster.source, cluster.endpoint, token), ref
        raw = self.classes.namespaced_class(namespace, spec.class_name)
        if raw is None:
            raise RenderRefused(
                f'class "{spec.class_name}" does not exist here', reason=Reason.CLASS_NOT_FOUND
            )
        own = DynamicConfigClass.from_api(raw).spec
        ref = check_target(spec.target, own.source)
        token = (
            self.cluster.read_token(namespace, own.token_secret, "token")
            if own.token_secret
            else None
        )
        return ResolvedClass(own.source, own.endpoint, token), ref

    def _publish(self, render: DynamicConfigRender, ref: TargetRef, data: dict[str, str]) -> bool:
        """Apply the data when it differs (or our owner reference is missing); True if written."""
        namespace = render.namespace or ""
        existing = self.cluster.read_target(ref, namespace)
        ours = owner_reference(render)
        has_ours = existing is not None and any(
            owner.get("uid") == render.uid for owner in existing.owner_references
        )
        wants_owner = render.spec.target.deletion_policy == "Delete"
        if existing is not None and existing.data == data and (has_ours or not wants_owner):
            return False
        # Retain writes no owner reference, but never removes one an earlier Delete wrote:
        # applying without it would make server-side apply drop the field we own.
        owners = [ours] if wants_owner or has_ours else []
        self.cluster.apply_target(ref, namespace, data, owners)
        if self.written is not None:
            self.written(namespace, ref)
        log.info(
            "target_written",
            extra={
                "render": f"{namespace}/{render.name}",
                "target": f"{ref.kind}/{ref.name}",
                "keys": len(data),
            },
        )
        return True

    # -- reporting -----------------------------------------------------------------------------

    def _report_success(self, render: DynamicConfigRender, written: bool) -> None:
        self.metrics.renders.inc()
        self.metrics.last_render.set(time.time())
        with self._unreported_lock:
            if written:
                self._unreported.add(render.uid)
            changed = render.uid in self._unreported
        status = render.status
        ready = render.ready()
        settled = (
            ready is not None
            and ready.status == "True"
            and ready.reason == Reason.RENDERED
            and status.last_error is None
            and status.rendered_at is not None
            and status.observed_generation == render.generation
        )
        if not changed and settled:
            return
        patch: dict[str, Any] = {
            "observedGeneration": render.generation,
            "lastError": None,
            "conditions": [_condition(render, "True", Reason.RENDERED, RENDERED_MESSAGE)],
        }
        if changed or status.rendered_at is None:
            patch["renderedAt"] = _now()
        self._patch_status(render, patch)
        with self._unreported_lock:
            self._unreported.discard(render.uid)
        if changed:
            self.cluster.post_event(render, "Normal", Reason.RENDERED, RENDERED_NOTE)

    def _report_failure(self, render: DynamicConfigRender, failure: _Failure) -> None:
        self.metrics.reconcile_failures.inc()
        if failure.render_failure:
            self.metrics.render_failures.inc()
        log.warning(
            "render_failed",
            extra={"render": f"{render.namespace}/{render.name}", "reason": failure.reason},
        )
        ready = render.ready()
        unchanged = (
            ready is not None
            and ready.status == "False"
            and ready.reason == failure.reason
            and render.status.last_error == failure.message
            and render.status.observed_generation == render.generation
        )
        if not unchanged:
            self._patch_status(
                render,
                {
                    "observedGeneration": render.generation,
                    "lastError": failure.message,
                    "conditions": [_condition(render, "False", failure.reason, failure.message)],
                },
            )
        self.cluster.post_event(render, "Warning", Reason.RENDER_FAILED, failure.message)

    def _patch_status(self, render: DynamicConfigRender, patch: dict[str, Any]) -> None:
        """Write the status; a refused or unanswered write is logged and retried by backoff."""
        try:
            self.cluster.patch_status(render, patch)
        except ApiException as error:
            if error.status == 404:
                return  # deleted while we rendered; nothing left to report on
            self._status_unwritten(render, api_failure(error, "the status write"))
        except HTTPError as error:
            answer = f"the API server did not answer the status write ({type(error).__name__})"
            self._status_unwritten(render, answer)

    def _status_unwritten(self, render: DynamicConfigRender, message: str) -> None:
        self.metrics.reconcile_failures.inc()
        log.warning(
            "status_write_failed",
            extra={"render": f"{render.namespace}/{render.name}", "error": message},
        )
        raise ReconcileFailed(message)


def _condition(
    render: DynamicConfigRender, status: str, reason: str, message: str
) -> dict[str, str]:
    previous = render.ready()
    since = (
        previous.last_transition_time
        if previous is not None and previous.status == status
        else _now()
    )
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def _failure(error: DynconfError | ApiException | HTTPError) -> _Failure:
    if isinstance(error, ApiException):
        return _Failure(Reason.RENDER_FAILED, api_failure(error, "the target write"), False)
    if isinstance(error, HTTPError):
        message = f"the API server did not answer the target write ({type(error).__name__})"
        return _Failure(Reason.RENDER_FAILED, message, False)
    reason = error.reason if isinstance(error, RenderRefused) else Reason.RENDER_FAILED
    return _Failure(reason, f"{error.kind.value}: {error}", True)
