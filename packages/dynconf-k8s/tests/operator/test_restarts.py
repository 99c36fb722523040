"""Workloads annotated ``restart-on-change`` are rolled when a Render's target they consume
changes — against the real API server, under a ServiceAccount bound to RULES + RESTART_RULES.

Without a kubelet or controller manager a Deployment is an object only: a rollout shows as the
pod template's ``rendered-fingerprint`` annotation and ``metadata.generation`` moving.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch  # type: ignore[import-untyped]
from urllib3.exceptions import ProtocolError

from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.restarts import FINGERPRINT_ANNOTATION, RESTART_ANNOTATION, fingerprint
from dynconf_k8s.operator.targets import TargetRef
from dynconf_k8s.operator.types import CLASS_KIND, FIELD_MANAGER, RENDER_KIND

from .test_reconcile import file_class, has_data, render, write_doc

Kube = Any
Start = Callable[..., Operator]
QUIET = 2.0
"""Seconds a test watches for a rollout that must not come (there is no event for nothing)."""


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "registry.invalid/app:1", **extra}]}


def workload(
    kind: str, name: str, spec: dict[str, Any], *, asked: str | None = "true"
) -> dict[str, Any]:
    annotations = {} if asked is None else {RESTART_ANNOTATION: asked}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }
    if kind == "StatefulSet":
        body["spec"]["serviceName"] = name
    return body


def create(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    apps = client.AppsV1Api(kube.core.api_client)
    call = {
        "Deployment": apps.create_namespaced_deployment,
        "StatefulSet": apps.create_namespaced_stateful_set,
        "DaemonSet": apps.create_namespaced_daemon_set,
    }[body["kind"]]
    made = call(namespace, body)
    # The operator orders a target's writes against the workload's creation by the API's whole
    # seconds (a workload created after the last write is not rolled for it); a write in the
    # same second as the creation cannot be ordered, so the tests' changes start in the next.
    created = made.metadata.creation_timestamp.timestamp()
    time.sleep(max(0.0, created + 1.05 - time.time()))


def read(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, Any]:
    apps = client.AppsV1Api(kube.core.api_client)
    call = {
        "Deployment": apps.read_namespaced_deployment,
        "StatefulSet": apps.read_namespaced_stateful_set,
        "DaemonSet": apps.read_namespaced_daemon_set,
    }[kind]
    loaded: dict[str, Any] = json.loads(call(name, namespace, _preload_content=False).data)
    return loaded


def stamp(item: dict[str, Any]) -> str | None:
    template = item["spec"]["template"].get("metadata") or {}
    value = (template.get("annotations") or {}).get(FINGERPRINT_ANNOTATION)
    return str(value) if value is not None else None


class Generations:
    """Every ``metadata.generation`` a Deployment reaches, with when it was seen (a watch)."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self.seen: list[tuple[int, float]] = []
        self._stopping = False
        self._stream = watch.Watch()
        self._moved = threading.Condition()
        apps = client.AppsV1Api(kube.core.api_client)
        self._thread = threading.Thread(
            target=self._follow, args=(apps, namespace, name), name="test-generations"
        )
        self._thread.start()

    def _follow(self, apps: Any, namespace: str, name: str) -> None:
        try:
            for event in self._stream.stream(
                apps.list_namespaced_deployment,
                namespace=namespace,
                field_selector=f"metadata.name={name}",
                timeout_seconds=120,
                deserialize=False,
            ):
                generation = int(event["object"]["metadata"]["generation"])
                with self._moved:
                    if not self.seen or self.seen[-1][0] != generation:
                        self.seen.append((generation, time.monotonic()))
                        self._moved.notify_all()
        except ProtocolError:
            if not self._stopping:
                raise  # closed under the read by stop(): the end, not a failure

    def wait_for(self, generation: int, timeout: float = 30.0) -> float:
        """When ``generation`` was first seen."""
        with self._moved:
            assert self._moved.wait_for(
                lambda: any(g >= generation for g, _ in self.seen), timeout
            ), f"generation {generation} not reached in {timeout} s: {self.seen}"
            return next(at for g, at in self.seen if g >= generation)

    def stop(self) -> None:
        self._stopping = True
        self._stream.stop()
        response = getattr(self._stream, "_resp", None)
        if response is not None:
            response.close()
        self._thread.join(10)


@pytest.fixture
def generations(kube: Kube, namespace: str) -> Any:
    followers: list[Generations] = []

    def follow(name: str) -> Generations:
        follower = Generations(kube, namespace, name)
        followers.append(follower)
        return follower

    yield follow
    for follower in followers:
        follower.stop()


def configmap_render(kube: Kube, namespace: str, root: Path, port: int) -> None:
    write_doc(root, {"port": port})
    file_class(kube, namespace, root)
    render(kube, namespace, "cfg", {"configMap": "out", "file": "config.toml"})
    kube.await_configmap(namespace, "out", has_data("config.toml", f"port = {port}"))
    kube.await_render(namespace, "cfg", kube.ready("Rendered"))


VOLUME = {"volumes": [{"name": "cfg", "configMap": {"name": "out"}}]}


def test_a_burst_of_changes_rolls_the_opted_in_deployment_exactly_once(
    restarting_operator: Start, kube: Kube, namespace: str, tmp_path: Path, generations: Any
) -> None:
    restarting_operator(min_interval=3.0, settle=3.0)
    configmap_render(kube, namespace, tmp_path, 9000)
    create(kube, namespace, workload("Deployment", "web", {**pod_spec(), **VOLUME}))
    followed = generations("web")
    followed.wait_for(1)

    for port in (9100, 9200, 9300):  # inside one settle window
        write_doc(tmp_path, {"port": port})
        time.sleep(0.2)
    kube.await_configmap(namespace, "out", has_data("config.toml", "port = 9300"))
    followed.wait_for(2)
    time.sleep(3.0 + 3.0 + QUIET)  # past the interval and a settle: nothing more is due

    assert [g for g, _ in followed.seen] == [1, 2]
    rolled = read(kube, namespace, "Deployment", "web")
    data = kube.core.read_namespaced_config_map("out", namespace).data
    assert stamp(rolled) == fingerprint({TargetRef("ConfigMap", "out"): data})


def test_a_rollout_is_reported_in_the_render_status_and_as_events(
    restarting_operator: Start, kube: Kube, namespace: str, tmp_path: Path, generations: Any
) -> None:
    restarting_operator(min_interval=1.0, settle=1.0)
    configmap_render(kube, namespace, tmp_path, 9000)
    create(kube, namespace, workload("Deployment", "web", {**pod_spec(), **VOLUME}))
    write_doc(tmp_path, {"port": 9100})

    generations("web").wait_for(2)
    status = kube.await_render(
        namespace, "cfg", lambda item: bool((item.get("status") or {}).get("restarts"))
    )["status"]
    (entry,) = status["restarts"]
    assert entry["kind"] == "Deployment"
    assert entry["name"] == "web"
    assert entry["restartedAt"].endswith("Z")
    assert entry["fingerprint"] == stamp(read(kube, namespace, "Deployment", "web"))
    on_render = kube.await_event(namespace, "cfg", "Restarted")
    assert on_render["message"] == "rolled out Deployment web: its target changed"
    on_workload = kube.await_event(namespace, "web", "Restarted")
    assert on_workload["involvedObject"]["kind"] == "Deployment"
    assert "ConfigMap out" in on_workload["message"]


def test_workloads_that_did_not_ask_are_never_patched(
    restarting_operator: Start, kube: Kube, namespace: str, tmp_path: Path, generations: Any
) -> None:
    restarting_operator(min_interval=1.0, settle=1.0)
    configmap_render(kube, namespace, tmp_path, 9000)
    env_from = pod_spec(envFrom=[{"configMapRef": {"name": "out"}}])
    create(kube, namespace, workload("Deployment", "silent", {**pod_spec(), **VOLUME}, asked=None))
    create(kube, namespace, workload("Deployment", "declined", env_from, asked="false"))
    create(kube, namespace, workload("StatefulSet", "set", {**pod_spec(), **VOLUME}, asked=None))
    create(kube, namespace, workload("Deployment", "asked", {**pod_spec(), **VOLUME}))
    write_doc(tmp_path, {"port": 9100})

    generations("asked").wait_for(2)  # the operator did act on this change
    time.sleep(QUIET)

    for kind, name in (
        ("Deployment", "silent"),
        ("Deployment", "declined"),
        ("StatefulSet", "set"),
    ):
        item = read(kube, namespace, kind, name)
        assert item["metadata"]["generation"] == 1, name
        assert stamp(item) is None, name
        ours = [
            e for e in kube.events(namespace, name) if e.get("reportingComponent") == FIELD_MANAGER
        ]
        assert ours == [], name


def test_the_minimum_interval_spaces_two_rollouts(
    restarting_operator: Start, kube: Kube, namespace: str, tmp_path: Path, generations: Any
) -> None:
    restarting_operator(min_interval=6.0, settle=0.5)
    configmap_render(kube, namespace, tmp_path, 9000)
    create(kube, namespace, workload("Deployment", "web", {**pod_spec(), **VOLUME}))
    followed = generations("web")
    write_doc(tmp_path, {"port": 9100})
    first = followed.wait_for(2)
    write_doc(tmp_path, {"port": 9200})  # right after the first rollout

    second = followed.wait_for(3, timeout=30)

    assert second - first >= 6.0 - 1.0  # the floor, less the watch's own delivery delay
    print(f"\nrestarts: second rollout {second - first:.1f} s after the first (floor 6 s)")
    assert [g for g, _ in followed.seen] == [1, 2, 3]


def test_a_workload_created_after_the_render_is_not_rolled_for_it(
    restarting_operator: Start, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    restarting_operator(min_interval=1.0, settle=0.5)
    configmap_render(kube, namespace, tmp_path, 9000)
    create(kube, namespace, workload("Deployment", "web", {**pod_spec(), **VOLUME}))
    time.sleep(QUIET)

    item = read(kube, namespace, "Deployment", "web")
    assert item["metadata"]["generation"] == 1
    assert stamp(item) is None


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        (
            "StatefulSet",
            {
                **pod_spec(),
                "volumes": [
                    {"name": "p", "projected": {"sources": [{"secret": {"name": "creds"}}]}}
                ],
            },
        ),
        (
            "DaemonSet",
            pod_spec(
                env=[
                    {
                        "name": "PORT",
                        "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PORT"}},
                    }
                ]
            ),
        ),
    ],
)
def test_statefulsets_and_daemonsets_roll_for_a_secret_they_read(
    restarting_operator: Start,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    kind: str,
    spec: dict[str, Any],
) -> None:
    restarting_operator(min_interval=1.0, settle=0.5)
    write_doc(tmp_path, {"port": 9000})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "creds", {"secret": "creds", "shape": "envEntries"})
    kube.await_secret(namespace, "creds", lambda item: "PORT" in (item.get("data") or {}))
    create(kube, namespace, workload(kind, "w", spec))
    write_doc(tmp_path, {"port": 9100})

    deadline = time.monotonic() + 30
    while stamp(item := read(kube, namespace, kind, "w")) is None:
        assert time.monotonic() < deadline, f"{kind} was not rolled"
        time.sleep(0.2)
    assert item["metadata"]["generation"] == 2


def test_an_operator_without_restarts_never_touches_an_opted_in_workload(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    configmap_render(kube, namespace, tmp_path, 9000)
    create(kube, namespace, workload("Deployment", "web", {**pod_spec(), **VOLUME}))
    write_doc(tmp_path, {"port": 9100})
    kube.await_configmap(namespace, "out", has_data("config.toml", "port = 9100"))
    time.sleep(QUIET)

    assert operator.restarter is None
    assert read(kube, namespace, "Deployment", "web")["metadata"]["generation"] == 1


def test_an_opted_in_workload_reading_no_target_hears_why_once(
    restarting_operator: Start, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    restarting_operator(min_interval=1.0, settle=0.5)
    kube.create(CLASS_KIND, namespace, "files", {"source": "file", "endpoint": str(tmp_path)})
    body = workload("Deployment", "env", pod_spec())
    body["spec"]["template"]["metadata"]["annotations"] = {
        "dynamic-config.rs/inject": "true",
        "dynamic-config.rs/env-inject": "app",
    }
    create(kube, namespace, body)

    event = kube.await_event(namespace, "env", "NothingToRestartFor")

    assert "dynamic-config.rs/env-restart" in event["message"]
    assert RENDER_KIND not in event["message"]
