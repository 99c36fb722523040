"""Trust-material rotation (redis over TLS), Vault dynamic database credentials, and Events."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import AgentProcess, wait_file, wait_for
from .test_stores import needs_store

Start = Callable[..., AgentProcess]


def test_ca_rotated_rebuilds_the_client_in_place(
    agent: Start, redis_server: Any, tmp_path: Path
) -> None:
    needs_store("redis")
    key = f"agent/{uuid.uuid4().hex}.json"
    redis_server.client.set(key, json.dumps({"v": 1}))
    ca = tmp_path / "ca" / "ca.crt"
    ca.parent.mkdir()
    shutil.copy(redis_server.ca_cert, ca)
    out = tmp_path / "app.json"
    process = agent(
        "--source",
        "redis",
        "--endpoint",
        f"rediss://{redis_server.host}:{redis_server.tls_port}",
        "--key",
        key,
        "--out",
        str(out),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        "--ca",
        str(ca),
        "--tls-cert",
        str(redis_server.client_cert),
        "--tls-key",
        str(redis_server.client_key),
    )
    wait_file(out, lambda t: '"v": 1' in t)
    # the kubelet rewrites the mount: the same authority, now bundled twice (new bytes)
    ca.write_bytes(redis_server.ca_cert.read_bytes() * 2)
    process.wait_metric("tls_reloads_total", lambda v: v == 1)
    redis_server.client.set(key, json.dumps({"v": 2}))
    wait_file(out, lambda t: '"v": 2' in t)
    # the file is renamed into place a moment before the render is counted
    process.wait_metric("renders_total", lambda v: v >= 2)
    assert process.metric("renders_total") == 2  # the counters survived the rebuild
    assert process.proc.poll() is None
    redis_server.client.delete(key)


def test_tls_skip_verify_is_loud(agent: Start, tmp_path: Path) -> None:
    needs_store("consul")
    # consul's client can switch verification off; nothing needs to answer for the agent to
    # say so (best-effort keeps it running while the store is unreachable)
    process = agent(
        "--source",
        "consul",
        "--endpoint",
        "https://127.0.0.1:1",
        "--key",
        "a.json",
        "--out",
        str(tmp_path / "a.json"),
        "--watch",
        "1",
        "--timeout",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        "--tls-skip-verify",
        "--startup-policy",
        "best-effort",
    )
    process.wait_event("serving_empty", timeout=30)
    assert process.metric("tls_verification_skipped") == 1
    assert any(
        line.get("level") == "warning" and "TLS VERIFICATION IS OFF" in line["event"]
        for line in process.lines
    )


@pytest.fixture
def database_role(vault_server: Any, postgres_server: Any) -> str:
    """A database secrets engine minting postgres logins: TTL 4 s, at most 10 s."""
    needs_store("vault")
    client = vault_server.client
    mount = f"db-{uuid.uuid4().hex[:8]}"
    client.sys.enable_secrets_engine("database", path=mount)
    client.secrets.database.configure(
        name="pg",
        plugin_name="postgresql-database-plugin",
        mount_point=mount,
        connection_url=f"postgresql://{{{{username}}}}:{{{{password}}}}@{postgres_server.host}:"
        f"{postgres_server.port}/{postgres_server.dbname}?sslmode=disable",
        username=postgres_server.user,
        password=postgres_server.password,
        allowed_roles=["app"],
        verify_connection=True,
    )
    client.secrets.database.create_role(
        name="app",
        db_name="pg",
        mount_point=mount,
        creation_statements=[
            "CREATE ROLE \"{{name}}\" WITH LOGIN PASSWORD '{{password}}' "
            "VALID UNTIL '{{expiration}}';"
        ],
        default_ttl="4s",
        max_ttl="10s",
    )
    return f"{mount}/creds/app"


def _role_exists(postgres_server: Any, name: str) -> bool:
    with postgres_server.connect() as conn:
        return (
            conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
            is not None
        )


@pytest.mark.parametrize("skew_minutes", [0, 10, -10], ids=["true-clock", "ahead", "behind"])
def test_dynamic_secret_renews_without_rendering_reissues_and_revokes(
    agent: Start,
    vault_server: Any,
    postgres_server: Any,
    database_role: str,
    tmp_path: Path,
    skew_minutes: int,
    request: pytest.FixtureRequest,
) -> None:
    """Renewed in place, re-issued past max_ttl, revoked at stop; with the agent's node ten
    minutes ahead of or behind Vault (libfaketime), the same: a lease is timed by its own
    duration, never by comparing the node's clock with Vault's."""
    skewed = request.getfixturevalue("skewed_env")(skew_minutes) if skew_minutes else {}
    out = tmp_path / "db.json"
    process = agent(
        "--source",
        "vault",
        "--endpoint",
        vault_server.addr,
        "--key",
        database_role,
        "--dynamic",
        "--out",
        str(out),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        env={"DYNAMIC_CONFIG_AGENT_TOKEN": vault_server.token, **skewed},
    )
    first = json.loads(wait_file(out, lambda t: "username" in t))
    assert process.metric("lease_ttl_seconds") > 0
    process.wait_metric("lease_renewals_total", lambda v: v >= 1, timeout=15)
    assert process.metric("renders_total") == 1  # a renewal does not re-render
    # past max_ttl the renewal cannot extend: the credential is re-issued and re-rendered
    second = json.loads(
        wait_file(out, lambda t: json.loads(t)["username"] != first["username"], timeout=30)
    )
    assert process.metric("renders_total") >= 2
    assert _role_exists(postgres_server, second["username"])
    current = json.loads(out.read_text())["username"]
    assert process.stop() == 0
    assert process.events("lease_revoked")
    wait_for(lambda: not _role_exists(postgres_server, current), timeout=10, what="role dropped")


@dataclass
class EventsAccess:
    """What an agent with ``--events`` needs: a service account allowed to create Events."""

    namespace: str
    env: dict[str, str | None]


@pytest.fixture
def events_access(
    kube_control_plane: Any, kube_client: Any, mint_sa_token: Any, tmp_path: Path
) -> EventsAccess:
    from kubernetes import client as k8s  # type: ignore[import-untyped]

    namespace, account = "agent-events", "app"
    token = mint_sa_token(namespace, account)
    rbac = k8s.RbacAuthorizationV1Api(kube_client)
    role = k8s.V1Role(
        metadata=k8s.V1ObjectMeta(name="events"),
        rules=[k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["create"])],
    )
    binding = k8s.V1RoleBinding(
        metadata=k8s.V1ObjectMeta(name="events"),
        role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="events"),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name=account, namespace=namespace)],
    )
    for create, body in (
        (rbac.create_namespaced_role, role),
        (rbac.create_namespaced_role_binding, binding),
    ):
        try:
            create(namespace, body)
        except k8s.ApiException as err:
            if err.status != 409:
                raise
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "namespace").write_text(namespace)
    shutil.copy(kube_control_plane.ca, sa / "ca.crt")
    server = kube_control_plane.server.removeprefix("https://")
    host, _, port = server.rpartition(":")
    return EventsAccess(
        namespace,
        {
            "DYNCONF_SERVICEACCOUNT_DIR": str(sa),
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
        },
    )


def _events(kube_client: Any, namespace: str, pod: str, reason: str) -> list[Any]:
    from kubernetes import client as k8s

    items = k8s.CoreV1Api(kube_client).list_namespaced_event(namespace).items
    return [e for e in items if e.involved_object.name == pod and e.reason == reason]


def test_render_failed_event_reaches_the_apiserver(
    agent: Start, events_access: EventsAccess, kube_client: Any, tmp_path: Path
) -> None:
    namespace = events_access.namespace
    doc = tmp_path / "app.yaml"
    doc.write_text("db:\n  host: a\n")
    template = tmp_path / "t.tpl"
    template.write_text("host={{ db.host }}\n")
    out = tmp_path / "out" / "app.env"
    out.parent.mkdir()
    pod = f"web-{uuid.uuid4().hex[:6]}"
    process = agent(
        "--source",
        "file",
        "--key",
        str(doc),
        "--out",
        str(out),
        "--template",
        str(template),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        "--events",
        env={
            "DYNAMIC_CONFIG_POD_NAME": pod,
            "DYNAMIC_CONFIG_POD_UID": str(uuid.uuid4()),
            **events_access.env,
        },
    )
    wait_file(out, lambda t: t == "host=a\n")
    template.write_text("host={{ db.hots }}\n")
    doc.write_text("db:\n  host: b\n")
    process.wait_event("event_written", timeout=30)
    events = wait_for(
        lambda: _events(kube_client, namespace, pod, "RenderFailed"), what="RenderFailed event"
    )
    event = events[0]
    assert event.type == "Warning" and event.source.component == "dynamic-config-agent"
    assert event.metadata.name.startswith(f"{pod}.") and event.count == 1
    assert out.read_text() == "host=a\n"


def test_fatal_exit_waits_for_the_event_that_says_why(
    agent: Start, events_access: EventsAccess, kube_client: Any, tmp_path: Path
) -> None:
    doc = tmp_path / "app.yaml"
    doc.write_text("a: 1\n")
    out = tmp_path / "out" / "app.json"
    out.parent.mkdir()
    pod = f"web-{uuid.uuid4().hex[:6]}"
    process = agent(
        "--source",
        "file",
        "--key",
        str(doc),
        "--out",
        str(out),
        "--watch",
        "1",
        "--on-delete",
        "fail",
        "--events",
        env={"DYNAMIC_CONFIG_POD_NAME": pod, **events_access.env},
    )
    wait_file(out, lambda t: '"a": 1' in t)
    doc.unlink()
    assert process.wait_exit(timeout=30) == 1
    # already there when the process is gone: the exit waited for the Event's thread
    assert _events(kube_client, events_access.namespace, pod, "DocumentAbsent")
    names = [line.get("event") for line in process.lines]
    assert names.index("event_written") < names.index("agent_failed")
