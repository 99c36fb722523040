"""The webhook registered with a real kube-apiserver: pods come back injected or refused.

A MutatingWebhookConfiguration whose ``clientConfig.url`` points at the webhook served over
TLS on 127.0.0.1 (caBundle = a CA minted per test); pods and Deployments are created through
the API server. Each test owns its namespace and its configuration, selected by a namespace
label, so tests cannot admit each other's pods.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.settings import WebhookSettings

CANONICAL = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}


def _names(containers):
    return [c.name for c in containers or []]


def test_pod_created_through_api_server_is_injected_once(cluster, running_webhook):
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    cluster.register(hook, label)
    pod = cluster.create_pod(namespace, CANONICAL)
    assert _names(pod.spec.containers) == ["app", "dynamic-config-agent"]
    assert pod.metadata.annotations["dynamic-config.rs/status"] == "injected"
    assert [
        m.mount_path for m in pod.spec.containers[0].volume_mounts if m.name == "dynamic-config"
    ] == ["/config"]
    agent = pod.spec.containers[1]
    assert agent.security_context.run_as_non_root is True
    assert agent.args[-2:] == ["--watch", "15"]


def test_refusal_reaches_the_client_as_kubectl_prints_it(cluster, running_webhook):
    from kubernetes.client.rest import ApiException

    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    cluster.register(hook, label)
    with pytest.raises(ApiException) as caught:
        cluster.create_pod(namespace, {**CANONICAL, "dynamic-config.rs/mode": "daemon"})
    status = json.loads(caught.value.body)
    assert caught.value.status == 400
    assert status["reason"] == "DynamicConfigMalformed"
    assert status["message"] == (
        'admission webhook "inject.dynamic-config.rs" denied the request: '
        "dynamic-config.rs/mode takes init, sidecar or both"
    )


def test_unannotated_pod_untouched_and_excluded_namespace_not_selected(cluster, running_webhook):
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    excluded = cluster.namespace(label, {"dynamic-config.rs/exclude": "true"})
    cluster.register(hook, label)
    assert _names(cluster.create_pod(namespace, None).spec.containers) == ["app"]
    assert _names(cluster.create_pod(excluded, CANONICAL).spec.containers) == ["app"]


def test_failure_policy_fail_refuses_and_ignore_admits_uninjected(cluster, running_webhook):
    from kubernetes.client.rest import ApiException

    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    dead_port = hook.port
    hook.stop()
    label_fail, label_ignore = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    ns_fail, ns_ignore = cluster.namespace(label_fail), cluster.namespace(label_ignore)
    # Failing open looks like not yet registered, so the Fail configuration, registered after
    # it and taken up after it, is the one awaited.
    cluster.register(hook, label_ignore, "Ignore", port=dead_port, await_called=False)
    cluster.register(hook, label_fail, "Fail", port=dead_port)
    with pytest.raises(ApiException) as caught:
        cluster.create_pod(ns_fail, CANONICAL)
    assert caught.value.status == 500
    assert "failed calling webhook" in caught.value.body
    assert _names(cluster.create_pod(ns_ignore, CANONICAL).spec.containers) == ["app"]


def test_deployment_pods_are_injected(cluster, running_webhook, kube_control_plane, kube_client):
    """The ReplicaSet controller creates the pods; the API server sends each through us.

    There is no scheduler, so the pods stay Pending: admission is what is under test.
    """
    from kubernetes import client, watch

    if not kube_control_plane.controller_manager:
        message = "no kube-controller-manager: nothing turns a Deployment into pods"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    cluster.register(hook, label)
    cluster.apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "annotations": CANONICAL},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "containers": [{"name": "app", "image": "busybox"}],
                    },
                },
            },
        },
    )
    pods = {}
    stream = watch.Watch()
    for event in stream.stream(
        client.CoreV1Api(kube_client).list_namespaced_pod, namespace, timeout_seconds=60
    ):
        pod = event["object"]
        pods[pod.metadata.name] = pod
        if len(pods) == 2:
            stream.stop()
    assert len(pods) == 2, _debug(cluster, namespace)
    for pod in pods.values():
        assert pod.metadata.owner_references[0].kind == "ReplicaSet"
        assert _names(pod.spec.containers) == ["app", "dynamic-config-agent"]
        assert pod.metadata.annotations["dynamic-config.rs/status"] == "injected"


def _debug(cluster, namespace):
    rs = cluster.apps.list_namespaced_replica_set(namespace).items
    events = cluster.core_api.list_namespaced_event(namespace).items
    return [r.status for r in rs], [(e.reason, e.message) for e in events]


SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SA_PLUGIN_VOLUME = {
    # What the ServiceAccount admission plugin (off in this control plane, as in envtest) adds
    # to an automounting pod before any webhook sees it.
    "name": "kube-api-access-abcde",
    "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]},
}  # fmt: skip


@pytest.mark.parametrize("automounted", [False, True], ids=["no-automount", "automounted-app"])
def test_events_pod_gives_the_agent_its_own_token_and_the_api_server_takes_it(
    cluster, running_webhook, automounted
):
    env = {"DYNAMIC_CONFIG_WEBHOOK_ALLOW_EVENTS": "true"}
    hook = running_webhook(WebhookSettings(installation=parse_installation(env)))
    label = uuid.uuid4().hex[:8]
    namespace = cluster.namespace(label)
    cluster.register(hook, label)
    app = {"name": "app", "image": "busybox", "command": ["sleep", "1d"]}
    spec = {"serviceAccountName": "default", "automountServiceAccountToken": automounted,
            "containers": [app]}  # fmt: skip
    if automounted:
        app["volumeMounts"] = [{"name": SA_PLUGIN_VOLUME["name"], "mountPath": SA_DIR}]
        spec["volumes"] = [SA_PLUGIN_VOLUME]
    annotations = {**CANONICAL, "dynamic-config.rs/events": "true"}
    pod = cluster.core_api.create_namespaced_pod(
        namespace, {"metadata": {"name": "events", "annotations": annotations}, "spec": spec}
    )
    agent = next(c for c in pod.spec.containers if c.name == "dynamic-config-agent")
    assert [m.name for m in agent.volume_mounts if m.mount_path == SA_DIR] == [
        "dynamic-config-token"
    ]
    token = next(v for v in pod.spec.volumes if v.name == "dynamic-config-token")
    assert token.projected.sources[0].service_account_token.path == "token"
    assert all(m.name != "dynamic-config-token" for m in pod.spec.containers[0].volume_mounts or [])
