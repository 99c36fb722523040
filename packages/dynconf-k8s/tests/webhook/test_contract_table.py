"""The contract table drives the agent: every row's flag parses, and every patch round-trips.

The webhook resolves a pod into a :class:`~dynconf_k8s.contract.plan.Plan` and writes each
agent's arguments off the rows; the agent parses them back with its own parser. For a table
of representative pods (each of the nine stores, and pods that exercise the pod-scope rows),
every injected agent must parse into exactly the settings the plan decided — a row whose flag
is written one way and read another fails here, whichever side drifted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES
from dynconf_k8s.agent.flags import (
    AGENT_ONLY_FLAGS,
    BARE_FLAGS,
    USAGE,
    VALUE_FLAGS,
    AgentSettings,
    UsageError,
    parse_args,
)
from dynconf_k8s.contract import parse_installation, parse_pod
from dynconf_k8s.contract.plan import Plan, Render
from dynconf_k8s.contract.registry import KEYS
from dynconf_k8s.vocabulary import STORES
from dynconf_k8s.webhook.patch import build_patch

ENDPOINT_FROM_SECRET = "https://from-the-secret.example:8200"
_BASE = {"dynamic-config.rs/inject": "true"}
OPT_INS = {
    "DYNAMIC_CONFIG_WEBHOOK_ALLOW_EVENTS": "true",
    "DYNAMIC_CONFIG_WEBHOOK_ALLOW_TLS_SKIP_VERIFY": "true",
}
"""The installation of the table: every opt-in offered, so every row can be written."""


def _pod(source: str, **annotations: str) -> dict[str, str]:
    return {
        **_BASE,
        "dynamic-config.rs/source": source,
        **{f"dynamic-config.rs/{name.replace('_', '-')}": v for name, v in annotations.items()},
    }


# fmt: off
PODS: dict[str, dict[str, str]] = {
    "consul": _pod("consul", endpoint="http://consul:8500", key="app/config.json",
                   path="/config/app.json", section="database", timeout="7",
                   token_secret="consul-token/token", watch_seconds="30", file_mode="0640",
                   store_budget="10/20"),
    "vault": _pod("vault", endpoint="https://vault:8200", key="secret/app",
                  path="/config/app.yaml", auth="kubernetes", auth_role="app",
                  auth_mount="k8s-east", namespace="team-a", ca_configmap="vault-ca",
                  tls_server_name="vault.internal", tls_secret="vault-client",
                  auth_token_path="/var/run/secrets/tokens/vault"),
    "vault-dynamic": _pod("vault", endpoint="https://vault:8200", key="database/creds/app",
                          path="/config/db.env", auth="kubernetes", auth_role="app",
                          dynamic="true", revoke_grace="10s", metrics_port="9110"),
    "vault-dynamic-kept": _pod("vault", endpoint="https://vault:8200", key="database/creds/app",
                               path="/config/db.env", auth="kubernetes", auth_role="app",
                               dynamic="true", revoke_on_shutdown="false"),
    "opt-ins": _pod("consul", endpoint="https://consul:8501", key="app/config.json",
                    path="/config/app.json", events="true", tls_skip_verify="true"),
    "config-server": _pod("config-server", endpoint="http://cs:8888",
                          key="billing/prod", path="/config/app.json",
                          auth="token", token_secret="cs-token/token"),
    "firestore": _pod("firestore", endpoint="my-project", key="configs/app.json",
                      path="/config/app.json", api_url="https://firestore.example:8443"),
    "git": _pod("git", endpoint="ssh://git@git.example/team/config.git", key="app/config.yaml",
                path="/config/app.yaml", ref="tag:v1.2.0", ssh_secret="deploy-key"),
    "redis": _pod("redis", endpoint="redis://redis:6379/0", key="app:config.json",
                  path="/config/app.json", mode="both"),
    "etcd": _pod("etcd", key="/app/config.json", path="/config/app.json",
                 endpoint_secret="etcd-addr/endpoint", auth_username="reader",
                 password_secret="etcd-pass/password"),
    "nats": _pod("nats", endpoint="nats://nats:4222", key="config/app/config.json",
                 path="/config/app.json", template="port={{ port }}"),
    "s3": _pod("s3", endpoint="myapp-config", key="app/config.json", path="/config/app.json",
               api_url="http://127.0.0.1:9000", aws_secret="s3-keys"),
    "pod-scope-rows": _pod(
        "consul", endpoint="http://consul:8500", key="app/config.json", path="/config/app.json",
        mode="both", startup_policy="require-fresh", on_delete="remove", on_drift="repair",
        max_document_bytes="65536", max_staleness="15m", history="3", meta="true",
        require_ack="true", metrics_port="9111", notify_http="http://localhost:8080/reload",
        tls_reload="false", canary_configmap="cohort", schema_configmap="app-schema",
        **{"also.db": "/config/db.json", "also-section.db": "database"},
    ),
    "named-render": {
        **_pod("consul", endpoint="http://consul:8500", key="app/config.json",
               path="/config/app.json", metrics_port="9112"),
        "dynamic-config.rs/source.creds": "vault",
        "dynamic-config.rs/endpoint.creds": "https://vault:8200",
        "dynamic-config.rs/key.creds": "secret/creds",
        "dynamic-config.rs/path.creds": "/config/creds.json",
        "dynamic-config.rs/auth.creds": "approle",
        "dynamic-config.rs/auth-role.creds": "creds",
        "dynamic-config.rs/password-secret.creds": "creds-secret-id/secret-id",
        "dynamic-config.rs/metrics-port.creds": "9113",
        "dynamic-config.rs/template-configmap.creds": "creds-template",
    },
}
# fmt: on


def _plan(annotations: dict[str, str]) -> tuple[Plan, list[dict[str, Any]]]:
    pod = {
        "metadata": {"name": "app", "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }
    plan, _warnings = parse_pod(pod, parse_installation(OPT_INS))
    assert plan is not None
    ops = build_patch(pod, plan)
    agents = [
        op["value"]
        for op in ops
        if isinstance(op.get("value"), dict)
        and str(op["value"].get("name", "")).startswith("dynamic-config-")
        and "args" in op["value"]
    ]
    return plan, agents


def _environ(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet would fill it (a Secret's value stood in)."""
    out = {}
    for entry in container.get("env", []):
        value = entry.get("value")
        if value is None:
            value = ENDPOINT_FROM_SECRET if entry["name"].endswith("_ENDPOINT") else "from-secret"
        out[entry["name"]] = value
    return out


def _render_of(plan: Plan, container: dict[str, Any]) -> Render:
    name = (
        container["name"].removeprefix("dynamic-config-agent").removeprefix("dynamic-config-init")
    )
    suffix = name.removeprefix("-") or None
    return next(r for r in (plan.default, *plan.named) if r.name == suffix)


def _expect_render(plan: Plan, render: Render, settings: AgentSettings, watch: bool) -> None:
    spec, main = settings.spec, settings.request.main
    assert settings.source == render.source
    assert spec.endpoint == (ENDPOINT_FROM_SECRET if render.endpoint_secret else render.endpoint)
    assert spec.key == render.key
    assert main.path == Path(render.path)
    assert main.section == render.section == spec.section
    for row in KEYS:
        if row.store_field:
            want = getattr(render, row.target or "")
            if row.name == "auth" and want is None and render.ssh is not None:
                want = "ssh-key"
            assert getattr(spec, row.store_field) == want, row.name
        if row.setting:
            assert spec.setting(row.setting) == render.settings.get(row.setting), row.name
    assert settings.watch == (render.watch_seconds if watch else None)
    assert main.mode == render.file_mode
    assert spec.tls.server_name == render.tls_server_name
    assert spec.tls.skip_verify == render.tls_skip_verify
    assert (spec.tls.ca_file is not None) == (render.ca is not None)
    assert (spec.tls.cert_file is not None) == (spec.tls.key_file is not None)
    assert (spec.tls.cert_file is not None) == (render.tls_secret is not None)
    assert (spec.setting("ssh_key") is not None) == (render.ssh is not None)
    has_template = render.template_inline is not None or render.template_configmap is not None
    assert (main.template is not None) == has_template
    if render.token_secret is not None:
        assert spec.token == "from-secret"
    if render.password_secret is not None:
        assert spec.password == "from-secret"
    port = settings.metrics_addr[1] if settings.metrics_addr else None
    assert port == (render.metrics_port if watch else None)


def _expect_default(plan: Plan, settings: AgentSettings, watch: bool) -> None:
    request = settings.request
    assert settings.spec.dynamic == plan.dynamic
    assert settings.startup_policy == (plan.startup_policy or "allow-cached")
    assert settings.on_delete == (plan.on_delete or "retain")
    want_bytes = int(plan.max_document_bytes or DEFAULT_MAX_DOCUMENT_BYTES)
    assert request.max_document_bytes == want_bytes
    assert settings.max_staleness == plan.max_staleness
    assert (request.schema is not None) == (plan.schema is not None)
    assert [(o.path, o.section) for o in request.outputs[1:]] == [
        (Path(a.path), a.section) for a in plan.also
    ]
    if not watch:
        return
    render = plan.default
    assert settings.on_drift == (plan.on_drift or "warn")
    assert settings.require_ack == plan.require_ack
    assert settings.events == plan.events
    assert request.meta == (plan.meta or plan.env_restart)
    assert request.history == (plan.history or 0)
    assert settings.tls_reload == render.tls_reload
    assert settings.spec.timeout == render.timeout
    assert settings.revoke_on_shutdown == (plan.revoke_on_shutdown or not plan.dynamic)
    grace = plan.revoke_grace if plan.dynamic and plan.revoke_grace is not None else 5.0
    assert settings.revoke_grace == grace
    assert (settings.canary is not None) == (plan.canary is not None)
    assert (settings.notify is not None) == (plan.notify_http is not None)


@pytest.mark.parametrize("label", sorted(PODS))
def test_every_injected_agent_parses_back_into_the_plans_settings(label: str) -> None:
    plan, agents = _plan(PODS[label])
    assert agents, label
    for container in agents:
        watch = container["name"].startswith("dynamic-config-agent")
        settings = parse_args(container["args"], _environ(container))
        render = _render_of(plan, container)
        _expect_render(plan, render, settings, watch)
        if render.name is None:
            _expect_default(plan, settings, watch)


def test_the_table_covers_each_store() -> None:
    sources = {pod["dynamic-config.rs/source"] for pod in PODS.values()}
    assert sources == set(STORES)


def test_the_table_writes_every_rows_flag() -> None:
    written: set[str] = set()
    for pod_annotations in PODS.values():
        for container in _plan(pod_annotations)[1]:
            written |= {arg for arg in container["args"] if arg.startswith("--")}
    assert {flag for row in KEYS for flag in row.flags} <= written


@pytest.mark.parametrize("flag", sorted({flag for row in KEYS for flag in row.flags}))
def test_every_rows_flag_is_accepted_by_the_agents_parser(flag: str) -> None:
    argv = ["--source", "consul", "--endpoint", "http://consul:8500", "--key", "k.json"]
    argv += ["--out", "/config/a.json"]
    argv += [flag] if flag in BARE_FLAGS else [flag, "x"]
    refused = None
    try:
        parse_args(argv, {"DYNAMIC_CONFIG_POD_NAME": "app"})
    except UsageError as error:  # the value "x" may be refused; the flag itself may not
        refused = error.message
    assert refused is None or not refused.startswith("unknown flag"), refused


def test_the_agents_parser_takes_exactly_the_rows_flags_and_its_own() -> None:
    from_rows = {flag for row in KEYS for flag in row.flags} | {"--also"}
    assert from_rows | AGENT_ONLY_FLAGS == BARE_FLAGS | VALUE_FLAGS


def test_usage_names_exactly_the_flags_the_parser_takes() -> None:
    named = set(re.findall(r"--[a-z][a-z-]*", USAGE))
    assert named == BARE_FLAGS | VALUE_FLAGS


def test_every_rows_operator_field_is_one_the_operators_specs_take() -> None:
    from dynconf_k8s.operator.types import ClassSpec, ClusterClassSpec, RenderSpec

    taken = {
        field.alias or name
        for model in (ClassSpec, ClusterClassSpec, RenderSpec)
        for name, field in model.model_fields.items()
    }
    named = {row.spec_field for row in KEYS if row.spec_field}
    assert named and named <= taken


def test_every_rows_csi_attribute_is_one_the_node_agent_takes() -> None:
    from dynconf_k8s.node.attributes import OPTIONAL, REQUIRED

    assert {row.csi for row in KEYS if row.csi} == {*REQUIRED, *OPTIONAL}


def test_a_store_input_refusal_mentioning_url_is_kept_when_the_endpoint_is_a_secret() -> None:
    # storecheck used to drop every refusal whose sentence said "url" or "host" when the
    # endpoint came from a Secret; api-url on vault was admitted and the agent then refused it
    from dynconf_k8s.contract.refusals import Refusal as PodRefusal

    annotations = _pod("vault", endpoint_secret="vault-addr/endpoint", key="secret/app",
                       path="/config/app.json", api_url="https://elsewhere:8200",
                       token_secret="vault-token/token")  # fmt: skip
    pod = {"metadata": {"name": "app", "annotations": annotations},
           "spec": {"containers": [{"name": "app", "image": "busybox"}]}}  # fmt: skip

    with pytest.raises(PodRefusal) as refused:
        parse_pod(pod, parse_installation({}))

    assert refused.value.message == (
        "dynamic-config.rs/api-url is firestore and s3's; remove it for a vault source"
    )


@pytest.mark.parametrize("name", ["section", "auth-role", "namespace", "tls-secret"])
def test_an_empty_store_string_annotation_is_refused_by_its_rows_rule(name: str) -> None:
    # the installation tier always judged these with the row's rule; the annotation now does too
    from dynconf_k8s.contract.refusals import Refusal as PodRefusal

    annotations = {**PODS["vault"], f"dynamic-config.rs/{name}": ""}
    pod = {"metadata": {"name": "app", "annotations": annotations},
           "spec": {"containers": [{"name": "app", "image": "busybox"}]}}  # fmt: skip

    with pytest.raises(PodRefusal) as refused:
        parse_pod(pod, parse_installation({}))

    assert refused.value.message == f"dynamic-config.rs/{name} is empty; give a value or drop it"
