"""Rolling the workloads that asked for it when a target they consume changes.

A process that reads its configuration once (environment from ``envFrom``, a file read at start)
sees a changed Secret or ConfigMap only after a restart. A Deployment, StatefulSet or DaemonSet
annotated ``dynamic-config.rs/restart-on-change: "true"`` gets one from the operator: when a
target some Render writes, and that the pod template consumes (volumes, projected sources,
``envFrom``, ``env[].valueFrom``), changes, the operator sets the pod template's
``dynamic-config.rs/rendered-fingerprint`` annotation to a digest of those targets' data. The
changed template is an ordinary rollout under the workload's own strategy (``maxUnavailable``,
``partition``, PDBs all apply); the operator never deletes a pod.

:meth:`Restarter.reconcile` is level-based, like the Render reconcile: it recomputes the wanted
fingerprint from the targets as they are and compares it with the template's, so a missed
event, a burst or an operator restart all end in the same single rollout. Timing is the
controller's: a write queues the consuming workloads after ``settle`` seconds (a burst lands
inside one window and gives one rollout), and a workload rolled less than ``min_interval``
seconds ago is requeued for the rest of the interval. The last rollout time is read back from
the Renders' ``status.restarts``, so the floor survives an operator restart.

A workload that did not ask is never read past its annotations, and never patched.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
from pydantic import ValidationError

from dynconf_k8s.contract.registry import annotation
from dynconf_k8s.contract.rules import RuleError, parse_bool, parse_duration_seconds
from dynconf_k8s.operator.cluster import Cluster, api_failure
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.targets import TargetRef
from dynconf_k8s.operator.types import DynamicConfigRender, Reason

__all__ = [
    "FINGERPRINT_ANNOTATION",
    "RESTART_ANNOTATION",
    "WORKLOAD_KINDS",
    "RestartFailed",
    "RestartSettings",
    "SettingsError",
    "Restarter",
    "WorkloadKey",
    "WorkloadLookup",
    "consumed_objects",
    "fingerprint",
    "restart_settings",
]

RESTART_ANNOTATION: Final = annotation("restart-on-change")
FINGERPRINT_ANNOTATION: Final = annotation("rendered-fingerprint")
ENV_INJECT_ANNOTATION: Final = annotation("env-inject")
WORKLOAD_KINDS: Final = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
}
"""The workload kinds that take the annotation, by plural (the informer and patch key)."""
HISTORY: Final = 10
"""How many workloads one Render's ``status.restarts`` lists (newest first)."""

WorkloadKey = tuple[str, str, str]
"""``(plural, namespace, name)`` of a workload."""

log = logging.getLogger("dynconf_k8s.operator.restarts")


@dataclass(frozen=True)
class RestartSettings:
    """The operator's restart knobs (chart ``operator.restarts``)."""

    min_interval: float = 60.0
    """Seconds between two rollouts of one workload, at least."""
    settle: float = 5.0
    """Seconds a write waits before the consuming workloads are judged: a burst gives one."""


RESTARTS_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_RESTARTS"
MIN_INTERVAL_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_RESTART_MIN_INTERVAL"
SETTLE_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_RESTART_SETTLE"


class SettingsError(ValueError):
    """A restart variable the operator cannot read; the message names it and the fix."""


def restart_settings(environ: Mapping[str, str]) -> RestartSettings | None:
    """The restart settings from the environment (the chart sets them), or ``None`` when off."""
    switch = environ.get(RESTARTS_ENV, "false") or "false"
    try:
        on = parse_bool(switch)
    except RuleError as error:
        raise SettingsError(f"{RESTARTS_ENV} {error}") from None
    if not on:
        return None
    values = {}
    for name, field, default in (
        (MIN_INTERVAL_ENV, "min_interval", RestartSettings.min_interval),
        (SETTLE_ENV, "settle", RestartSettings.settle),
    ):
        text = environ.get(name) or ""
        try:
            values[field] = float(parse_duration_seconds(text)) if text else default
        except RuleError as error:
            raise SettingsError(f"{name} {error}") from None
    return RestartSettings(**values)


class RestartFailed(Exception):
    """The rollout patch was refused and reported; the controller backs off and retries."""


class WorkloadLookup(Protocol):
    """Renders and workloads as the controller's caches hold them (no API list per call)."""

    def render_items(self) -> list[dict[str, Any]]: ...

    def workload(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def workload_items(self) -> Iterable[tuple[str, dict[str, Any]]]: ...


def consumed_objects(pod_spec: Mapping[str, Any]) -> frozenset[TargetRef]:
    """Every ConfigMap and Secret a pod spec reads: volumes, projections, envFrom, env refs."""
    found: set[TargetRef] = set()

    def add(kind: str, ref: object, field: str = "name") -> None:
        if isinstance(ref, Mapping) and isinstance(ref.get(field), str):
            found.add(TargetRef(kind, ref[field]))

    for volume in _list(pod_spec.get("volumes")):
        add("ConfigMap", volume.get("configMap"))
        add("Secret", volume.get("secret"), "secretName")
        projected = volume.get("projected")
        for source in _list(projected.get("sources") if isinstance(projected, Mapping) else None):
            add("ConfigMap", source.get("configMap"))
            add("Secret", source.get("secret"))
    for group in ("initContainers", "containers"):
        for container in _list(pod_spec.get(group)):
            for source in _list(container.get("envFrom")):
                add("ConfigMap", source.get("configMapRef"))
                add("Secret", source.get("secretRef"))
            for variable in _list(container.get("env")):
                value_from = variable.get("valueFrom")
                if isinstance(value_from, Mapping):
                    add("ConfigMap", value_from.get("configMapKeyRef"))
                    add("Secret", value_from.get("secretKeyRef"))
    return frozenset(found)


def fingerprint(targets: Mapping[TargetRef, Mapping[str, str]]) -> str:
    """32 hex digits over the targets' names and data: equal iff every byte is equal."""
    canonical = sorted([ref.kind, ref.name, sorted(data.items())] for ref, data in targets.items())
    digest = hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("utf-8"))
    return digest.hexdigest()[:32]


class Restarter:
    """Judges one opted-in workload per call; safe to call from several worker threads."""

    def __init__(
        self,
        cluster: Cluster,
        cache: WorkloadLookup,
        metrics: OperatorMetrics,
        settings: RestartSettings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.cache = cache
        self.metrics = metrics
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._written: dict[tuple[str, TargetRef], float] = {}
        self._rolled: dict[WorkloadKey, float] = {}
        self._sent: dict[WorkloadKey, tuple[str, str]] = {}
        self._history: dict[tuple[str, str], list[dict[str, str]]] = {}
        self._told: set[tuple[WorkloadKey, object]] = set()

    # -- what the Render reconcile tells us ----------------------------------------------------

    def written(self, namespace: str, ref: TargetRef) -> list[WorkloadKey]:
        """Note a target write; the opted-in workloads that consume it (to queue after settle)."""
        with self._lock:
            self._written[(namespace, ref)] = self._clock()
        keys = []
        for plural, raw in self.cache.workload_items():
            meta = raw.get("metadata") or {}
            if meta.get("namespace") != namespace or not _asked(raw):
                continue
            if ref in consumed_objects(_template_spec(raw)):
                keys.append((plural, namespace, meta.get("name") or ""))
        return keys

    # -- the reconcile -------------------------------------------------------------------------

    def reconcile(self, key: WorkloadKey) -> float | None:
        """Roll the workload if its targets moved; the seconds until it may, or ``None``."""
        plural, namespace, name = key
        raw = self.cache.workload(plural, namespace, name)
        if raw is None:
            self._drop(key)
            return None
        if not _asked(raw):
            return None
        template = (raw.get("spec") or {}).get("template") or {}
        consumed = consumed_objects(_template_spec(raw))
        renders = self._renders_writing(namespace, consumed)
        if not renders:
            self._tell_once(key, raw, template)
            return None
        data: dict[TargetRef, dict[str, str]] = {}
        for ref in sorted({ref for _, ref in renders}, key=lambda r: (r.kind, r.name)):
            existing = self.cluster.read_target(ref, namespace)
            if existing is not None:
                data[ref] = existing.data
        if not data:
            return None
        wanted = fingerprint(data)
        meta = raw.get("metadata") or {}
        version = str(meta.get("resourceVersion", ""))
        current = ((template.get("metadata") or {}).get("annotations") or {}).get(
            FINGERPRINT_ANNOTATION
        )
        with self._lock:
            sent = self._sent.get(key)
        if current == wanted or sent == (wanted, version):
            return None  # rolled for this already (the cache may not show our patch yet)
        created = _epoch(meta.get("creationTimestamp"))
        if current is None and not self._written_since(namespace, renders, data, created):
            return None  # the pods started with what the targets hold now
        last = self._last_rollout(key, renders)
        wait = last + self.settings.min_interval - self._clock()
        if wait > 0:
            return wait
        kind = WORKLOAD_KINDS[plural]
        try:
            self.cluster.patch_template_annotation(
                plural, namespace, name, FINGERPRINT_ANNOTATION, wanted
            )
        except ApiException as error:
            if error.status == 404:
                return None
            self._report_failure(raw, kind, renders, api_failure(error, f"patch {kind}/{name}"))
            raise RestartFailed(f"{kind} {namespace}/{name}") from None
        now = self._clock()
        with self._lock:
            self._sent[key] = (wanted, version)
            self._rolled[key] = now
        since = last or (created if current is None else 0.0)
        present = [pair for pair in renders if pair[1] in data]
        self._report(raw, kind, present, wanted=wanted, now=now, since=since)
        return None

    # -- steps ---------------------------------------------------------------------------------

    def _renders_writing(
        self, namespace: str, consumed: frozenset[TargetRef]
    ) -> list[tuple[DynamicConfigRender, TargetRef]]:
        found = []
        for raw in self.cache.render_items():
            if (raw.get("metadata") or {}).get("namespace") != namespace:
                continue
            try:
                render = DynamicConfigRender.from_api(raw)
            except ValidationError:
                continue  # its own reconcile reports it
            target = render.spec.target
            ref = (
                TargetRef("ConfigMap", target.config_map)
                if target.config_map
                else TargetRef("Secret", target.secret)
                if target.secret
                else None
            )
            if ref is not None and ref in consumed:
                found.append((render, ref))
        return found

    def _written_at(self, namespace: str, render: DynamicConfigRender, ref: TargetRef) -> float:
        with self._lock:
            seen = self._written.get((namespace, ref), 0.0)
        return max(float(int(seen)), _epoch(render.status.rendered_at))

    def _written_since(
        self,
        namespace: str,
        renders: list[tuple[DynamicConfigRender, TargetRef]],
        data: Mapping[TargetRef, object],
        since: float,
    ) -> bool:
        """Whether a consumed target was written after ``since`` (whole seconds, as the API)."""
        return any(
            self._written_at(namespace, render, ref) > since
            for render, ref in renders
            if ref in data
        )

    def _last_rollout(
        self, key: WorkloadKey, renders: list[tuple[DynamicConfigRender, TargetRef]]
    ) -> float:
        plural, _, name = key
        kind = WORKLOAD_KINDS[plural]
        with self._lock:
            last = self._rolled.get(key, 0.0)
        for render, _ in renders:
            for entry in render.status.restarts:
                if entry.kind == kind and entry.name == name:
                    last = max(last, _epoch(entry.restarted_at))
        return last

    def _drop(self, key: WorkloadKey) -> None:
        with self._lock:
            self._rolled.pop(key, None)
            self._sent.pop(key, None)

    # -- reporting -----------------------------------------------------------------------------

    def _report(
        self,
        raw: dict[str, Any],
        kind: str,
        present: list[tuple[DynamicConfigRender, TargetRef]],
        *,
        wanted: str,
        now: float,
        since: float,
    ) -> None:
        """Events on the workload and on each Render whose target moved since ``since`` (the
        previous rollout, or the workload's creation), and those Renders' status."""
        meta = raw.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        self.metrics.restarts.inc()
        moved = [
            (render, ref)
            for render, ref in present
            if self._written_at(namespace, render, ref) >= int(since)
        ] or present  # nothing seen moving (a restarted operator): name them all
        changed = ", ".join(sorted({f"{ref.kind} {ref.name}" for _, ref in moved}))
        log.info(
            "workload_restarted",
            extra={"workload": f"{kind}/{namespace}/{name}", "targets": changed},
        )
        self.cluster.post_event_on(
            _involved(raw, kind),
            "Normal",
            Reason.RESTARTED,
            f"rolled out for changed {changed} (dynamic-config.rs/restart-on-change)",
            action="Restart",
        )
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        entry = {"kind": kind, "name": name, "restartedAt": stamp, "fingerprint": wanted}
        for render in {render.name: render for render, _ in moved}.values():
            self.cluster.post_event(
                render, "Normal", Reason.RESTARTED, f"rolled out {kind} {name}: its target changed"
            )
            self._record(render, entry)

    def _record(self, render: DynamicConfigRender, entry: dict[str, str]) -> None:
        """Put ``entry`` first in the Render's ``status.restarts`` (one per workload, capped)."""
        slot = (render.namespace or "", render.uid)
        with self._lock:
            history = self._history.get(slot)
            if history is None:
                history = [item.model_dump(by_alias=True) for item in render.status.restarts]
            history = [entry] + [
                item
                for item in history
                if (item["kind"], item["name"]) != (entry["kind"], entry["name"])
            ]
            history = history[:HISTORY]
            self._history[slot] = history
            try:
                self.cluster.patch_status(render, {"restarts": history})
            except ApiException as error:
                if error.status != 404:
                    log.warning(
                        "restart_status_refused",
                        extra={
                            "render": f"{render.namespace}/{render.name}",
                            "status": error.status,
                        },
                    )

    def _report_failure(
        self,
        raw: dict[str, Any],
        kind: str,
        renders: list[tuple[DynamicConfigRender, TargetRef]],
        message: str,
    ) -> None:
        self.metrics.restart_failures.inc()
        meta = raw.get("metadata") or {}
        log.warning(
            "restart_failed",
            extra={"workload": f"{kind}/{meta.get('namespace')}/{meta.get('name')}"},
        )
        self.cluster.post_event_on(
            _involved(raw, kind), "Warning", Reason.RESTART_FAILED, message, action="Restart"
        )
        for render in {render.name: render for render, _ in renders}.values():
            self.cluster.post_event(render, "Warning", Reason.RESTART_FAILED, message)

    def _tell_once(self, key: WorkloadKey, raw: dict[str, Any], template: dict[str, Any]) -> None:
        """A workload that asked but consumes no Render's target hears why, once per generation."""
        meta = raw.get("metadata") or {}
        seen = (key, meta.get("generation"))
        with self._lock:
            if seen in self._told:
                return
            self._told.add(seen)
        env_inject = ENV_INJECT_ANNOTATION in (
            (template.get("metadata") or {}).get("annotations") or {}
        )
        hint = (
            "its env-inject pods restart in place with dynamic-config.rs/env-restart"
            if env_inject
            else "no Secret or ConfigMap it consumes is a DynamicConfigRender's target"
        )
        self.cluster.post_event_on(
            _involved(raw, WORKLOAD_KINDS[key[0]]),
            "Normal",
            "NothingToRestartFor",
            f"dynamic-config.rs/restart-on-change has nothing to act on: {hint}",
            action="Restart",
        )


def _asked(raw: Mapping[str, Any]) -> bool:
    return ((raw.get("metadata") or {}).get("annotations") or {}).get(RESTART_ANNOTATION) == "true"


def _template_spec(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = ((raw.get("spec") or {}).get("template") or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _involved(raw: Mapping[str, Any], kind: str) -> dict[str, Any]:
    meta = raw.get("metadata") or {}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }


def _epoch(stamp: str | None) -> float:
    """Seconds since the epoch of an RFC 3339 UTC stamp (``…Z``); 0 when absent or unreadable."""
    if not stamp:
        return 0.0
    try:
        return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return 0.0
