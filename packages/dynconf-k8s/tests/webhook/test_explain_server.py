"""``POST /explain`` on the served webhook over real TLS, and through the API server's proxy
with the chart's RBAC: the same report the CLI prints, from the installation the server
admits with."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.explain import explain_pod
from dynconf_k8s.webhook.settings import WebhookSettings

CANONICAL = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}
WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")


def _post(hook: Any, path: str, body: bytes, content: str = "application/json") -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=hook.ca)
    request = urllib.request.Request(
        hook.url + path, data=body, method="POST", headers={"content-type": content}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read().decode()
        return exc.code, json.loads(text) if text.startswith("{") else text


def _explaining(installation: Any = None) -> WebhookSettings:
    return WebhookSettings(installation=installation or parse_installation({}), explain=True)


def test_explain_endpoint_returns_the_report_of_the_served_installation(
    running_webhook, make_pod
) -> None:
    installation = parse_installation({"DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT": "96Mi!"})
    hook = running_webhook(_explaining(installation))
    pod = make_pod(CANONICAL)

    status, report = _post(hook, "/explain", json.dumps(pod).encode())

    assert status == 200
    assert report == explain_pod(pod, installation)
    limit = next(k for k in report["keys"] if k["key"] == "dynamic-config.rs/agent-memory-limit")
    assert (limit["tier"], limit["pinned"]) == ("fleet", True)


def test_explain_endpoint_takes_yaml_and_the_namespace_query(running_webhook, make_pod) -> None:
    installation = parse_installation({"DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY": "sandbox: consul"})
    hook = running_webhook(_explaining(installation))
    body = yaml.safe_dump(make_pod(CANONICAL)).encode()

    status, elsewhere = _post(hook, "/explain?namespace=shop", body, "application/yaml")
    _, sandbox = _post(hook, "/explain?namespace=sandbox", body, "application/yaml")

    assert status == 200 and elsewhere["outcome"] == "patched"
    assert sandbox["outcome"] == "refused"
    assert sandbox["refusal"]["reason"] == "DynamicConfigPolicy"


def test_explain_endpoint_refuses_a_body_that_is_not_a_pod(running_webhook) -> None:
    hook = running_webhook(_explaining())

    for body in (b"[1, 2]", b"{kind: Deployment}", b"{: nope"):
        status, answer = _post(hook, "/explain", body)
        assert status == 400, body
        assert "POST a Pod object" in answer["error"]


def test_explain_is_not_served_unless_enabled(running_webhook, make_pod) -> None:
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))

    status, _ = _post(hook, "/explain", json.dumps(make_pod(CANONICAL)).encode())

    assert status in (404, 405)


def test_explain_is_not_an_admission_in_the_metrics(running_webhook, make_pod) -> None:
    hook = running_webhook(_explaining())
    _post(hook, "/explain", json.dumps(make_pod(CANONICAL)).encode())

    assert hook.metrics.registry.get_sample_value(
        "dynamic_config_admissions_total", {"outcome": "patched"}
    ) in (None, 0.0)


def test_settings_read_the_explain_switch_from_the_environment() -> None:
    assert WebhookSettings.from_environ({"DYNAMIC_CONFIG_WEBHOOK_EXPLAIN": "true"}).explain
    assert not WebhookSettings.from_environ({}).explain
    parse_installation({"DYNAMIC_CONFIG_WEBHOOK_EXPLAIN": "true"})  # a known server variable


# ----------------------------------------------- the chart's values: laptop and server agree


def _chart_env(helm_bin: Path, tmp_path: Path) -> dict[str, str]:
    from tests.chart.support import documents, env_of, helm_template, one
    from tests.chart.test_chart_render import MAP_INSTALLATION

    values = {**MAP_INSTALLATION, "webhook": {**MAP_INSTALLATION["webhook"],
                                              "explain": {"enabled": True}}}  # fmt: skip
    docs = documents(helm_template(helm_bin, tmp_path, values=values).stdout)
    container = one(docs, "Deployment", "dynamic-config-webhook")["spec"]["template"]["spec"][
        "containers"
    ][0]
    env = {k: v for k, v in env_of(container).items() if k.startswith("DYNAMIC_CONFIG_")}
    document = tmp_path / "installation.yaml"
    document.write_text(one(docs, "ConfigMap")["data"]["installation.yaml"])
    env["DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"] = str(document)
    return env


@pytest.mark.helm
@pytest.mark.skipif(not WEBHOOK.exists(), reason="the console script is not installed")
def test_cli_with_the_charts_values_answers_as_the_served_webhook(
    helm_bin: Path, tmp_path: Path, running_webhook, make_pod
) -> None:
    env = _chart_env(helm_bin, tmp_path)
    pod = make_pod(
        {
            "dynamic-config.rs/inject": "true",
            "dynamic-config.rs/source": "vault",
            "dynamic-config.rs/key": "secret/billing",
            "dynamic-config.rs/auth-role": "billing",
            "dynamic-config.rs/path": "/config/app.json",
        }
    )
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod, sort_keys=False))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}

    laptop = subprocess.run(
        [str(WEBHOOK), "explain", "-o", "json", "-n", "payments", str(manifest)],
        capture_output=True, text=True, env={**clean, **env}, timeout=60, check=False,
    )  # fmt: skip
    hook = running_webhook(WebhookSettings.from_environ(env))
    status, served = _post(hook, "/explain?namespace=payments", json.dumps(pod).encode())

    assert laptop.returncode == 0, laptop.stdout + laptop.stderr
    [report] = json.loads(laptop.stdout)
    assert status == 200
    assert {k: v for k, v in report.items() if k not in ("file", "manifest")} == served
    endpoint = next(k for k in served["keys"] if k["key"] == "dynamic-config.rs/endpoint")
    assert (endpoint["tier"], endpoint["pinned"], endpoint["value"]) == (
        "per-store", True, "https://vault.vault.svc:8200",
    )  # fmt: skip
    source = next(k for k in served["keys"] if k["key"] == "dynamic-config.rs/source")
    assert source["gates"] == [
        {"gate": "webhook.sourceDeny", "admitted": True},
        {"gate": "webhook.sourceAllow", "admitted": True},
    ]


# ------------------------------- through the API server's service proxy, with the chart's RBAC


def _host_address() -> str | None:
    """A non-loopback IPv4 address of this machine (no packet is sent)."""
    import socket

    for target in ("10.255.255.255", "203.0.113.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((target, 9))
            except OSError:
                continue
            address: str = probe.getsockname()[0]
        if not address.startswith("127."):
            return address
    return None


def _proxied(control: Any, namespace: str, token: str, body: bytes) -> tuple[int, Any]:
    """POST ``body`` to /explain the way a user does: through the API server, as ``token``."""
    url = (
        f"{control.server}/api/v1/namespaces/{namespace}/services/"
        "https:dynamic-config-webhook:https/proxy/explain"
    )
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    context = ssl.create_default_context(cafile=str(control.ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.k8s
@pytest.mark.helm
def test_only_the_charts_explain_subjects_reach_explain_through_the_api_server(
    helm_bin: Path,
    tmp_path: Path,
    running_webhook,
    make_pod,
    cluster,
    kube_client,
    kube_control_plane,
    mint_sa_token,
) -> None:
    from kubernetes import client

    from tests.chart.support import documents, helm_template, one

    address = _host_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address for an Endpoints object")
    hook = running_webhook(_explaining(), host=address)
    namespace = cluster.namespace("explain")
    rendered = documents(
        helm_template(
            helm_bin,
            tmp_path,
            "webhook.explain.enabled=true",
            "webhook.explain.subjects[0].kind=ServiceAccount",
            "webhook.explain.subjects[0].name=reader",
            f"webhook.explain.subjects[0].namespace={namespace}",
            namespace=namespace,
        ).stdout
    )
    rbac = client.RbacAuthorizationV1Api(kube_client)
    rbac.create_namespaced_role(namespace, one(rendered, "Role", "dynamic-config-webhook-explain"))
    rbac.create_namespaced_role_binding(
        namespace, one(rendered, "RoleBinding", "dynamic-config-webhook-explain")
    )
    core = cluster.core_api
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "dynamic-config-webhook"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": hook.port}]},
        },
    )
    # The service proxy follows an Endpoints address only to a Pod whose IP it is: a pod object
    # stands in for the webhook's replica (never scheduled; its status carries this host's IP).
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "dynamic-config-webhook-0"},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [{"name": "webhook", "image": "busybox"}],
            },
        },
    )
    core.patch_namespaced_pod_status(
        "dynamic-config-webhook-0",
        namespace,
        {"status": {"podIP": address, "podIPs": [{"ip": address}]}},
    )
    replica = {"kind": "Pod", "name": "dynamic-config-webhook-0", "namespace": namespace}
    core.create_namespaced_endpoints(
        namespace,
        {
            "metadata": {"name": "dynamic-config-webhook"},
            "subsets": [
                {
                    "addresses": [{"ip": address, "targetRef": replica}],
                    "ports": [{"name": "https", "port": hook.port}],
                }
            ],
        },
    )
    reader = mint_sa_token(namespace, "reader")
    stranger = mint_sa_token(namespace, "stranger")
    body = json.dumps(make_pod(CANONICAL)).encode()

    status, report = _proxied(kube_control_plane, namespace, reader, body)
    for _ in range(50):  # the API server's informer takes the Endpoints up
        if status != 503:
            break
        time.sleep(0.2)
        status, report = _proxied(kube_control_plane, namespace, reader, body)
    denied, answer = _proxied(kube_control_plane, namespace, stranger, body)

    assert status == 200, report
    assert report == explain_pod(make_pod(CANONICAL), parse_installation({}))
    assert denied == 403, answer
    assert "services/proxy" in answer
