"""The chart, installed with real ``helm`` into the kubelet node, for the legs of the ladder.

Fixtures (all ``e2e``: they use ``kube_node``, so ``tests/fixtures/node.py`` marks and gates them):

``chart_release`` (session)
    ``charts/dynamic-config`` installed as release ``dynamic-config`` in namespace
    ``dynamic-config-system`` (objects named as the chart names them, ``dynamic-config-…``)
    with the default values except ``webhook.namespaceGating: true`` (so the chart injects only
    into namespaces that ask, never into another test's) and ``webhook.agentEnvAllow:
    "*: RUST_LOG"`` (the book's canonical allowed agent-env), plus what every release here
    carries: ``nodeAgent.registration: builtin`` (``support.NODE_REGISTRATION``: the node cannot
    pull upstream's registrar image). TLS is the default mode, the
    chart-minted CA; cert-manager mode cannot be exercised here (no cert-manager in the node).
    The four images are loaded into the node first; the fixture returns once the webhook
    Deployment is Ready and the apiserver calls it. It is a ``Release``:

    - ``injecting_namespace(labels=None) -> str``: a fresh namespace (default ServiceAccount
      present) the webhook injects into; extra ``labels`` (e.g. pod-security) are added. It is
      deleted when the session ends;
    - ``name``, ``namespace``, ``fullname``, ``values``; ``core`` (a ``CoreV1Api``) and
      ``api_client`` (cluster admin);
    - ``webhook_pods()`` and ``scrape(pod, port)`` (a pod's metrics through the apiserver's
      pod proxy); ``upgrade(values)`` (``helm upgrade --reset-then-reuse-values --wait``).

``install_chart`` (session): ``install_chart(name, values) -> context manager -> Release`` for a
    release of one's own (another TLS mode, an objectSelector, the operator): its own namespace
    ``<name>-system``, ``fullnameOverride: <name>`` and the node's ``nodeAgent.registration``
    under the caller's values, the CRDs left to ``chart_release``
    (``--skip-crds``). ``chart=("oci://…/charts/dynamic-config", "--version", X, …)`` installs
    a released chart from a registry instead of the tree's. Two releases select the same pods only if their selectors overlap: give
    a second one an ``objectSelector`` or namespaces the first does not gate.

On exit ``helm uninstall --wait``, then the release namespace and the CRDs ``chart_release``
created are deleted and awaited: nothing of a release is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.support import NODE_REGISTRATION
from tests.fixtures.kube import REPO
from tests.fixtures.node import KubeNode, ProjectImage
from tests.testenv.test_node import BUSYBOX, new_namespace

CHART = REPO / "charts" / "dynamic-config"
IMAGES = ("agent", "webhook", "operator", "node-agent")
INJECTION_LABEL = {"dynamic-config.rs/injection": "enabled"}
"""What the chart's ``namespaceGating`` selects."""
HELM_TIMEOUT = 300
SESSION_VALUES: dict[str, Any] = {
    "webhook": {"namespaceGating": True, "agentEnvAllow": "*: RUST_LOG"},
}
NODE_VALUES: dict[str, Any] = {"nodeAgent": {"registration": NODE_REGISTRATION}}
"""Under every release's own values: what the node can run (see ``NODE_REGISTRATION``)."""


def _helm(
    helm: Path, kubeconfig: Path, home: Path, *args: str, timeout: float = HELM_TIMEOUT + 60
) -> str:
    """``helm args``; its stdout. The process gets a minute beyond helm's own ``--timeout``, so a
    ``--wait`` that runs out reports helm's error (what was not ready), not a bare kill."""
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run(
        [str(helm), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args[:2])} failed:\n{result.stderr[-4000:]}")
    return result.stdout


SETUP_TIMEOUT = 900
"""Seconds for a leg's first test: it carries the image builds (when the sources changed),
their loading into the node and the release's install."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here gets ``SETUP_TIMEOUT`` unless it sets its own ``timeout``."""
    for item in items:
        if "tests/e2e/" in str(item.path) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SETUP_TIMEOUT))


@dataclass
class Release:
    """One installed release of the chart (see the module docstring)."""

    name: str
    namespace: str
    fullname: str
    values: dict[str, Any]
    api_client: Any
    helm: Callable[..., str]
    injection_label: dict[str, str] = field(default_factory=lambda: dict(INJECTION_LABEL))
    namespaces: list[str] = field(default_factory=list)

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api_client)

    def injecting_namespace(self, labels: dict[str, str] | None = None) -> str:
        """A fresh namespace this release's webhook injects into (deleted at the end)."""
        namespace = new_namespace(self.core)
        wanted = {**(self.injection_label if self._gated() else {}), **(labels or {})}
        if wanted:
            self.core.patch_namespace(namespace, {"metadata": {"labels": wanted}})
        self.namespaces.append(namespace)
        return namespace

    def _gated(self) -> bool:
        return bool(self.values.get("webhook", {}).get("namespaceGating"))

    def webhook_pods(self) -> list[Any]:
        selector = f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component=webhook"
        pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def scrape(self, pod: str, port: int = 9091) -> str:
        """``GET /metrics`` of ``pod`` in the release namespace, through the apiserver."""
        body: bytes = self.core.connect_get_namespaced_pod_proxy_with_path(
            f"{pod}:{port}", self.namespace, "metrics", _preload_content=False
        ).data
        return body.decode()

    def serving_expiries(self) -> dict[str, str]:
        """Each webhook replica's ``dynamic_config_certificate_expires_at_seconds``: which
        leaf it serves, so a rotation or renewal is seen to reach every replica."""
        out = {}
        for pod in self.webhook_pods():
            for line in self.scrape(pod.metadata.name).splitlines():
                if line.startswith("dynamic_config_certificate_expires_at_seconds"):
                    out[pod.metadata.name] = line.rpartition(" ")[2]
        return out

    def upgrade(self, values: dict[str, Any]) -> None:
        """``helm upgrade --reset-then-reuse-values --wait`` with ``values`` over the current ones.

        ``--reset-then-reuse-values``: the chart's own defaults first, then this release's values,
        so an upgrade to a chart with new values renders (``--reuse-values`` alone would keep
        the old release's defaults, without the new keys).
        """
        self.helm("upgrade", self.name, str(CHART), "-n", self.namespace, "--reset-then-reuse-values",
                  "--wait", "--timeout", f"{HELM_TIMEOUT}s", "-f", _values_file(values))  # fmt: skip
        self.values = _merge(self.values, values)

    def await_injection(
        self, namespace: str, labels: dict[str, str] | None = None, timeout: float = 120
    ) -> float:
        """Seconds until the apiserver has this release's webhook inject an annotated pod.

        A dry run every 0.5 s; a refusal or a failed call (the caBundle not taken up yet, the
        serving pair not trusted yet) is retried, unlike ``await_webhook_called``, which
        stops at the first answer naming the webhook.
        """
        probe = {
            "metadata": {"name": "probe", "labels": labels or {},
                         "annotations": {f"dynamic-config.rs/{k}": v for k, v in PROBE.items()}},
            "spec": {"containers": [{"name": "app", "image": BUSYBOX}]},
        }  # fmt: skip
        began = time.monotonic()
        last = ""
        while time.monotonic() - began < timeout:
            try:
                made = self.core.create_namespaced_pod(namespace, probe, dry_run="All")
                if any(c.name == "dynamic-config-agent" for c in made.spec.containers):
                    return time.monotonic() - began
            except client.ApiException as err:
                last = str(err.body)[-300:]
            time.sleep(0.5)
        raise AssertionError(f"release {self.name} did not inject within {timeout} s: {last}")


PROBE = {
    "inject": "true",
    "source": "consul",
    "endpoint": "http://10.88.0.1:8500",
    "key": "probe.json",
    "path": "/config/probe.json",
}
"""The annotations of a pod every release admits (nothing is fetched: dry runs only)."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


_VALUES_DIR: list[Path] = []


def _values_file(values: dict[str, Any]) -> str:
    """A values file (JSON is YAML) in the session's helm home."""
    path = _VALUES_DIR[0] / f"values-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(values))
    return str(path)


def _wait_gone(check: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} still there after {timeout} s"
        time.sleep(0.5)


def _namespace_gone(core: Any, name: str) -> bool:
    try:
        core.read_namespace(name)
    except client.ApiException as err:
        return bool(err.status == 404)
    return False


InstallChart = Callable[..., contextlib.AbstractContextManager[Release]]


def _hold_the_node(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Take the node's session lock for the rest of this process (released at its exit)."""
    import fcntl

    from tests.fixtures.kube import _run_dir

    path = _run_dir() / "e2e-session.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    _NODE_LOCK[:] = [handle]
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("\nchart: another pytest session holds the node; waiting for it to end")
        fcntl.flock(handle, fcntl.LOCK_EX)


_NODE_LOCK: list[Any] = []
"""The open lock file, kept for the session (closing it would release the lock)."""


@pytest.fixture(scope="session")
def install_chart(
    kube_node: KubeNode,
    kube_node_client: object,
    helm_bin: Path,
    node_image: ProjectImage,
    tmp_path_factory: pytest.TempPathFactory,
) -> InstallChart:
    """``install_chart(name, values, *, skip_crds=True)``: a release of one's own (see above).

    One pytest session at a time uses the node's releases and images: a second session (an
    engineer's beside CI's, two legs run by hand) waits here for the first to end, instead
    of uninstalling its releases as leftovers and reloading its images under it.
    """
    _hold_the_node(tmp_path_factory)
    home = tmp_path_factory.mktemp("helm")
    _VALUES_DIR[:] = [home]
    for image in IMAGES:
        began = time.monotonic()
        node_image(image)
        print(f"\nchart: image {image} in the node after {time.monotonic() - began:.1f} s")

    def helm(*args: str) -> str:
        return _helm(helm_bin, kube_node.plane.kubeconfig, home, *args)

    @contextlib.contextmanager
    def install(
        name: str,
        values: dict[str, Any],
        *,
        skip_crds: bool = True,
        chart: tuple[str, ...] = (str(CHART),),
    ) -> Iterator[Release]:
        namespace = f"{name}-system"
        values = _merge(NODE_VALUES, values)
        if name != CHART.name:  # the chart names its objects "dynamic-config-…" by default
            values = _merge({"fullnameOverride": name}, values)
        began = time.monotonic()
        if name in helm("list", "-n", namespace, "-a", "-q").split():
            # an earlier session was interrupted (a node left running keeps its releases)
            helm("uninstall", name, "-n", namespace, "--wait", "--timeout", f"{HELM_TIMEOUT}s")
        helm("install", name, *chart, "-n", namespace, "--create-namespace", "--wait",
             "--timeout", f"{HELM_TIMEOUT}s", "-f", _values_file(values),
             *(["--skip-crds"] if skip_crds else []))  # fmt: skip
        fullname = str(values.get("fullnameOverride") or CHART.name)
        release = Release(name, namespace, fullname, values, kube_node_client, helm)
        print(
            f"\nchart: release {name} installed, webhook Ready in {time.monotonic() - began:.1f} s"
        )
        try:
            yield release
        finally:
            core = release.core
            helm("uninstall", name, "-n", namespace, "--wait", "--timeout", f"{HELM_TIMEOUT}s")
            for ns in [*release.namespaces, namespace]:
                with contextlib.suppress(client.ApiException):
                    core.delete_namespace(ns)
            for ns in [*release.namespaces, namespace]:
                _wait_gone(lambda ns=ns: _namespace_gone(core, ns), f"namespace {ns}")
            admission = client.AdmissionregistrationV1Api(kube_node_client)
            left = [
                w.metadata.name
                for w in admission.list_mutating_webhook_configuration().items
                if w.metadata.name == release.fullname
            ]
            assert left == [], f"helm uninstall left {left}"

    return install


def _crds(api_client: object) -> set[str]:
    extensions = client.ApiextensionsV1Api(api_client)
    return {
        c.metadata.name
        for c in extensions.list_custom_resource_definition().items
        if c.metadata.name.endswith(".dynamic-config.rs")
    }


@pytest.fixture(scope="session")
def chart_release(install_chart: InstallChart, kube_node_client: object) -> Iterator[Release]:
    """The session's release with (nearly) default values; see the module docstring."""
    before = _crds(kube_node_client)
    with install_chart(CHART.name, SESSION_VALUES, skip_crds=False) as release:
        took = release.await_injection(release.injecting_namespace())
        print(f"\nchart: the webhook injects {took:.1f} s after the install returned")
        yield release
    extensions = client.ApiextensionsV1Api(kube_node_client)
    for crd in _crds(kube_node_client) - before:
        extensions.delete_custom_resource_definition(crd)
    _wait_gone(lambda: not (_crds(kube_node_client) - before), "the chart's CRDs")
