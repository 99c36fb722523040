"""The installation reconfigures itself live on a kubelet node (issue 20, item 1).

The chart with ``webhook.installation.reload: resource`` and two webhook replicas: an edit of
the ``DynamicConfigInstallation`` reaches both replicas (their status entries say so) and the
next pod gets the new default, with the same webhook pods serving (no restart); a bad edit is
refused, reported in the condition and an Event, and the last good installation keeps
admitting. The release selects only pods labelled ``dc-live: "yes"`` (an objectSelector), so it
never meets another release's pods.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.inforce.resource import EVENT_NAMESPACE, GROUP, INVALID_REASON, PLURAL, VERSION
from tests.e2e.conftest import InstallChart, Release, new_namespace
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e

NAME = "dc-live"
VALUES: dict[str, Any] = {
    "webhook": {
        "replicas": 2,
        "installation": {"reload": "resource"},
        "objectSelector": {"matchLabels": {"dc-live": "yes"}},
    },
    "agent": {
        "defaults": {
            "source": "consul",
            "path": "/config/app.json",
            "watchSeconds": 30,
            "perStore": {"consul": {"endpoint": "http://10.88.0.1:8500"}},
        }
    },
}


def _crds(api_client: object) -> set[str]:
    extensions = client.ApiextensionsV1Api(api_client)
    return {c.metadata.name for c in extensions.list_custom_resource_definition().items}


@pytest.fixture(scope="module")
def live(install_chart: InstallChart, kube_node_client: object) -> Iterator[Release]:
    before = _crds(kube_node_client)
    began = time.monotonic()
    with install_chart(NAME, VALUES, skip_crds=False) as release:
        print(f"\nlive: release with 2 replicas Ready in {time.monotonic() - began:.1f} s")
        yield release
    extensions = client.ApiextensionsV1Api(kube_node_client)
    for crd in _crds(kube_node_client) - before:
        if crd.endswith(".dynamic-config.rs"):
            extensions.delete_custom_resource_definition(crd)


def _resource(release: Release) -> dict[str, Any]:
    item: dict[str, Any] = client.CustomObjectsApi(release.api_client).get_cluster_custom_object(
        GROUP, VERSION, PLURAL, release.fullname
    )
    return item


def _edit(release: Release, **spec: Any) -> int:
    done = client.CustomObjectsApi(release.api_client).patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, release.fullname, {"spec": spec}
    )
    return int(done["metadata"]["generation"])


def _converged(release: Release, generation: int, *, valid: bool, timeout: float = 60) -> float:
    """Seconds until every webhook replica's entry observed ``generation`` (with ``valid``)."""
    pods = {p.metadata.name for p in release.webhook_pods()}
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        entries = {
            e["name"]: e for e in (_resource(release).get("status") or {}).get("replicas") or []
        }
        if all(
            n in entries and entries[n]["observedGeneration"] == generation
            and entries[n]["valid"] is valid
            for n in pods
        ):  # fmt: skip
            return time.monotonic() - began
        time.sleep(0.2)
    raise AssertionError(f"replicas never reported generation {generation}: {entries}")


def _event_reasons(release: Release, wanted: str, timeout: float = 20) -> set[str]:
    """The reasons of the Events about the installation, once ``wanted`` is among them."""
    deadline = time.monotonic() + timeout
    while True:
        events = release.core.list_namespaced_event(
            EVENT_NAMESPACE, field_selector=f"involvedObject.name={release.fullname}"
        ).items
        reasons = {e.reason for e in events}
        if wanted in reasons or time.monotonic() > deadline:
            return reasons
        time.sleep(0.2)


def _watch_flag(release: Release, namespace: str) -> str:
    pod = {
        "metadata": {
            "name": "app",
            "labels": {"dc-live": "yes"},
            "annotations": {"dynamic-config.rs/inject": "true", "dynamic-config.rs/key": "a.json"},
        },
        "spec": {"containers": [{"name": "app", "image": BUSYBOX}]},
    }
    made = release.core.create_namespaced_pod(namespace, pod, dry_run="All")
    [agent] = [c for c in made.spec.containers if c.name == "dynamic-config-agent"]
    return str(agent.args[agent.args.index("--watch") + 1])


def _webhook_pods(release: Release) -> dict[str, int]:
    return {
        p.metadata.name: sum(s.restart_count for s in p.status.container_statuses or [])
        for p in release.webhook_pods()
    }


def test_an_edit_reaches_every_replica_and_the_next_pod_without_a_restart(live: Release) -> None:
    namespace = new_namespace(live.core)
    live.namespaces.append(namespace)
    first = int(_resource(live)["metadata"]["generation"])
    _converged(live, first, valid=True)
    pods = _webhook_pods(live)
    assert len(pods) == 2
    assert _watch_flag(live, namespace) == "30"

    newer = _edit(live, watchSeconds="7")
    took = _converged(live, newer, valid=True)
    print(f"\nlive: both replicas applied generation {newer} {took:.1f} s after the edit")

    assert _watch_flag(live, namespace) == "7"
    assert _webhook_pods(live) == pods, "the same pods, never restarted"
    item = _resource(live)
    assert item["status"]["observedGeneration"] == newer
    assert {e["appliedGeneration"] for e in item["status"]["replicas"]} == {newer}


def test_a_bad_edit_is_reported_and_the_last_good_keeps_admitting(live: Release) -> None:
    namespace = new_namespace(live.core)
    live.namespaces.append(namespace)
    good = _edit(live, watchSeconds="9")
    _converged(live, good, valid=True)

    bad = _edit(live, watchSeconds="soon")
    _converged(live, bad, valid=False)

    assert _watch_flag(live, namespace) == "9"
    item = _resource(live)
    [condition] = [c for c in item["status"]["conditions"] if c["type"] == "Valid"]
    assert (condition["status"], condition["reason"]) == ("False", INVALID_REASON)
    assert "DYNAMIC_CONFIG_AGENT_WATCH_SECONDS" in condition["message"]
    assert {e["appliedGeneration"] for e in item["status"]["replicas"]} == {good}
    # a replica writes its status entry first and the Event after it, so the Event is awaited
    assert INVALID_REASON in _event_reasons(live, INVALID_REASON)
    _edit(live, watchSeconds="30")
