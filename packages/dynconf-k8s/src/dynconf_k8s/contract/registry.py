"""The annotation contract as one table.

Each ``dynamic-config.rs/*`` key is one :class:`Key` row: whether it takes a ``.name``
suffix, what its value looks like, its default, the installation knob that can default it
(fleet variable, installation-document key, or a per-store knob), and retirement metadata.
Parsing (which keys exist, which take suffixes), defaulting (which tier may answer),
warnings (retired keys), the documentation page and its test all read this table; nothing
else lists keys.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES
from dynconf_k8s.contract.loaded import loaded_stores
from dynconf_k8s.contract.rules import (
    nonempty,
    one_of,
    parse_agent_env,
    parse_bool,
    parse_configmap_ref,
    parse_duration_seconds,
    parse_file_mode,
    parse_file_path,
    parse_history,
    parse_mode,
    parse_port,
    parse_positive_bytes,
    parse_positive_seconds,
    parse_quantity,
    parse_secret_ref,
    parse_source,
    parse_store_budget,
    parse_uid,
    parse_volume_medium,
    parse_whole_seconds,
    verbatim,
)
from dynconf_k8s.vocabulary import ON_DELETE, ON_DRIFT, STARTUP_POLICIES

if TYPE_CHECKING:
    from dynconf.stores import StoreType

__all__ = [
    "ALSO",
    "ALSO_SECTION",
    "FLAG_KEYS",
    "FLEET_KNOBS",
    "INPUT_KEYS",
    "BOOK_KEYS",
    "KEYS",
    "PREFIX",
    "REGISTRY",
    "STORE_KNOBS",
    "SUFFIX",
    "Key",
    "annotation",
    "input_key",
    "split_key",
    "store_input_rows",
]

PREFIX: Final = "dynamic-config.rs/"
SUFFIX: Final = re.compile(r"[a-z0-9-]{1,32}")
ALSO: Final = "also"
ALSO_SECTION: Final = "also-section"


Scope = Literal["pod", "render", "store"]
FlagKind = Literal["value", "bare", "negated"]
FlagCarries = Literal["value", "path", "address"]


@dataclass(frozen=True, slots=True)
class Key:
    """One row of the contract.

    ``fleet_env`` / ``document_key`` name the fleet tier's spellings when the installation
    may default this key for every pod; ``store_knob`` marks keys a per-store group may
    default; ``deprecated_since`` / ``replacement`` retire a key with a warning instead of a
    refusal. The behaviour fields say what the value *is*, so parsing, the patch, the agent's
    parser and the node agent read it here instead of listing it again.
    """

    name: str
    per_render: bool
    form: str
    default: str
    summary: str
    fleet_env: str | None = None
    document_key: str | None = None
    store_knob: bool = False
    store_shaped: bool = False
    deprecated_since: str | None = None
    replacement: str | None = None
    flags: tuple[str, ...] = ()
    """The agent flags this key becomes in the patch (the agent's parser accepts each)."""
    rule: Callable[[str], object] = nonempty
    """The typed rule of the value (:mod:`.rules`): the annotation and every installation tier
    that stands in for it are judged by it."""
    value: object = None
    """The typed value when nobody sets the key (``None``: absent)."""
    target: str | None = None
    """The :class:`~.plan.Plan` (pod scope) or :class:`~.plan.Render` attribute the parser's
    loop fills with the resolved value; ``None`` when a named cross-key check reads it."""
    flag_kind: FlagKind = "value"
    """``value``: ``--flag VALUE``; ``bare``: ``--flag`` when true; ``negated``: ``--flag``
    when false (``--no-tls-reload``)."""
    flag_carries: FlagCarries = "value"
    """What a value flag carries: ``value``, the text as written, which the agent's parser
    judges by :attr:`rule` (the same function admission runs); ``path``, the file the patch
    mounts the named object at (``--ca /etc/dynamic-config/ca/ca.crt``); ``address``, the
    listener the patch builds from the value (``--metrics-addr 0.0.0.0:9110``). Only a
    ``value`` flag is judged by the row's rule on the agent's side."""
    absent: str | None = None
    """The flag text the agent assumes when no flag is written (``allow-cached``), judged by
    :attr:`rule` like a written one; ``None``: absent means unset. The patch never writes it,
    so the agent's default has this one home."""
    store_field: str | None = None
    """The :class:`dynconf.stores.StoreSpec` field the flag sets as a plain string."""
    store_input: str | None = None
    """The store input this key stands for when it is not a plain string (``token``,
    ``tls.ca_file``): a store's :class:`dynconf.errors.Refusal` about it names this key."""
    spec_field: str | None = None
    """The operator's spelling of the same input (a class's or a Render's ``spec`` field)."""
    csi: str | None = None
    """The node agent's CSI volume attribute for this key (``None``: not taken by a volume)."""
    setting: str | None = None
    """The ``StoreSpec.extra`` key this row fills as text: a store's declared setting input,
    on the book's rows (``ref``, ``api-url``, ``namespace``) and on the rows
    :func:`store_input_rows` makes for a tenth store's (``token_header``)."""

    @property
    def annotation(self) -> str:
        return PREFIX + self.name

    @property
    def scope(self) -> Scope:
        """Once per pod, once per render, or per render and resolved against the store tier."""
        if self.store_shaped:
            return "store"
        return "render" if self.per_render else "pod"

    @property
    def bare(self) -> bool:
        """Whether the agent flag(s) of this key take no value."""
        return self.flag_kind != "value"

    def args(self, value: object) -> list[str]:
        """The agent arguments this key's resolved ``value`` becomes (``None``: none).

        Flag-shaped values are formatted here (a file mode as octal); a key whose flag names a
        mounted file is handed the path the patch mounts it at.
        """
        if not self.flags:
            return []
        flag = self.flags[0]
        if self.flag_kind == "bare":
            return [flag] if value else []
        if self.flag_kind == "negated":
            return [] if value is None or value else [flag]
        if value is None:
            return []
        if self.rule is parse_file_mode and isinstance(value, int):
            return [flag, f"0{value:o}"]
        return [flag, str(value)]


def _k(name: str, per_render: bool, form: str, default: str, summary: str, **kw: object) -> Key:
    return Key(name, per_render, form, default, summary, **kw)  # type: ignore[arg-type]


_ENV = "DYNAMIC_CONFIG_AGENT_"
REVOKE_GRACE: Final = "5s"
"""How long the agent may spend revoking its lease on the way out, when no flag says."""

BOOK_KEYS: Final[tuple[Key, ...]] = (
    _k(
        "inject",
        False,
        '"true" or "false"',
        "absent: the pod is left alone",
        "The master switch: only a pod that says true is injected.",
        rule=parse_bool,
    ),
    _k(
        "source",
        True,
        "one of the nine stores",
        "the fleet source, else required",
        "Which store the document comes from.",
        fleet_env=_ENV + "SOURCE",
        document_key="source",
        flags=("--source",),
        rule=parse_source,
        spec_field="source",
        csi="source",
    ),
    _k(
        "endpoint",
        True,
        "the store's address",
        "the store's tier, else required",
        "Where the store answers; exclusive with endpoint-secret.",
        store_knob=True,
        store_shaped=True,
        flags=("--endpoint",),
        spec_field="endpoint",
        store_input="endpoint",
        csi="endpoint",
    ),
    _k(
        "endpoint-secret",
        True,
        "<secret-name>/<key>",
        "the store's tier",
        "The address read from a Secret, for addresses that carry a password.",
        store_knob=True,
        store_shaped=True,
        rule=parse_secret_ref,
    ),
    _k(
        "key",
        True,
        "the store's document key",
        "the store's tier, else required",
        "Which document to read.",
        store_knob=True,
        store_shaped=True,
        flags=("--key",),
        spec_field="key",
        store_input="key",
        csi="key",
    ),
    _k(
        "path",
        True,
        "an absolute file path",
        "the fleet or store tier, else required",
        "Where the rendered file lands; its directory is the shared mount.",
        fleet_env=_ENV + "PATH",
        document_key="path",
        store_knob=True,
        flags=("--out",),
        rule=parse_file_path,
        csi="path",
    ),
    _k(
        "mode",
        False,
        "init, sidecar or both",
        "sidecar",
        "Render once before the app, keep watching beside it, or both.",
        fleet_env=_ENV + "MODE",
        document_key="mode",
        store_knob=True,
        rule=parse_mode,
        value="sidecar",
        target="mode",
    ),
    _k(
        "watch-seconds",
        True,
        "whole seconds",
        "15",
        "How often the agent resyncs or polls.",
        fleet_env=_ENV + "WATCH_SECONDS",
        document_key="watchSeconds",
        store_knob=True,
        flags=("--watch",),
        rule=parse_whole_seconds,
        value=15,
        target="watch_seconds",
        spec_field="intervalSeconds",
        csi="watch-seconds",
    ),
    _k(
        "timeout",
        True,
        "whole seconds above zero",
        "the store's own",
        "A deadline for each fetch of the watching agent.",
        flags=("--timeout",),
        rule=parse_positive_seconds,
        target="timeout",
        store_input="timeout",
    ),
    _k(
        "store-budget",
        True,
        "RATE or RATE/BURST requests per second, or off",
        "the store's tier, else off (unlimited)",
        "A ceiling on the agent's calls to its store; past it reads wait (ours, not the book's).",
        store_knob=True,
        store_shaped=True,
        flags=("--store-budget",),
        rule=parse_store_budget,
        target="store_budget",
    ),
    _k(
        "agent-image",
        False,
        "an image reference",
        "the installation's image",
        "Another agent image, admitted only by an installation prefix.",
    ),
    _k(
        "section",
        True,
        "a section key",
        "the whole document",
        "Render one section of the document.",
        store_knob=True,
        store_shaped=True,
        flags=("--section",),
        target="section",
        store_input="section",
        csi="section",
    ),
    _k(
        "auth",
        True,
        "a store auth method",
        "the store's default",
        "How the agent authenticates to the store.",
        store_knob=True,
        store_shaped=True,
        flags=("--auth",),
        target="auth",
        store_field="auth",
        csi="auth",
    ),
    _k(
        "auth-mount",
        True,
        "a string",
        "none",
        "The auth method's mount.",
        store_knob=True,
        store_shaped=True,
        flags=("--auth-mount",),
        target="auth_mount",
        store_field="auth_mount",
        csi="auth-mount",
    ),
    _k(
        "auth-role",
        True,
        "a string",
        "none",
        "The role to log in as.",
        store_knob=True,
        store_shaped=True,
        flags=("--auth-role",),
        target="auth_role",
        store_field="auth_role",
        csi="auth-role",
    ),
    _k(
        "auth-username",
        True,
        "a string",
        "none",
        "The user to log in as.",
        store_knob=True,
        store_shaped=True,
        flags=("--auth-username",),
        target="auth_username",
        store_field="auth_username",
        csi="auth-username",
    ),
    _k(
        "auth-token-path",
        True,
        "a file path",
        "none",
        "A token file the agent re-reads.",
        store_knob=True,
        store_shaped=True,
        flags=("--auth-token-path",),
        target="auth_token_path",
        store_field="auth_token_path",
    ),
    _k(
        "namespace",
        True,
        "a Vault namespace",
        "none",
        "Vault Enterprise namespace.",
        store_knob=True,
        store_shaped=True,
        flags=("--namespace",),
        setting="namespace",
        csi="namespace",
    ),
    _k(
        "ref",
        True,
        "branch:x, tag:x, commit:sha or a branch",
        "main",
        "Which git ref to read.",
        store_knob=True,
        store_shaped=True,
        flags=("--ref",),
        setting="ref",
        csi="ref",
    ),
    _k(
        "api-url",
        True,
        "a URL",
        "the platform's",
        "Another API address (firestore, s3).",
        store_knob=True,
        store_shaped=True,
        flags=("--api-url",),
        setting="api_url",
        csi="api-url",
    ),
    _k(
        "token-secret",
        True,
        "<secret-name>/<key>",
        "the store's tier",
        "A bearer token, as a Secret-backed variable.",
        store_knob=True,
        store_shaped=True,
        rule=parse_secret_ref,
        target="token_secret",
        spec_field="tokenSecret",
        store_input="token",
        csi="token-secret",
    ),
    _k(
        "password-secret",
        True,
        "<secret-name>/<key>",
        "the store's tier",
        "A password, as a Secret-backed variable.",
        store_knob=True,
        store_shaped=True,
        rule=parse_secret_ref,
        target="password_secret",
        store_input="password",
    ),
    _k(
        "ca-configmap",
        True,
        "name or name/key (key ca.crt)",
        "the store's tier",
        "A private CA, mounted into the agent only.",
        store_knob=True,
        store_shaped=True,
        flag_carries="path",
        flags=("--ca",),
        rule=parse_configmap_ref("ca.crt"),
        target="ca",
        store_input="tls.ca_file",
    ),
    _k(
        "tls-secret",
        True,
        "a kubernetes.io/tls Secret name",
        "the store's tier",
        "A client certificate and key, mounted into the agent only.",
        store_knob=True,
        store_shaped=True,
        flag_carries="path",
        flags=(
            "--tls-cert",
            "--tls-key",
        ),
        target="tls_secret",
        store_input="tls.cert_file",
    ),
    _k(
        "ssh-secret",
        True,
        "name or name/key (key ssh-privatekey)",
        "the store's tier",
        "A git deploy key, mounted owner-only into the agent.",
        store_knob=True,
        store_shaped=True,
        flag_carries="path",
        flags=("--ssh-key",),
        rule=parse_configmap_ref("ssh-privatekey"),
        store_input="ssh_key",
    ),
    _k(
        "volume-medium",
        False,
        "memory or disk",
        "memory",
        "Where the shared volume lives.",
        fleet_env=_ENV + "VOLUME_MEDIUM",
        document_key="volumeMedium",
        store_knob=True,
        rule=parse_volume_medium,
        value="memory",
        target="volume_medium",
    ),
    _k(
        "native-sidecar",
        False,
        '"true" or "false"',
        "false",
        "Run the watcher as an init container with restartPolicy Always.",
        fleet_env=_ENV + "NATIVE_SIDECAR",
        document_key="nativeSidecar",
        store_knob=True,
        rule=parse_bool,
        value=False,
        target="native_sidecar",
    ),
    _k(
        "agent-cpu-request",
        False,
        "a quantity",
        "10m",
        "The agent's CPU request.",
        fleet_env=_ENV + "CPU_REQUEST",
        document_key="cpuRequest",
        store_knob=True,
        rule=parse_quantity,
        value="10m",
    ),
    _k(
        "agent-memory-request",
        False,
        "a quantity",
        "32Mi",
        "The agent's memory request.",
        fleet_env=_ENV + "MEMORY_REQUEST",
        document_key="memoryRequest",
        store_knob=True,
        rule=parse_quantity,
        value="32Mi",
    ),
    _k(
        "agent-cpu-limit",
        False,
        "a quantity",
        "none",
        "The agent's CPU limit.",
        fleet_env=_ENV + "CPU_LIMIT",
        document_key="cpuLimit",
        store_knob=True,
        rule=parse_quantity,
    ),
    _k(
        "agent-memory-limit",
        False,
        "a quantity",
        "64Mi",
        "The agent's memory limit.",
        fleet_env=_ENV + "MEMORY_LIMIT",
        document_key="memoryLimit",
        store_knob=True,
        rule=parse_quantity,
        value="64Mi",
    ),
    _k(
        "agent-ephemeral-request",
        False,
        "a quantity",
        "none",
        "The agent's ephemeral-storage request.",
        rule=parse_quantity,
    ),
    _k(
        "agent-ephemeral-limit",
        False,
        "a quantity",
        "none",
        "The agent's ephemeral-storage limit.",
        rule=parse_quantity,
    ),
    _k(
        "file-mode",
        True,
        "octal 0400-0777",
        "the agent's umask",
        "The rendered file's permissions.",
        fleet_env=_ENV + "FILE_MODE",
        document_key="fileMode",
        store_knob=True,
        flags=("--file-mode",),
        rule=parse_file_mode,
        target="file_mode",
        csi="file-mode",
    ),
    _k(
        "agent-run-as-user",
        False,
        "a non-zero uid",
        "65532",
        "The agent's uid.",
        fleet_env=_ENV + "RUN_AS_USER",
        document_key="runAsUser",
        store_knob=True,
        rule=parse_uid,
        value=65532,
        target="run_as_user",
    ),
    _k(
        "agent-run-as-group",
        False,
        "a non-zero gid",
        "65532",
        "The agent's gid.",
        fleet_env=_ENV + "RUN_AS_GROUP",
        document_key="runAsGroup",
        store_knob=True,
        rule=parse_uid,
        value=65532,
        target="run_as_group",
    ),
    _k(
        "agent-run-as-same-user",
        False,
        '"true" or "false"',
        "false",
        "Run the agent as the application's uid.",
        rule=parse_bool,
        value=False,
    ),
    _k(
        "env-inject",
        False,
        "a container name",
        "none",
        "Source the rendered file as that container's environment.",
        rule=verbatim,
    ),
    _k(
        "env-restart",
        False,
        '"true" or "false"',
        "false",
        "Restart the env-injected container when the file changes.",
        rule=parse_bool,
        value=False,
        target="env_restart",
    ),
    _k(
        "restart-on-change",
        False,
        '"true" or "false"',
        "absent: the workload is never rolled",
        "On a Deployment, StatefulSet or DaemonSet: the operator rolls it when a target it "
        "consumes changes.",
    ),
    _k(
        "rendered-fingerprint",
        False,
        "32 hex digits",
        "written by the operator",
        "On a pod template: the rendered targets its pods were rolled for; the operator's to "
        "write.",
    ),
    _k(
        "metrics-port",
        True,
        "a port, 0 opts out",
        "the fleet's",
        "The watching agent's metrics and probe port.",
        fleet_env=_ENV + "METRICS_PORT",
        document_key="metricsPort",
        store_knob=True,
        flags=("--metrics-addr",),
        flag_carries="address",
        rule=parse_port,
    ),
    _k(
        "readiness",
        False,
        '"true" or "false"',
        "true",
        "Probe the watching agent's /readyz.",
        rule=parse_bool,
        value=True,
        target="readiness",
    ),
    _k(
        "inject-containers",
        False,
        "a comma list of container names",
        "every container",
        "Which containers see the rendered document.",
        rule=verbatim,
    ),
    _k(
        "revoke-grace",
        False,
        "seconds or a duration",
        REVOKE_GRACE,
        "How long the agent may spend revoking its lease on the way out.",
        flags=("--revoke-grace",),
        rule=parse_duration_seconds,
        absent=REVOKE_GRACE,
    ),
    _k(
        "init-first",
        False,
        '"true" or "false"',
        "false",
        "Put the init agent before the pod's own init containers.",
        rule=parse_bool,
        value=False,
        target="init_first",
    ),
    _k(
        "notify-http",
        False,
        "http://localhost:port/path",
        "none",
        "A loopback URL the agent POSTs after each publish.",
        flags=("--notify-http",),
        rule=verbatim,
    ),
    _k(
        "on-drift",
        False,
        "warn, repair or fail",
        ON_DRIFT[0],
        "What the agent does when something else rewrote the file.",
        flags=("--on-drift",),
        rule=one_of(*ON_DRIFT),
        absent=ON_DRIFT[0],
        target="on_drift",
    ),
    _k(
        "tls-reload",
        True,
        '"true" or "false"',
        "true",
        "Rebuild the store client when mounted trust material changes.",
        flags=("--no-tls-reload",),
        rule=parse_bool,
        value=True,
        target="tls_reload",
        flag_kind="negated",
    ),
    _k(
        "history",
        False,
        "1 to 10",
        "off",
        "Keep replaced generations beside the file.",
        flags=("--history",),
        rule=parse_history,
        target="history",
    ),
    _k(
        "require-ack",
        False,
        '"true" or "false"',
        "false",
        "Readiness waits for the application's acknowledgement.",
        flags=("--require-ack",),
        rule=parse_bool,
        value=False,
        target="require_ack",
        flag_kind="bare",
    ),
    _k(
        "events",
        False,
        '"true" or "false"',
        "false",
        "Write Warning Events on the pod for failed renders.",
        flags=("--events",),
        rule=parse_bool,
        value=False,
        target="events",
        flag_kind="bare",
    ),
    _k(
        "class",
        False,
        "a class name",
        "none",
        "Name a DynamicConfigClass for source, endpoint and credential.",
        rule=verbatim,
    ),
    _k(
        "canary-configmap",
        False,
        "name or name/key (key percent)",
        "none",
        "A percentage that holds new documents for part of the fleet.",
        flag_carries="path",
        flags=("--canary",),
        rule=parse_configmap_ref("percent"),
    ),
    _k(
        "extra-secret",
        False,
        "a Secret name",
        "none",
        "A Secret mounted read-only into the agent only.",
        rule=verbatim,
        target="extra_secret",
    ),
    _k(
        "tls-server-name",
        True,
        "a host name",
        "the endpoint's host",
        "The name the store's certificate is checked against.",
        flags=("--tls-server-name",),
        rule=verbatim,
        target="tls_server_name",
        store_input="tls.server_name",
    ),
    _k(
        "tls-skip-verify",
        True,
        '"true" or "false"',
        "false",
        "Do not authenticate the store; installation opt-in only.",
        flags=("--tls-skip-verify",),
        rule=parse_bool,
        value=False,
        target="tls_skip_verify",
        store_input="tls.skip_verify",
        flag_kind="bare",
    ),
    _k(
        "schema-configmap",
        False,
        "name or name/key (key schema.json)",
        "none",
        "A JSON Schema the document must satisfy before publish.",
        flag_carries="path",
        flags=("--schema",),
        rule=parse_configmap_ref("schema.json"),
        target="schema",
    ),
    _k(
        "startup-policy",
        False,
        "allow-cached, require-fresh or best-effort",
        STARTUP_POLICIES[0],
        "What the agent does when the first fetch fails.",
        flags=("--startup-policy",),
        rule=one_of(*STARTUP_POLICIES),
        absent=STARTUP_POLICIES[0],
        target="startup_policy",
    ),
    _k(
        "on-delete",
        False,
        "retain, remove or fail",
        ON_DELETE[0],
        "What the agent does when the document disappears.",
        flags=("--on-delete",),
        rule=one_of(*ON_DELETE),
        absent=ON_DELETE[0],
        target="on_delete",
    ),
    _k(
        "max-document-bytes",
        False,
        "whole bytes",
        str(DEFAULT_MAX_DOCUMENT_BYTES),
        "The largest document the agent accepts.",
        flags=("--max-document-bytes",),
        rule=parse_positive_bytes,
        absent=str(DEFAULT_MAX_DOCUMENT_BYTES),
        target="max_document_bytes",
    ),
    _k(
        "max-staleness",
        False,
        "seconds or a duration",
        "none",
        "Readiness fails past this long without a fresh read.",
        flags=("--max-staleness",),
        rule=parse_duration_seconds,
        target="max_staleness",
    ),
    _k(
        "meta",
        False,
        '"true" or "false"',
        "false",
        "Write a sibling meta file with the fingerprint.",
        flags=("--meta",),
        rule=parse_bool,
        value=False,
        target="meta",
        flag_kind="bare",
    ),
    _k(
        "dynamic",
        False,
        '"true" or "false"',
        "false",
        "Treat the document as a Vault dynamic secret with a lease.",
        flags=("--dynamic",),
        rule=parse_bool,
        value=False,
        target="dynamic",
        store_input="dynamic",
        flag_kind="bare",
    ),
    _k(
        "revoke-on-shutdown",
        False,
        '"true" or "false"',
        "true",
        "Revoke the lease when the agent stops.",
        flags=("--no-revoke-on-shutdown",),
        rule=parse_bool,
        value=True,
        target="revoke_on_shutdown",
        flag_kind="negated",
    ),
    _k(
        "aws-secret",
        False,
        "a Secret name",
        "the store's tier",
        "Static AWS keys for s3, as Secret-backed variables.",
        store_knob=True,
        store_shaped=True,
    ),
    _k(
        "agent-env",
        False,
        "NAME=value, ...",
        "none",
        "Environment on the agent, through the installation's allowlist.",
        rule=parse_agent_env,
    ),
    _k(
        "template",
        True,
        "inline template text",
        "the store's tier",
        "An inline template; exclusive with template-configmap.",
        store_knob=True,
        store_shaped=True,
        flags=("--template-inline",),
    ),
    _k(
        "template-configmap",
        True,
        "name or name/key (key template)",
        "the store's tier",
        "A template from a ConfigMap; exclusive with template.",
        store_knob=True,
        store_shaped=True,
        flag_carries="path",
        flags=("--template",),
        rule=parse_configmap_ref("template"),
    ),
    _k(
        "status",
        False,
        "injected",
        "written by the webhook",
        "The idempotence mark; never a pod's to set.",
        rule=verbatim,
    ),
)

log = logging.getLogger("dynconf.plugins")

_KIND_FORMS: Final = {
    "text": "a string",
    "url": "a URL",
    "path": "an absolute file path in the agent's container",
    "switch": '"true" or "false"',
}


def store_input_rows(stores: Iterable[StoreType], taken: Collection[Key]) -> tuple[Key, ...]:
    """A row for each setting input the loaded stores declare (``token_header``).

    The row is spelled from the input alone: annotation and volume attribute
    ``token-header``, agent flag ``--token-header``, the per-store tier's knob, and
    ``StoreSpec.extra["token_header"]`` at the end, so a tenth store's input is taken by the
    agent, the webhook and the node agent with no edit here. An input that would shadow a
    book key or flag, that is secret (settings travel as arguments), or whose kind one
    argument cannot carry is left out, with one warning naming the store and the input.
    """
    from dynconf.stores import SETTING_KINDS, setting_inputs

    names = {row.name for row in taken} | {ALSO, ALSO_SECTION}
    covered = {row.setting or row.store_input or row.store_field for row in taken}
    """Inputs a book row already carries (git's ``ref``, ``ssh_key`` through ``ssh-secret``)."""
    flags = {flag for row in taken for flag in row.flags} | {"--also", "--one-shot"}
    rows: dict[str, Key] = {}
    for store in sorted(stores, key=lambda store: store.name):
        for declared in setting_inputs(store):
            name = declared.name.replace("_", "-")
            if name in rows or declared.name in covered:
                continue
            why = (
                "it shadows a contract key or flag" if name in names or f"--{name}" in flags
                else "a setting input cannot be secret" if declared.secret
                else f"its kind {declared.kind} is not one of {', '.join(SETTING_KINDS)}"
                if declared.kind not in SETTING_KINDS
                else None
            )  # fmt: skip
            if why is not None:
                log.warning(
                    "store_input_ignored",
                    extra={"store": store.name, "input": declared.name, "reason": why},
                )
                continue
            switch = declared.kind == "switch"
            rows[name] = _k(
                name,
                True,
                _KIND_FORMS[declared.kind],
                "the store's own",
                declared.summary or f"An input of the {store.name} store.",
                store_knob=True,
                store_shaped=True,
                flags=(f"--{name}",),
                flag_kind="bare" if switch else "value",
                rule=parse_bool if switch else nonempty,
                setting=declared.name,
                csi=name,
            )
    return tuple(rows.values())


KEYS: Final[tuple[Key, ...]] = BOOK_KEYS + store_input_rows(loaded_stores(), BOOK_KEYS)
"""The book's rows, then one per setting input the loaded stores declare."""

REGISTRY: Final[Mapping[str, Key]] = {row.name: row for row in KEYS}

FLEET_KNOBS: Final[Mapping[str, Key]] = {row.name: row for row in KEYS if row.fleet_env}
"""Keys the fleet tier defaults, by annotation name."""

STORE_KNOBS: Final[tuple[str, ...]] = tuple(
    row.name for row in KEYS if row.store_knob and row.name != "source"
)
"""Knobs a per-store group may set (plus ``overridable``), in table order."""


INPUT_KEYS: Final[Mapping[str, str]] = {
    **{row.store_field or row.store_input or row.setting or "": row.name for row in KEYS
       if row.store_field or row.store_input or row.setting},
    "tls.key_file": "tls-secret",
}  # fmt: skip
"""The key that sets each store input (a StoreSpec field) — how admission names the field of a
store's :class:`dynconf.errors.Refusal`."""


def input_key(field: str) -> str:
    """The annotation base name of a store input: its row's, else the input's own name in the
    annotations' spelling (an input a store declares that no row lists yet)."""
    return INPUT_KEYS.get(field) or field.replace("_", "-")


FLAG_KEYS: Final[Mapping[str, str]] = {
    **{flag: row.name for row in KEYS for flag in row.flags},
    "--also": ALSO,
}
"""The annotation each agent flag the webhook writes comes from: when the agent's own parser
refuses an argument at admission, the refusal names the annotation the pod wrote."""


def annotation(name: str, suffix: str | None = None) -> str:
    """The full annotation key for a base name and an optional render suffix."""
    return PREFIX + name + (f".{suffix}" if suffix else "")


def split_key(full: str) -> tuple[str, str | None] | None:
    """``(base, suffix)`` of a prefixed key the contract accepts, else ``None``.

    A suffix is accepted on per-render rows and on ``also`` / ``also-section``; the suffix
    grammar is 1-32 of ``[a-z0-9-]``.
    """
    rest = full[len(PREFIX) :]
    if rest in REGISTRY:
        return rest, None
    base, dot, suffix = rest.partition(".")
    if not dot or not SUFFIX.fullmatch(suffix):
        return None
    if base in (ALSO, ALSO_SECTION):
        return base, suffix
    row = REGISTRY.get(base)
    if row is None or not row.per_render:
        return None
    return base, suffix
