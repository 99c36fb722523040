"""``POST /explain`` on the real node: the chart's release with ``webhook.explain.enabled``, called
through the API server's service proxy as a ServiceAccount the chart's RoleBinding names.

A release of its own (``install_chart``) whose objectSelector matches no pod, so it injects
nothing and the session's release is left as it is.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from tests.e2e.conftest import PROBE

NAME = "dc-explain"


def _token(core: Any, namespace: str, name: str) -> str:
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    request = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 600}}
    )
    return str(request.status.token)


def _post(plane: Any, path: str, token: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(
        plane.server + path,
        data=body,
        method="POST",
        headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    context = ssl.create_default_context(cafile=str(plane.ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_explain_answers_through_the_service_for_the_bound_subject_only(
    install_chart: Any, kube_node: Any
) -> None:
    users = f"{NAME}-users"
    values = {
        "webhook": {
            "replicas": 1,
            "podDisruptionBudget": {"enabled": False},
            "objectSelector": {"matchLabels": {"dynconf-e2e-explain": "never"}},
            "agentEnvAllow": "*: RUST_LOG",
            "explain": {
                "enabled": True,
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": users}],
            },
        }
    }
    with install_chart(NAME, values) as release:
        core = release.core
        core.create_namespace({"metadata": {"name": users}})
        release.namespaces.append(users)
        reader = _token(core, users, "reader")
        stranger = _token(core, users, "stranger")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "billing",
                "annotations": {
                    **{f"dynamic-config.rs/{k}": v for k, v in PROBE.items()},
                    "dynamic-config.rs/agent-env": "RUST_LOG=debug",
                },
            },
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }
        path = (
            f"/api/v1/namespaces/{release.namespace}/services/"
            f"https:{NAME}-webhook:https/proxy/explain?namespace={users}"
        )
        body = json.dumps(pod).encode()

        status, text = _post(kube_node.plane, path, reader, body)
        denied, refusal = _post(kube_node.plane, path, stranger, body)

    assert status == 200, text
    report = json.loads(text)
    assert report["outcome"] == "patched"
    assert report["namespace"] == users
    keys = {entry["key"]: entry for entry in report["keys"]}
    assert keys["dynamic-config.rs/agent-env"]["gates"] == [
        {"gate": "webhook.agentEnvAllow", "admitted": True, "name": "RUST_LOG"}
    ]
    limit = keys["dynamic-config.rs/agent-memory-limit"]
    assert (limit["tier"], limit["value"]) == ("fleet", "64Mi")  # the chart's agent.defaults
    [agent] = report["injection"]["agents"]
    assert agent["container"] == "dynamic-config-agent"
    assert "debug" not in text  # agent-env values never leave the webhook
    assert denied == 403, refusal
