"""Real stores behind the classes: consul for a namespaced class, vault for the Secret rules."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.types import CLASS_KIND, CLUSTER_CLASS_KIND, RENDER_KIND


def test_consul_class_renders_and_follows_a_change(
    operator: Operator, kube: Any, namespace: str, consul_server: Any
) -> None:
    key = f"op-{uuid.uuid4().hex[:8]}/config.json"
    consul_server.client.kv.put(key, json.dumps({"host": "db.internal", "port": 9000}))
    kube.create(
        CLASS_KIND, namespace, "infra-consul", {"source": "consul", "endpoint": consul_server.url}
    )
    kube.create(
        RENDER_KIND,
        namespace,
        "billing-config",
        {
            "class": "infra-consul",
            "key": key,
            "intervalSeconds": 1,
            "target": {"configMap": "billing-rendered", "file": "config.properties"},
        },
    )
    kube.await_configmap(
        namespace,
        "billing-rendered",
        lambda cm: "port = 9000" in (cm.get("data") or {}).get("config.properties", ""),
    )
    consul_server.client.kv.put(key, json.dumps({"host": "db.internal", "port": 9100}))
    kube.await_configmap(
        namespace,
        "billing-rendered",
        lambda cm: "port = 9100" in (cm.get("data") or {}).get("config.properties", ""),
        timeout=10,
    )


def test_vault_cluster_class_goes_into_a_secret_and_never_a_configmap(
    operator: Operator, kube: Any, namespace: str, vault_server: Any
) -> None:
    platform = f"{namespace}-platform"
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=platform)))
    kube.core.create_namespaced_secret(
        platform,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="vault-token"),
            data={"token": base64.b64encode(vault_server.token.encode()).decode()},
        ),
    )
    path = f"op-{uuid.uuid4().hex[:8]}"
    vault_server.client.secrets.kv.v2.create_or_update_secret(
        path=path, secret={"postgres-password": "s3cret", "db": {"user": "app"}}
    )
    cluster_name = f"platform-vault-{namespace}"
    kube.create(
        CLUSTER_CLASS_KIND,
        None,
        cluster_name,
        {
            "source": "vault",
            "endpoint": vault_server.addr,
            "tokenSecret": {"name": "vault-token", "namespace": platform},
        },
    )
    try:
        common = {"class": cluster_name, "classKind": CLUSTER_CLASS_KIND, "key": f"secret/{path}"}
        kube.create(
            RENDER_KIND,
            namespace,
            "into-configmap",
            {**common, "target": {"configMap": "pg", "file": "pg.json"}},
        )
        kube.create(
            RENDER_KIND,
            namespace,
            "into-secret",
            {**common, "target": {"secret": "pg-credentials", "shape": "entries"}},
        )
        refused = kube.await_render(
            namespace, "into-configmap", kube.ready("RenderFailed", "False")
        )
        assert "give the Render a `secret:` target instead" in refused["status"]["lastError"]
        secret = kube.await_secret(namespace, "pg-credentials", lambda s: bool(s.get("data")))
        data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
        assert data == {"postgres-password": "s3cret", "db.user": "app"}
        assert "s3cret" not in json.dumps(refused["status"])
    finally:
        kube.custom.delete_cluster_custom_object(
            "dynamic-config.rs", "v1alpha1", "clusterdynamicconfigclasses", cluster_name
        )
        kube.core.delete_namespace(platform)


def test_nats_class_renders_through_the_async_one_shot_read(
    operator: Operator, kube: Any, namespace: str, nats_server: Any
) -> None:
    """NATS's client is async: the operator reads it with the same one-shot call as consul."""
    import asyncio

    import nats
    from nats.js.api import KeyValueConfig

    bucket = f"op{uuid.uuid4().hex[:8]}"

    async def put(value: bytes) -> None:
        client = await nats.connect(nats_server.url, connect_timeout=5)
        try:
            kv = await client.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
            await kv.put("config.json", value)
        finally:
            await client.close()

    asyncio.run(put(json.dumps({"port": 9200}).encode()))
    kube.create(
        CLASS_KIND, namespace, "infra-nats", {"source": "nats", "endpoint": nats_server.url}
    )
    kube.create(
        RENDER_KIND,
        namespace,
        "nats-config",
        {
            "class": "infra-nats",
            "key": f"{bucket}/config.json",
            "target": {"configMap": "nats-rendered", "file": "config.properties"},
        },
    )
    kube.await_configmap(
        namespace,
        "nats-rendered",
        lambda cm: "port = 9200" in (cm.get("data") or {}).get("config.properties", ""),
    )
