"""The chart and the webhook agree: what the chart renders, the webhook starts with; what the
chart's schema refuses, the webhook refuses at start too (the kustomize door has no schema)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.support import documents, env_of, helm_template, one
from tests.chart.test_chart_render import MAP_INSTALLATION, TOGGLES

pytestmark = pytest.mark.helm

WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "billing",
        "annotations": {
            "dynamic-config.rs/inject": "true",
            "dynamic-config.rs/source": "consul",
            "dynamic-config.rs/endpoint": "http://consul.infra.svc:8500",
            "dynamic-config.rs/key": "myapp/config.json",
            "dynamic-config.rs/path": "/config/rendered.toml",
        },
    },
    "spec": {"containers": [{"name": "app", "image": "myapp:1"}]},
}


def _validate(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(POD))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}
    return subprocess.run(
        [str(WEBHOOK), "validate", str(pod)],
        capture_output=True,
        text=True,
        env={**clean, "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(tmp_path / "absent.yaml"), **env},
        timeout=60,
        check=False,
    )


def _webhook_env(docs: list[dict[str, object]], tmp_path: Path) -> dict[str, str]:
    """The webhook container's literal env, with the installation document (if any) written
    where DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE will point."""
    deployment = one(docs, "Deployment", "dynamic-config-webhook")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {k: v for k, v in env_of(container).items() if k.startswith("DYNAMIC_CONFIG_")}
    for config_map in docs:
        if config_map.get("kind") == "ConfigMap":
            path = tmp_path / "installation.yaml"
            path.write_text(config_map["data"]["installation.yaml"])  # type: ignore[index]
            env["DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"] = str(path)
    return env


@pytest.fixture(autouse=True)
def _needs_the_webhook() -> None:
    if not WEBHOOK.exists():
        pytest.skip("dynamic-config-webhook is not installed in this environment")


def test_webhook_accepts_the_installation_the_chart_renders_from_maps(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = documents(helm_template(helm_bin, tmp_path, values=MAP_INSTALLATION).stdout)

    result = _validate(_webhook_env(docs, tmp_path), tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "allowed, and an agent would be injected" in result.stdout


def test_webhook_accepts_the_installation_the_chart_renders_from_strings(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = documents(helm_template(helm_bin, tmp_path, *TOGGLES["string-installation"]).stdout)
    env = _webhook_env(docs, tmp_path)

    result = _validate(env, tmp_path)

    # the pod restates the pinned consul endpoint, which a pin lets through
    assert result.returncode == 0, result.stdout + result.stderr
    assert "allowed, and an agent would be injected" in result.stdout


@pytest.mark.parametrize(
    ("value", "variable", "word"),
    [
        ("agent.defaults.fileMode=0999", "DYNAMIC_CONFIG_AGENT_FILE_MODE", "0999"),
        ("agent.defaults.source=got", "DYNAMIC_CONFIG_AGENT_SOURCE", "got"),
        ("agent.defaults.mode=daemon", "DYNAMIC_CONFIG_AGENT_MODE", "daemon"),
        ("agent.defaults.memoryLimit=lots", "DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT", "lots"),
    ],
)
def test_schema_and_webhook_refuse_the_same_value(
    value: str, variable: str, word: str, helm_bin: Path, tmp_path: Path
) -> None:
    rendered = helm_template(helm_bin, tmp_path, value, check=False)
    started = _validate({variable: word}, tmp_path)

    assert rendered.returncode != 0, "the schema let it through"
    assert started.returncode != 0, "the webhook started with it"
    assert variable in started.stderr, started.stderr


@pytest.mark.k8s
def test_class_poller_authenticates_with_the_token_and_rbac_the_chart_gives_it(
    helm_bin: Path, tmp_path: Path, kube_client: Any, kube_control_plane: Any,
    mint_sa_token: Any,
) -> None:  # fmt: skip
    """The chart's classes install, end to end short of a kubelet: the webhook pod mounts a
    token (automount), the token is read from where the kubelet puts it (the poller's default
    path), and the chart's own ClusterRole and binding let that ServiceAccount list classes."""
    import time
    import uuid

    from kubernetes import client, watch

    from dynconf_k8s.webhook.classes import ClassPoller
    from dynconf_k8s.webhook.kube import KubeAccess

    namespace = f"dc-chart-{uuid.uuid4().hex[:8]}"
    docs = documents(
        helm_template(
            helm_bin, tmp_path, "webhook.classes.enabled=true", namespace=namespace
        ).stdout
    )
    pod = one(docs, "Deployment", "dynamic-config-webhook")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    account = pod["serviceAccountName"]

    ext = client.ApiextensionsV1Api(kube_client)
    crds = [yaml.safe_load(p.read_text()) for p in sorted(CRDS.glob("*classes.yaml"))]
    for crd in crds:
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"], crd, field_manager="dynconf-tests", force=True,
            _content_type="application/apply-patch+yaml",
        )  # fmt: skip
    wanted = {crd["metadata"]["name"] for crd in crds}
    established: set[str] = set()
    stream = watch.Watch()
    for event in stream.stream(ext.list_custom_resource_definition, timeout_seconds=30):
        conditions = (event["object"].status and event["object"].status.conditions) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            established.add(event["object"].metadata.name)
        if wanted <= established:
            stream.stop()

    rbac = client.RbacAuthorizationV1Api(kube_client)
    role = one(docs, "ClusterRole", "dynamic-config-webhook-classes")
    binding = one(docs, "ClusterRoleBinding", "dynamic-config-webhook-classes")
    unique = f"{role['metadata']['name']}-{namespace}"
    role["metadata"] = {"name": unique}
    binding["metadata"] = {"name": unique}
    binding["roleRef"]["name"] = unique
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    ]
    token = mint_sa_token(namespace, account)
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding(binding)
    try:
        root = tmp_path / "pod-root"
        mounted = KubeAccess()
        token_path = root / mounted.token_path.lstrip("/")
        token_path.parent.mkdir(parents=True)
        token_path.write_text(token)
        access = KubeAccess(
            server=kube_control_plane.server,
            token_path=str(token_path),
            ca_path=str(kube_control_plane.ca),
        )
        poller = ClassPoller(access)
        # A new binding reaches the API server's RBAC cache through an informer: retry briefly.
        deadline = time.monotonic() + 20
        while not poller.poll_once():
            assert time.monotonic() < deadline, "the chart's identity never listed the classes"
            time.sleep(0.2)
    finally:
        rbac.delete_cluster_role_binding(unique)
        rbac.delete_cluster_role(unique)
        client.CoreV1Api(kube_client).delete_namespace(namespace)
