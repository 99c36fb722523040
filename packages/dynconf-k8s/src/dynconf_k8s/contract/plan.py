"""What an admitted pod asked for, resolved against the installation.

:func:`dynconf_k8s.contract.parse.parse_pod` produces a :class:`Plan`; the webhook's patch
builder turns it into JSON patch operations. Every value here is already validated and
defaulted, so the builder makes no decisions of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dynconf_k8s.contract.rules import ConfigMapRef, SecretRef

__all__ = ["Also", "Plan", "Render"]


@dataclass(slots=True)
class Render:
    """One document fetched into one file: the default render (``name`` ``None``) or a named one."""

    name: str | None
    source: str
    key: str
    path: str
    endpoint: str | None = None
    endpoint_secret: SecretRef | None = None
    section: str | None = None
    auth: str | None = None
    auth_mount: str | None = None
    auth_role: str | None = None
    auth_username: str | None = None
    auth_token_path: str | None = None
    token_secret: SecretRef | None = None
    password_secret: SecretRef | None = None
    ca: ConfigMapRef | None = None
    tls_secret: str | None = None
    ssh: ConfigMapRef | None = None
    tls_server_name: str | None = None
    tls_skip_verify: bool = False
    file_mode: int | None = None
    template_inline: str | None = None
    template_configmap: ConfigMapRef | None = None
    watch_seconds: int = 15
    metrics_port: int | None = None
    tls_reload: bool = True
    timeout: int | None = None
    store_budget: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """The store's declared setting inputs (``StoreSpec.extra``), by input name; a switch
    that is on is ``"true"``, one that is off is absent."""


@dataclass(frozen=True, slots=True)
class Also:
    """Another file cut from the default render's fetch (``also.<name>``)."""

    name: str
    path: str
    section: str | None


@dataclass(slots=True)
class Plan:
    """The whole injection for one pod."""

    default: Render
    named: list[Render] = field(default_factory=list)
    mode: str = "sidecar"
    volume_medium: str = "memory"
    native_sidecar: bool = False
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    run_as_user: int = 65532
    run_as_group: int = 65532
    mount_containers: list[int] = field(default_factory=list)
    env_inject: int | None = None
    env_restart: bool = False
    readiness: bool = True
    init_first: bool = False
    extra_secret: str | None = None
    canary: ConfigMapRef | None = None
    schema: ConfigMapRef | None = None
    events: bool = False
    meta: bool = False
    dynamic: bool = False
    revoke_on_shutdown: bool = True
    revoke_grace: int | None = None
    notify_http: str | None = None
    on_drift: str | None = None
    history: int | None = None
    require_ack: bool = False
    startup_policy: str | None = None
    on_delete: str | None = None
    max_document_bytes: int | None = None
    max_staleness: int | None = None
    also: list[Also] = field(default_factory=list)
    agent_env: list[tuple[str, str]] = field(default_factory=list)
    aws_secret: str | None = None
    image: str = ""
    installation_image: str = ""
    pull_secret: str | None = None
    fleet_env: list[tuple[str, str]] = field(default_factory=list)

    @property
    def mount_dir(self) -> str:
        return mount_dir(self.default.path)

    @property
    def watches(self) -> bool:
        return self.mode in ("sidecar", "both")

    @property
    def inits(self) -> bool:
        return self.mode in ("init", "both")


def mount_dir(path: str) -> str:
    """The shared volume's mount: the path's parent directory, or ``/config`` when it has none."""
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    return parent or "/config"
