"""The JSON patch that injects the agent, op by op in the contract's order.

Order matters and is golden-locked: the status mark, the volumes (the shared volume first,
then auxiliary volumes in a fixed order), the shared mount in each selected container, the
pull secret, the env-inject wrapper, the init agent(s), then the watcher(s). Secrets reach
the agent as Secret-backed variables and key material as read-only mounts into the agent
alone; no value ever rides an argument.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Final

from dynconf.publish import meta_path
from dynconf_k8s.contract.parse import AGENT, INIT, INJECTED
from dynconf_k8s.contract.plan import Also, Plan, Render
from dynconf_k8s.contract.registry import KEYS, REGISTRY

__all__ = [
    "ETC",
    "VOLUME",
    "AgentContainers",
    "agent_container",
    "agent_containers",
    "also_arg",
    "build_patch",
    "container_names",
    "volume_names",
]

VOLUME: Final = "dynamic-config"
ETC: Final = "/etc/dynamic-config"
SIZE_LIMIT: Final = "16Mi"
TOKEN_VOLUME: Final = "dynamic-config-token"  # noqa: S105 - a volume name, not a secret
SERVICEACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
_STATUS_PATH: Final = "/metadata/annotations/dynamic-config.rs~1status"

Json = dict[str, Any]
AgentContainers = Mapping[tuple[str | None, bool], Json]
"""Every agent a plan injects, by ``(render name, watching)``: built once per admission, then
checked by the agent's own parser and placed in the patch (the same dictionaries)."""


def _add(path: str, value: object) -> Json:
    return {"op": "add", "path": path, "value": value}


def _suffixed(base: str, render: Render) -> str:
    return f"{base}-{render.name}" if render.name else base


def container_names(plan: Plan) -> list[str]:
    """Every container name the injection adds (the collision check uses exactly these)."""
    names = []
    for render in (plan.default, *plan.named):
        if plan.inits:
            names.append(_suffixed(INIT, render))
        if plan.watches:
            names.append(_suffixed(AGENT, render))
    return names


def volume_names(plan: Plan) -> list[str]:
    """Every pod volume the injection adds (the collision check uses exactly these)."""
    return [volume["name"] for volume in _volumes(plan)]


def _volumes(plan: Plan) -> list[Json]:
    empty_dir: Json = {"sizeLimit": SIZE_LIMIT}
    if plan.volume_medium == "memory":
        empty_dir = {"medium": "Memory", "sizeLimit": SIZE_LIMIT}
    out: list[Json] = [{"name": VOLUME, "emptyDir": empty_dir}]
    default = plan.default
    if default.ca:
        out.append({"name": "dynamic-config-ca", "configMap": {"name": default.ca.name}})
    if default.ssh:
        out.append(_secret("dynamic-config-ssh", default.ssh.name, 0o400))
    if plan.extra_secret:
        out.append(_secret("dynamic-config-extra", plan.extra_secret, 0o444))
    if plan.canary:
        out.append({"name": "dynamic-config-canary", "configMap": {"name": plan.canary.name}})
    if default.tls_secret:
        out.append(_secret("dynamic-config-client-tls", default.tls_secret, 0o444))
    for render in plan.named:
        if render.ca:
            out.append({"name": f"dynamic-config-ca-{render.name}",
                        "configMap": {"name": render.ca.name}})  # fmt: skip
        if render.ssh:
            out.append(_secret(f"dynamic-config-ssh-{render.name}", render.ssh.name, 0o400))
        if render.tls_secret:
            out.append(
                _secret(f"dynamic-config-client-tls-{render.name}", render.tls_secret, 0o444)
            )
        if render.template_configmap:
            out.append({"name": f"dynamic-config-template-{render.name}",
                        "configMap": {"name": render.template_configmap.name}})  # fmt: skip
    if default.template_configmap:
        out.append({"name": "dynamic-config-template",
                    "configMap": {"name": default.template_configmap.name}})  # fmt: skip
    if plan.schema:
        out.append({"name": "dynamic-config-schema", "configMap": {"name": plan.schema.name}})
    if plan.events:
        out.append(_token_volume())
    return out


def _token_volume() -> Json:
    """The service-account token, CA and namespace the agent's Event writer reads.

    Injected containers are added after the API server's own service-account mounting, so
    even an automounting pod gives the agent no token; with ``events`` the agent gets its own
    projected one (the kubelet rotates it), mounted where a client looks for it and nowhere
    else. Without ``events`` the agent holds no token at all.
    """
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                               "name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                         "fieldPath": "metadata.namespace"},
                                            "path": "namespace"}]}},
            ],
        },
    }  # fmt: skip


def _secret(name: str, secret: str, mode: int) -> Json:
    return {"name": name, "secret": {"defaultMode": mode, "secretName": secret}}


def _aux_dir(kind: str, render: Render) -> str:
    return f"{ETC}/{kind}-{render.name}" if render.name else f"{ETC}/{kind}"


_STORE_FIELD_ROWS: Final = tuple(row for row in KEYS if row.store_field)
"""The store's plain string inputs (the rows naming a StoreSpec field), in table order."""
_SETTING_ROWS: Final = tuple(row for row in KEYS if row.setting)
"""The loaded stores' setting inputs, each its own flag (``--token-header``)."""
_DEFAULT_ONLY: Final = ("startup-policy", "on-delete", "max-document-bytes", "max-staleness")
"""Pod-scope rows every agent of the default render takes (init and watcher), in golden order."""


def _row(name: str, value: object) -> list[str]:
    """The agent arguments of one row's resolved value: the row says its flag and form."""
    return REGISTRY[name].args(value)


def _store_args(plan: Plan, render: Render) -> list[str]:
    args = _row("source", render.source)
    if render.endpoint_secret is None:
        args += _row("endpoint", render.endpoint)
    args += _row("key", render.key) + _row("path", render.path) + _row("section", render.section)
    for row in _STORE_FIELD_ROWS:
        args += row.args(getattr(render, row.target or ""))
    for row in _SETTING_ROWS:
        args += row.args(render.settings.get(row.setting or ""))
    if render.name is None:
        for name in _DEFAULT_ONLY:
            args += _row(name, getattr(plan, REGISTRY[name].target or ""))
    if render.ssh is not None:
        if render.auth is None:
            args += _row("auth", "ssh-key")
        args += _row("ssh-secret", f"{_aux_dir('ssh', render)}/{render.ssh.key}")
    if render.ca is not None:
        args += _row("ca-configmap", f"{_aux_dir('ca', render)}/{render.ca.key}")
    args += _row("tls-server-name", render.tls_server_name)
    args += _row("tls-skip-verify", render.tls_skip_verify)
    args += _row("file-mode", render.file_mode)
    args += _row("store-budget", render.store_budget)
    if render.template_inline is not None:
        args += _row("template", render.template_inline)
    elif render.template_configmap is not None:
        path = f"{_aux_dir('template', render)}/{render.template_configmap.key}"
        args += _row("template-configmap", path)
    if render.name is None and plan.schema is not None:
        args += _row("schema-configmap", f"{ETC}/schema/{plan.schema.key}")
    if render.tls_secret is not None:
        tls = _aux_dir("tls", render)
        cert, key = REGISTRY["tls-secret"].flags
        args += [cert, f"{tls}/tls.crt", key, f"{tls}/tls.key"]
    return args


def also_arg(also: Also) -> str:
    """The value of one ``--also`` (admission has refused the separators in its parts)."""
    return f"out={also.path}" + (f",section={also.section}" if also.section else "")


def _metrics(render: Render) -> list[str]:
    return _row("metrics-port", f"0.0.0.0:{render.metrics_port}" if render.metrics_port else None)


def _render_watch_args(render: Render) -> list[str]:
    """The per-render rows only a watching agent takes, for a named render's watcher (the
    default render's come in golden order among the pod's own)."""
    return _row("tls-reload", render.tls_reload) + _row("timeout", render.timeout)


def _args(plan: Plan, render: Render, watch: bool) -> list[str]:
    args = _store_args(plan, render)
    if watch:
        args += _row("watch-seconds", render.watch_seconds)
    if render.name is not None:
        return args + (_render_watch_args(render) + _metrics(render) if watch else [])
    args += _row("dynamic", plan.dynamic)
    for also in plan.also:
        args += ["--also", also_arg(also)]
    if not watch:
        # the app's first start reads the init render's fingerprint
        return args + _row("meta", plan.env_restart)
    # env-restart's wrapper and probe read the meta file
    args += _row("meta", plan.meta or plan.env_restart)
    if plan.dynamic:
        args += _row("revoke-on-shutdown", plan.revoke_on_shutdown)
    args += _row("notify-http", plan.notify_http) + _row("on-drift", plan.on_drift)
    args += _row("tls-reload", render.tls_reload) + _row("history", plan.history)
    args += _row("require-ack", plan.require_ack) + _row("events", plan.events)
    args += _row("timeout", render.timeout)
    if plan.canary is not None:
        args += _row("canary-configmap", f"{ETC}/canary/{plan.canary.key}")
    if plan.dynamic and plan.revoke_on_shutdown:
        args += _row("revoke-grace", plan.revoke_grace)
    return args + _metrics(render)


def _mounts(plan: Plan, render: Render, watch: bool) -> list[Json]:
    out: list[Json] = [{"mountPath": plan.mount_dir, "name": VOLUME}]

    def ro(volume: str, path: str) -> None:
        out.append({"mountPath": path, "name": volume, "readOnly": True})

    if render.name is None:
        if render.ca:
            ro("dynamic-config-ca", f"{ETC}/ca")
        if render.ssh:
            ro("dynamic-config-ssh", f"{ETC}/ssh")
        if plan.canary:
            ro("dynamic-config-canary", f"{ETC}/canary")
        if plan.extra_secret:
            ro("dynamic-config-extra", f"{ETC}/extra")
        if render.tls_secret:
            ro("dynamic-config-client-tls", f"{ETC}/tls")
        if render.template_configmap:
            ro("dynamic-config-template", f"{ETC}/template")
        if plan.schema:
            ro("dynamic-config-schema", f"{ETC}/schema")
        if plan.events and watch:
            ro(TOKEN_VOLUME, SERVICEACCOUNT_DIR)
        return out
    name = render.name
    if render.ca:
        ro(f"dynamic-config-ca-{name}", f"{ETC}/ca-{name}")
    if render.ssh:
        ro(f"dynamic-config-ssh-{name}", f"{ETC}/ssh-{name}")
    if render.tls_secret:
        ro(f"dynamic-config-client-tls-{name}", f"{ETC}/tls-{name}")
    if render.template_configmap:
        ro(f"dynamic-config-template-{name}", f"{ETC}/template-{name}")
    return out


def _secret_env(name: str, secret: str, key: str) -> Json:
    return {"name": name, "valueFrom": {"secretKeyRef": {"key": key, "name": secret}}}


def _env(plan: Plan, render: Render) -> list[Json]:
    out: list[Json] = []
    for name, ref in (
        ("DYNAMIC_CONFIG_AGENT_TOKEN", render.token_secret),
        ("DYNAMIC_CONFIG_AGENT_PASSWORD", render.password_secret),
        ("DYNAMIC_CONFIG_AGENT_ENDPOINT", render.endpoint_secret),
    ):
        if ref is not None:
            out.append(_secret_env(name, ref.secret, ref.key))
    aws = [
        _secret_env(name, plan.aws_secret, name)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    ] if plan.aws_secret else []  # fmt: skip
    if render.name is None:
        out += aws
        if plan.events or plan.canary:
            for name, field_path in (
                ("DYNAMIC_CONFIG_POD_NAME", "metadata.name"),
                ("DYNAMIC_CONFIG_POD_UID", "metadata.uid"),
            ):
                out.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}})
    merged: dict[str, str] = {}
    for name, value in plan_fleet_env(plan):
        merged[name] = value
    for name, value in plan.agent_env:
        merged[name] = value
    out += [{"name": name, "value": value} for name, value in merged.items()]
    if render.name is not None:
        out += aws
    return out


def plan_fleet_env(plan: Plan) -> list[tuple[str, str]]:
    """The fleet environment every agent gets (AWS keys step aside for aws-secret)."""
    drop = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if plan.aws_secret else ()
    return [(n, v) for n, v in plan.fleet_env if n not in drop]


def agent_container(plan: Plan, render: Render, watch: bool) -> Json:
    """One injected agent: the default render's or a named one, init or watching."""
    container: Json = {
        "name": _suffixed(AGENT if watch else INIT, render),
        "image": plan.image if render.name is None else plan.installation_image,
        "args": _args(plan, render, watch),
        "volumeMounts": _mounts(plan, render, watch),
        "resources": _resources(plan, render),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsGroup": plan.run_as_group,
            "runAsNonRoot": True,
            "runAsUser": plan.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    env = _env(plan, render)
    if env:
        container["env"] = env
    port = render.metrics_port if watch else None
    if port:
        named = render.name is None
        container["ports"] = [{"containerPort": port, "name": "metrics"} if named
                              else {"containerPort": port}]  # fmt: skip
        if plan.readiness:
            container["readinessProbe"] = {
                "failureThreshold": 60,
                "httpGet": {"path": "/readyz", "port": "metrics" if named else port},
                "periodSeconds": 5,
            }
            if plan.native_sidecar and named and not plan.inits and not plan.require_ack:
                container["startupProbe"] = _first_render_probe()
    return container


def agent_containers(plan: Plan) -> AgentContainers:
    """Every agent the plan injects: the init agents, then the watchers, renders in order."""
    out: dict[tuple[str | None, bool], Json] = {}
    for watch, wanted in ((False, plan.inits), (True, plan.watches)):
        if wanted:
            for render in (plan.default, *plan.named):
                out[render.name, watch] = agent_container(plan, render, watch)
    return out


def _first_render_probe() -> Json:
    """Hold the app containers until the native sidecar's first render is published.

    The kubelet starts the containers after a restartable init container once it has
    *started*, or once its startupProbe passes; without the probe an app (a Job's, say) could
    open the file before it exists.  ``mode: both`` has the init agent for that, and with
    ``require-ack`` readiness waits on the app itself, so neither gets it.  Found on the node.
    """
    return {"failureThreshold": 300, "httpGet": {"path": "/readyz", "port": "metrics"},
            "periodSeconds": 1}  # fmt: skip


def _resources(plan: Plan, render: Render) -> Json:
    requests = dict(plan.requests)
    limits = dict(plan.limits)
    if render.name is not None:
        requests.pop("ephemeral-storage", None)
        limits.pop("ephemeral-storage", None)
    return {"limits": limits, "requests": requests}


def started_path(path: str) -> str:
    """Where the ``env-restart`` wrapper notes the fingerprint its app started with."""
    meta = meta_path(path)
    return str(meta.with_name(meta.name.removesuffix(".meta") + ".env-started"))


def _read_fingerprint(meta: str) -> str:
    """Shell that sets ``f`` to ``sha256:<hex>`` from the agent's meta file, builtins only.

    The meta file is the agent's 2-space JSON whose second line is ``"fingerprint": "sha256:…"``
    (``--meta``, which ``env-restart`` turns on): ``read`` and parameter expansion take it apart,
    so the app image needs nothing but a POSIX ``sh`` (no ``cksum``, ``cat`` or ``sed``).
    """
    return f'{{ read -r f && read -r f; }} < {meta}; f=${{f#*sha256:}}; f="sha256:${{f%%\\"*}}"; '


def _env_inject(pod: Mapping[str, Any], plan: Plan) -> list[Json]:
    if plan.env_inject is None:
        return []
    index = plan.env_inject
    container = pod["spec"]["containers"][index]
    # Paths are pasted into a shell script: quoted, so no character in them is syntax.
    path = shlex.quote(plan.default.path)
    meta = shlex.quote(str(meta_path(plan.default.path)))
    started = shlex.quote(started_path(plan.default.path))
    script = ""
    if plan.env_restart:
        # The fingerprint is read BEFORE the file: the agent writes the file, then the meta, so
        # a race can only pair an older fingerprint with a newer file (one restart too many),
        # never a newer fingerprint with an older file (a restart missed). The probe runs in
        # the container's original environment, not the wrapper's, so the fingerprint the app
        # started with is also noted in a file on the shared volume for the probe to compare.
        script += _read_fingerprint(meta)
    script += f"set -a; . {path}; set +a; "
    if plan.env_restart:
        script += f'export DYNAMIC_CONFIG_ENV_FINGERPRINT="$f"; echo "$f" > {started}; '
    script += 'exec "$@"'
    command = ["/bin/sh", "-c", script, "dynamic-config-env",
               *container.get("command", []), *container.get("args", [])]  # fmt: skip
    base = f"/spec/containers/{index}"
    ops: list[Json] = [{"op": "replace", "path": f"{base}/command", "value": command}]
    if "args" in container:
        ops.append({"op": "remove", "path": f"{base}/args"})
    if plan.env_restart:
        check = _read_fingerprint(meta) + f'read -r s < {started}; test "$f" = "$s"'
        probe = {
            "exec": {"command": ["/bin/sh", "-c", check]},
            "failureThreshold": 1,
            "periodSeconds": min(max(plan.default.watch_seconds, 10), 120),
        }
        ops.append(_add(f"{base}/livenessProbe", probe))
    return ops


def build_patch(
    pod: Mapping[str, Any], plan: Plan, agents: AgentContainers | None = None
) -> list[Json]:
    """The whole patch for an admitted plan (``agents``: its agent containers, when built)."""
    if agents is None:
        agents = agent_containers(plan)
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ops: list[Json] = []
    if metadata.get("annotations") is None:
        ops.append(_add("/metadata/annotations", {}))
    ops.append(_add(_STATUS_PATH, INJECTED))
    if spec.get("volumes") is None:
        ops.append(_add("/spec/volumes", []))
    ops += [_add("/spec/volumes/-", volume) for volume in _volumes(plan)]
    containers = spec.get("containers") or []
    for index in plan.mount_containers:
        if containers[index].get("volumeMounts") is None:
            ops.append(_add(f"/spec/containers/{index}/volumeMounts", []))
        ops.append(_add(f"/spec/containers/{index}/volumeMounts/-",
                        {"mountPath": plan.mount_dir, "name": VOLUME}))  # fmt: skip
    if plan.pull_secret:
        if spec.get("imagePullSecrets") is None:
            ops.append(_add("/spec/imagePullSecrets", []))
        ops.append(_add("/spec/imagePullSecrets/-", {"name": plan.pull_secret}))
    ops += _env_inject(pod, plan)
    has_inits = spec.get("initContainers") is not None
    if plan.inits:
        if not has_inits:
            ops.append(_add("/spec/initContainers", []))
            has_inits = True
        where = "/spec/initContainers/0" if plan.init_first else "/spec/initContainers/-"
        ops.append(_add(where, agents[plan.default.name, False]))
        for render in plan.named:
            ops.append(_add("/spec/initContainers/-", agents[render.name, False]))
    if plan.watches:
        target = "/spec/containers/-"
        if plan.native_sidecar:
            if not has_inits:
                ops.append(_add("/spec/initContainers", []))
            target = "/spec/initContainers/-"
        for render in (plan.default, *plan.named):
            container = agents[render.name, True]
            if plan.native_sidecar:
                container = {**container, "restartPolicy": "Always"}
            ops.append(_add(target, container))
    return ops
