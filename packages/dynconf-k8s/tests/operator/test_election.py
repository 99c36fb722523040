"""Two operator processes over one Lease: one acts, the other takes over when it stops."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.operator.election import LEASE_NAME
from dynconf_k8s.operator.types import CLASS_KIND, RENDER_KIND

OPERATOR = Path(sys.executable).with_name("dynamic-config-operator")


class OperatorProcess:
    """``dynamic-config-operator`` as a subprocess; its JSON log lines are collected."""

    def __init__(
        self, name: str, namespace: str, kubeconfig: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        env = {
            **os.environ,
            # the pod audit needs RULES + AUDIT_RULES; a test that wants it passes both
            "DYNAMIC_CONFIG_OPERATOR_POD_AUDIT": "false",
            **(extra_env or {}),
            "KUBECONFIG": str(kubeconfig),
            "POD_NAME": name,
            "POD_NAMESPACE": namespace,
            "DYNAMIC_CONFIG_OPERATOR_METRICS_ADDR": "127.0.0.1:0",
        }
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.name = name
        self.process = subprocess.Popen(
            [str(OPERATOR)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[dict[str, Any]] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"event": line.strip()}
            with self._seen:
                self.lines.append(entry)
                self._seen.notify_all()

    def await_event(self, event: str, timeout: float = 30.0, **fields: str) -> dict[str, Any]:
        """The first line logging ``event`` (with ``fields``, when given), within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while True:
                for entry in self.lines:
                    if entry.get("event") == event and all(
                        entry.get(key) == value for key, value in fields.items()
                    ):
                        return entry
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"{self.name} never logged {event}: {self.lines[-5:]}"
                self._seen.wait(remaining)

    def renders(self) -> float:
        port = self.await_event("metrics_serving")["address"].rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            if line.startswith("dynamic_config_operator_renders_total "):
                return float(line.split()[1])
        raise AssertionError("no renders_total series")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)


@pytest.fixture
def pair(operator_kubeconfig: Path, namespace: str) -> Iterator[list[OperatorProcess]]:
    started = [OperatorProcess(name, namespace, operator_kubeconfig) for name in ("op-a", "op-b")]
    yield started
    for process in started:
        if process.process.poll() is None:
            process.stop()


def lease(kube_client: Any, namespace: str) -> Any:
    return client.CoordinationV1Api(kube_client).read_namespaced_lease(LEASE_NAME, namespace)


def test_two_replicas_elect_one_leader_and_the_follower_takes_over(
    pair: list[OperatorProcess], kube: Any, kube_client: Any, namespace: str, tmp_path: Path
) -> None:
    document = tmp_path / "app" / "config.json"
    document.parent.mkdir()
    document.write_text('{"port": 1}')
    kube.create(CLASS_KIND, namespace, "files", {"source": "file", "endpoint": str(tmp_path)})
    kube.create(
        RENDER_KIND,
        namespace,
        "r",
        {
            "class": "files",
            "key": "app/config.json",
            "intervalSeconds": 1,
            "target": {"configMap": "out", "file": "c.toml"},
        },
    )
    holder = kube.await_lease(namespace, LEASE_NAME)["spec"]["holderIdentity"]
    first = next(p for p in pair if p.name == holder)
    follower = next(p for p in pair if p is not first)
    kube.await_configmap(
        namespace, "out", lambda cm: "port = 1" in (cm.get("data") or {}).get("c.toml", "")
    )
    follower.await_event("leader_waiting")
    # the status is written after the counter moves, so awaiting it orders the scrape
    first_status = kube.await_render(namespace, "r", kube.ready("Rendered"))["status"]
    assert first.renders() >= 1
    assert follower.renders() == 0  # a follower does not reconcile, so its series stay flat
    before = lease(kube_client, namespace).spec
    assert before.lease_duration_seconds == 15 and before.lease_transitions == 0

    assert first.stop() == 0  # a clean stop hands the lease back
    follower.await_event("leader_elected", timeout=15)
    after = lease(kube_client, namespace).spec
    assert after.holder_identity == follower.name
    assert after.lease_transitions == 1
    document.write_text('{"port": 2}')
    kube.await_configmap(
        namespace,
        "out",
        lambda cm: "port = 2" in (cm.get("data") or {}).get("c.toml", ""),
        timeout=15,
    )
    try:
        kube.await_render(
            namespace,
            "r",
            lambda item: (item.get("status") or {}).get("renderedAt") != first_status["renderedAt"],
        )
    except AssertionError as error:
        raise AssertionError(f"{error}; the new leader logged {follower.lines[-8:]}") from None
    assert follower.renders() >= 1


def test_a_lost_lease_ends_the_process(
    operator_kubeconfig: Path, kube_client: Any, namespace: str
) -> None:
    process = OperatorProcess("op-solo", namespace, operator_kubeconfig)
    try:
        process.await_event("leader_elected")
        api = client.CoordinationV1Api(kube_client)
        taken = api.read_namespaced_lease(LEASE_NAME, namespace)
        taken.spec.holder_identity = "intruder"
        api.replace_namespaced_lease(LEASE_NAME, namespace, taken)
        assert process.process.wait(timeout=20) == 1
        assert process.await_event("the leader lease was lost")
    finally:
        if process.process.poll() is None:
            process.stop()


def test_replicas_ten_minutes_apart_either_way_keep_one_leader_and_a_killed_one_is_replaced(
    operator_kubeconfig: Path, kube: Any, kube_client: Any, namespace: str, skewed_env: Any
) -> None:
    """Expiry is judged on each replica's monotonic clock, never by comparing the Lease's
    renewTime with its own wall clock: one replica ten minutes ahead and one ten minutes
    behind keep one leader through several renewals, and a killed leader (no hand-back) is
    replaced within its 15 s term plus one try."""
    ahead = OperatorProcess("op-ahead", namespace, operator_kubeconfig, skewed_env(10))
    behind = OperatorProcess("op-behind", namespace, operator_kubeconfig, skewed_env(-10))
    try:
        holder = kube.await_lease(namespace, LEASE_NAME)["spec"]["holderIdentity"]
        leader, follower = (ahead, behind) if holder == ahead.name else (behind, ahead)
        follower.await_event("leader_waiting")
        time.sleep(17)  # three renewals (every 5 s) and more than a whole 15 s term
        spec = lease(kube_client, namespace).spec
        assert (spec.holder_identity, spec.lease_transitions) == (leader.name, 0)
        # the leader really writes its skewed clock into renewTime
        skew = (spec.renew_time - datetime.datetime.now(datetime.UTC)).total_seconds()
        assert abs(skew) > 8 * 60, f"renewTime is {skew:.0f} s off the true clock"
        assert not [e for e in follower.lines if e.get("event") == "leader_elected"]
        assert leader.process.poll() is None and follower.process.poll() is None
        leader.process.kill()
        leader.process.wait(10)
        killed = time.monotonic()
        follower.await_event("leader_elected", timeout=40)
        took = time.monotonic() - killed
        assert took <= 15 + 5 + 3, f"the follower took over after {took:.1f} s"
        spec = lease(kube_client, namespace).spec
        assert (spec.holder_identity, spec.lease_transitions) == (follower.name, 1)
    finally:
        for process in (ahead, behind):
            if process.process.poll() is None:
                process.stop()
