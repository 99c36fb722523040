"""Leg 8 of the end-to-end ladder (issue 15): selfRotate under load, nothing refused.

A release of its own (``dynconf-rotation``): ``webhook.selfRotate.enabled``, two replicas,
``failurePolicy: Fail``, selecting only pods labelled for this leg (its namespace is not gated,
so the session's release never sees them). An annotated pod is created every ``EVERY`` seconds
(and deleted at once: admission is what rotation can break) while rotations are forced.

Forcing uses the contract, no test knob: the leader rotates when the Secret's
``dynamic-config.rs/not-after`` annotation is missing (the lease round is every 15 s), so the
leg removes it. Each rotation must reach the caBundle (new CA + previous CA, the two-CA window)
and then every replica's serving pair (kubelet Secret sync, then the webhook's 60 s reload,
seen as a changed ``dynamic_config_certificate_expires_at_seconds``) before the next is forced:
a second rotation before a replica reloads would leave it serving a leaf whose CA has left the
bundle, which is what the soak exists to catch if it ever happens on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.conftest import PROBE, InstallChart, Release
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e

ROTATIONS = 2
EVERY = 3.0
LABEL = {"dynconf-e2e/release": "rotation"}
VALUES: dict[str, Any] = {
    "webhook": {
        "replicas": 2,
        "failurePolicy": "Fail",
        "selfRotate": {"enabled": True},
        "objectSelector": {"matchLabels": LABEL},
    }
}
NOT_AFTER = "dynamic-config.rs/not-after"


@pytest.fixture(scope="module")
def rotating(install_chart: InstallChart) -> Iterator[tuple[Release, str]]:
    with install_chart("dynconf-rotation", VALUES) as release:
        namespace = release.injecting_namespace()
        release.await_injection(namespace, LABEL)
        yield release, namespace


def _ca_bundle(release: Release) -> str:
    admission = client.AdmissionregistrationV1Api(release.api_client)
    mwc = admission.read_mutating_webhook_configuration(release.fullname)
    return str(mwc.webhooks[0].client_config.ca_bundle)


def _rotation_logs(release: Release) -> str:
    """Every replica's rotation and TLS lines, for a failure message."""
    lines = []
    for pod in release.webhook_pods():
        log = release.core.read_namespaced_pod_log(pod.metadata.name, release.namespace)
        lines += [f"{pod.metadata.name}: {line}" for line in log.splitlines()
                  if "rotat" in line or "tls" in line or "lease" in line]  # fmt: skip
    return "\n".join(lines[-60:])


class Creator(threading.Thread):
    """An annotated pod every ``EVERY`` seconds until stopped; counts admitted and refused."""

    def __init__(self, core: Any, namespace: str) -> None:
        super().__init__(name="rotation-creator", daemon=True)
        self.core, self.namespace = core, namespace
        self.stop = threading.Event()
        self.admitted = 0
        self.refused: list[str] = []

    def run(self) -> None:
        index = 0
        while not self.stop.is_set():
            name = f"rot-{index:04d}"
            index += 1
            body = {
                "metadata": {"name": name, "labels": LABEL, "annotations": {
                    f"dynamic-config.rs/{k}": v for k, v in PROBE.items()}},
                "spec": {"containers": [{"name": "app", "image": BUSYBOX,
                                         "imagePullPolicy": "Never"}]},
            }  # fmt: skip
            try:
                made = self.core.create_namespaced_pod(self.namespace, body)
                assert any(c.name.startswith("dynamic-config-agent") for c in
                           [*(made.spec.init_containers or []), *made.spec.containers])  # fmt: skip
                self.admitted += 1
                self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
            except (client.ApiException, AssertionError) as err:
                self.refused.append(f"{name}: {getattr(err, 'body', err)}")
            self.stop.wait(EVERY)


def test_pods_are_admitted_across_forced_rotations(rotating: tuple[Release, str]) -> None:
    release, namespace = rotating
    core = release.core
    secret = f"{release.fullname}-webhook-tls"
    creator = Creator(core, namespace)
    began = time.monotonic()
    creator.start()
    cycles = []
    try:
        for _ in range(ROTATIONS):
            bundle, served = _ca_bundle(release), release.serving_expiries()
            forced = time.monotonic()
            core.patch_namespaced_secret(
                secret, release.namespace, {"metadata": {"annotations": {NOT_AFTER: None}}}
            )
            deadline = forced + 60
            while _ca_bundle(release) == bundle:
                assert time.monotonic() < deadline, "no rotation reached the caBundle in 60 s"
                time.sleep(1)
            bundled = time.monotonic()
            deadline = bundled + 150
            while True:
                now = release.serving_expiries()
                if len(now) == len(served) and all(now[p] != served.get(p) for p in now):
                    break
                assert time.monotonic() < deadline, f"replicas still serve the old pair: {now}"
                time.sleep(2)
            cycles.append((bundled - forced, time.monotonic() - forced))
        time.sleep(2 * EVERY)  # a few admissions on the last pair too
    finally:
        creator.stop.set()
        creator.join(timeout=30)
    took = time.monotonic() - began
    print(
        f"\ne2e rotation: {ROTATIONS} forced rotations in {took:.0f} s; "
        + "; ".join(
            f"caBundle {b:.1f} s, every replica serving the new pair {s:.1f} s after the force"
            for b, s in cycles
        )
        + f"; {creator.admitted} pods admitted, {len(creator.refused)} refused"
    )

    assert creator.refused == [], _rotation_logs(release)
    assert creator.admitted >= took / EVERY / 2
