"""Leg 1 of the end-to-end ladder (issue 15): the chart's webhook injects pods that really run.

The webhook is the chart's (``chart_release``: installed with real helm into the node, default
TLS mode); the pod is the book's annotated pod shape (mode both, file-mode 0640, the agent run
as 1000/1000, an allowed agent-env) with the agent image built here, reading from the Consul
test server, which the pod reaches through a pipe into the node's namespace. Everything is
asserted on the running pod: the app container reads the file, ``stat`` inside it, the agent's
security settings and environment from the OCI spec containerd gave runc, restart counts. The
refusals are what kubectl prints (the apiserver's ``Status.message``), from a second release
whose installation pins and gates (``strict``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.conftest import InstallChart, Release
from tests.e2e.support import (
    AGENT,
    Injector,
    app_environment,
    describe,
    exec_in,
    statuses,
    wait_ready,
)
from tests.fixtures.node import KubeNode
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def injector(kube_node: KubeNode, chart_release: Release, consul_server: Any) -> Iterator[Injector]:
    """A namespace the chart's webhook injects into, with Consul exposed to its pods."""
    namespace = chart_release.injecting_namespace()
    with kube_node.expose(consul_server.port) as endpoint:
        yield Injector(chart_release.core, namespace, endpoint, consul_server,
                       uuid.uuid4().hex[:8])  # fmt: skip


@pytest.fixture(scope="module")
def injected_pod(injector: Injector) -> tuple[Any, str, None, float]:
    """The annotated pod, Ready; (core api, namespace, None, seconds to Ready)."""
    key = f"e2e-{injector.label}/config.json"
    injector.put(key, {"port": 9000, "name": "smoke"})
    took = injector.run(
        "smoke",
        injector.annotations(key, **{"agent-env": "RUST_LOG=debug"}),
        "cat /config/rendered.toml; exec sleep 3600",
        "/config/rendered.toml",
    )
    print(f"\ne2e smoke: injected pod Ready {took:.1f} s after create")
    return injector.core, injector.namespace, None, took


def test_app_container_reads_the_rendered_file(injected_pod: tuple[Any, str, None, float]) -> None:
    core, namespace, _, _ = injected_pod

    text = exec_in(core, namespace, "smoke", "app", "cat", "/config/rendered.toml")

    assert "port = 9000" in text
    assert 'name = "smoke"' in text


def test_rendered_file_has_the_requested_mode_and_owner(
    injected_pod: tuple[Any, str, None, float],
) -> None:
    core, namespace, _, _ = injected_pod

    out = exec_in(core, namespace, "smoke", "app", "stat", "-c", "%a %u %g",
                  "/config/rendered.toml")  # fmt: skip

    assert out.split() == ["640", "1000", "1000"]


def test_shared_volume_is_memory_backed(injected_pod: tuple[Any, str, None, float]) -> None:
    core, namespace, _, _ = injected_pod

    mounts = exec_in(core, namespace, "smoke", "app", "grep", " /config ", "/proc/mounts")

    assert mounts.split()[2] == "tmpfs"


def test_agent_runs_restricted_with_a_read_only_root(
    injected_pod: tuple[Any, str, None, float], kube_node: KubeNode
) -> None:
    core, namespace, _, _ = injected_pod
    pod = core.read_namespaced_pod("smoke", namespace)
    agents = [s for name, s in statuses(pod).items() if name.startswith(AGENT) and s.container_id]

    specs = [kube_node.container_spec(s.container_id.split("//", 1)[1]) for s in agents]

    assert specs
    for spec in specs:
        process = spec["process"]
        assert (process["user"]["uid"], process["user"]["gid"]) == (1000, 1000)
        assert spec["root"].get("readonly") is True
        assert process.get("noNewPrivileges") is True
        assert process["capabilities"].get("effective", []) == []
        assert spec["linux"].get("seccomp") is not None


def test_no_container_restarted(injected_pod: tuple[Any, str, None, float]) -> None:
    core, namespace, _, _ = injected_pod
    time.sleep(3)  # a crash-looping sidecar shows within the kubelet's first back-off

    pod = core.read_namespaced_pod("smoke", namespace)

    assert {n: s.restart_count for n, s in statuses(pod).items()} == dict.fromkeys(statuses(pod), 0)


# ---------------------------------------------------------------------------- env delivery
def test_env_inject_puts_the_document_into_the_app_environment(injector: Injector) -> None:
    key = f"e2e-{injector.label}/env.json"
    injector.put(key, {"app_port": 9000, "app_mode": "smoke"})
    annotations = injector.annotations(key, **{"path": "/config/app.env", "env-inject": "app"})
    injector.run("env", annotations, "exec sleep 3600", "/config/app.env")

    env = app_environment(injector.core, injector.namespace, "env")

    assert (env.get("APP_PORT"), env.get("APP_MODE")) == ("9000", "smoke")


def test_env_inject_delivers_a_numeric_looking_string_unquoted(injector: Injector) -> None:
    key = f"e2e-{injector.label}/env-string.json"
    injector.put(key, {"app_port": "9000"})
    annotations = injector.annotations(key, **{"path": "/config/app.env", "env-inject": "app"})
    injector.run("env-string", annotations, "exec sleep 3600", "/config/app.env")

    env = app_environment(injector.core, injector.namespace, "env-string")

    assert env.get("APP_PORT") == "9000"


def test_env_restart_leaves_an_unchanged_app_running(injector: Injector) -> None:
    """The probe must pass while the document stands (it once compared with a variable it
    could not see: a restart every period)."""
    key = f"e2e-{injector.label}/steady.json"
    injector.put(key, {"app_port": 9000})
    annotations = injector.annotations(
        key, **{"path": "/config/app.env", "env-inject": "app", "env-restart": "true"}
    )
    injector.run("steady", annotations, "exec sleep 3600", "/config/app.env")
    pod = injector.core.read_namespaced_pod("steady", injector.namespace)
    probe = next(c for c in pod.spec.containers if c.name == "app").liveness_probe
    time.sleep(probe.period_seconds * 1.5)  # at least one probe after the first

    pod = injector.core.read_namespaced_pod("steady", injector.namespace)

    assert {n: s.restart_count for n, s in statuses(pod).items()} == dict.fromkeys(
        statuses(pod), 0
    ), describe(injector.core, injector.namespace, "steady")


def test_env_restart_restarts_only_the_app_with_the_new_values(injector: Injector) -> None:
    key = f"e2e-{injector.label}/restart.json"
    injector.put(key, {"app_port": 9000})
    annotations = injector.annotations(
        key, **{"path": "/config/app.env", "env-inject": "app", "env-restart": "true"}
    )
    injector.run("restart", annotations, "exec sleep 3600", "/config/app.env")
    began = time.monotonic()

    injector.put(key, {"app_port": 9100})
    deadline = time.monotonic() + 60
    while True:
        pod = injector.core.read_namespaced_pod("restart", injector.namespace)
        counts = {n: s.restart_count for n, s in statuses(pod).items()}
        ready = statuses(pod)["app"].ready
        if counts["app"] >= 1 and ready:
            break
        assert time.monotonic() < deadline, f"app not restarted: {counts}"
        time.sleep(0.5)
    print(
        f"\ne2e env-restart: app restarted with the new document {time.monotonic() - began:.1f} s after the put"
    )
    env = app_environment(injector.core, injector.namespace, "restart")

    assert env.get("APP_PORT") == "9100"
    assert {n: c for n, c in counts.items() if n != "app"} == dict.fromkeys(
        (n for n in counts if n != "app"), 0
    )


def test_allowed_agent_env_reaches_the_running_agent(
    injected_pod: tuple[Any, str, None, float], kube_node: KubeNode
) -> None:
    core, namespace, _, _ = injected_pod
    pod = core.read_namespaced_pod("smoke", namespace)
    agents = [s for name, s in statuses(pod).items() if name.startswith(AGENT) and s.container_id]

    envs = [kube_node.container_spec(s.container_id.split("//", 1)[1])["process"]["env"]
            for s in agents]  # fmt: skip

    assert envs
    assert all("RUST_LOG=debug" in env for env in envs)


# ---------------------------------------------------------------------------- pod security
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def test_restricted_namespace_admits_and_runs_an_injected_pod(
    chart_release: Release, injector: Injector
) -> None:
    namespace = chart_release.injecting_namespace(RESTRICTED)
    key = f"e2e-{injector.label}/restricted.json"
    injector.put(key, {"port": 9000})
    body = injector.pod("restricted", injector.annotations(key), "exec sleep 3600",
                        "/config/rendered.toml")  # fmt: skip
    body["spec"]["securityContext"] = {
        "runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    body["spec"]["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    }  # fmt: skip

    chart_release.core.create_namespaced_pod(namespace, body)
    pod = wait_ready(chart_release.core, namespace, "restricted")

    assert any(name.startswith(AGENT) for name in statuses(pod))


# ---------------------------------------------------------------------------- refusals
STRICT_LABEL = {"dynconf-e2e/release": "strict"}
STRICT_VALUES: dict[str, Any] = {
    "webhook": {
        "replicas": 1,
        "agentEnvAllow": "*: RUST_LOG",
        "sourceDeny": "*: git",
        "objectSelector": {"matchLabels": STRICT_LABEL},
    },
    "agent": {"defaults": {"perStore": "vault: endpoint=https://vault.pinned.example:8200!"}},
}
"""A second release: one gate of each kind, pinned per store, selecting only labelled pods (its
namespaces are not gated, so the session's release never sees them)."""
DENIED = 'admission webhook "inject.dynamic-config.rs" denied the request: '
"""How the apiserver (and so kubectl, after ``Error from server (…): error when creating …:``)
words a webhook's refusal."""


@pytest.fixture(scope="module")
def strict(install_chart: InstallChart) -> Iterator[tuple[Release, str]]:
    with install_chart("dynconf-strict", STRICT_VALUES) as release:
        namespace = release.injecting_namespace()
        release.await_injection(namespace, STRICT_LABEL)
        yield release, namespace


def _refusal(release: Release, namespace: str, **annotations: str) -> str:
    """The message kubectl would print for an annotated pod this release refuses."""
    base = {"inject": "true", "source": "consul", "endpoint": "http://10.88.0.1:8500",
            "key": "refused.json",
        "path": "/config/app.toml", **annotations}  # fmt: skip
    body = {
        "metadata": {"name": "refused", "labels": STRICT_LABEL,
                     "annotations": {f"dynamic-config.rs/{k}": v for k, v in base.items()}},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never"}]},
    }  # fmt: skip
    with pytest.raises(client.ApiException) as refused:
        release.core.create_namespaced_pod(namespace, body)
    message = str(json.loads(refused.value.body)["message"])
    print(f'\nkubectl: Error from server: error when creating "pod.yaml": {message}')
    return message


def test_refused_agent_env_names_the_gate_and_how_to_open_it(
    strict: tuple[Release, str],
) -> None:
    message = _refusal(*strict, **{"agent-env": "HTTPS_PROXY=http://proxy.example:3128"})

    assert message.startswith(DENIED)
    assert "agent-env" in message and "HTTPS_PROXY" in message
    assert "webhook.agentEnvAllow" in message
    assert "proxy.example" not in message  # names, never values


def test_refused_source_names_the_deny_gate(strict: tuple[Release, str]) -> None:
    message = _refusal(*strict, source="git", endpoint="https://git.example/repo.git")

    assert message.startswith(DENIED)
    assert "git" in message and "webhook.sourceDeny" in message


def test_refused_endpoint_names_the_pin(strict: tuple[Release, str]) -> None:
    message = _refusal(*strict, source="vault", endpoint="https://vault.other.example:8200")

    assert message.startswith(DENIED)
    assert "dynamic-config.rs/endpoint" in message and "the installation pins it" in message
