"""The annotation contract as one table.

Each ``dynamic-config.rs/*`` key is one :class:`Key` row: whether it takes a ``.name``
suffix, what its value looks like, its default, the installation knob that can default it
(fleet variable, installation-document key, or a per-store knob), and retirement metadata.
Parsing (which keys exist, which take suffixes), defaulting (which tier may answer),
warnings (retired keys), the documentation page and its test all read this table; nothing
else lists keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ALSO",
    "ALSO_SECTION",
    "FLAG_KEYS",
    "FLEET_KNOBS",
    "KEYS",
    "PREFIX",
    "REGISTRY",
    "STORE_KNOBS",
    "SUFFIX",
    "Key",
    "annotation",
    "split_key",
]

PREFIX: Final = "dynamic-config.rs/"
SUFFIX: Final = re.compile(r"[a-z0-9-]{1,32}")
ALSO: Final = "also"
ALSO_SECTION: Final = "also-section"


@dataclass(frozen=True, slots=True)
class Key:
    """One row of the contract.

    ``fleet_env`` / ``document_key`` name the fleet tier's spellings when the installation
    may default this key for every pod; ``store_knob`` marks keys a per-store group may
    default; ``deprecated_since`` / ``replacement`` retire a key with a warning instead of a
    refusal.
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

    @property
    def annotation(self) -> str:
        return PREFIX + self.name


def _k(name: str, per_render: bool, form: str, default: str, summary: str, **kw: object) -> Key:
    return Key(name, per_render, form, default, summary, **kw)  # type: ignore[arg-type]


_ENV = "DYNAMIC_CONFIG_AGENT_"

KEYS: Final[tuple[Key, ...]] = (
    _k(
        "inject",
        False,
        '"true" or "false"',
        "absent: the pod is left alone",
        "The master switch: only a pod that says true is injected.",
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
    ),
    _k(
        "endpoint-secret",
        True,
        "<secret-name>/<key>",
        "the store's tier",
        "The address read from a Secret, for addresses that carry a password.",
        store_knob=True,
        store_shaped=True,
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
    ),
    _k(
        "timeout",
        True,
        "whole seconds above zero",
        "the store's own",
        "A deadline for each fetch of the watching agent.",
        flags=("--timeout",),
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
    ),
    _k(
        "token-secret",
        True,
        "<secret-name>/<key>",
        "the store's tier",
        "A bearer token, as a Secret-backed variable.",
        store_knob=True,
        store_shaped=True,
    ),
    _k(
        "password-secret",
        True,
        "<secret-name>/<key>",
        "the store's tier",
        "A password, as a Secret-backed variable.",
        store_knob=True,
        store_shaped=True,
    ),
    _k(
        "ca-configmap",
        True,
        "name or name/key (key ca.crt)",
        "the store's tier",
        "A private CA, mounted into the agent only.",
        store_knob=True,
        store_shaped=True,
        flags=("--ca",),
    ),
    _k(
        "tls-secret",
        True,
        "a kubernetes.io/tls Secret name",
        "the store's tier",
        "A client certificate and key, mounted into the agent only.",
        store_knob=True,
        store_shaped=True,
        flags=(
            "--tls-cert",
            "--tls-key",
        ),
    ),
    _k(
        "ssh-secret",
        True,
        "name or name/key (key ssh-privatekey)",
        "the store's tier",
        "A git deploy key, mounted owner-only into the agent.",
        store_knob=True,
        store_shaped=True,
        flags=("--ssh-key",),
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
    ),
    _k(
        "agent-ephemeral-request",
        False,
        "a quantity",
        "none",
        "The agent's ephemeral-storage request.",
    ),
    _k(
        "agent-ephemeral-limit", False, "a quantity", "none", "The agent's ephemeral-storage limit."
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
    ),
    _k(
        "agent-run-as-same-user",
        False,
        '"true" or "false"',
        "false",
        "Run the agent as the application's uid.",
    ),
    _k(
        "env-inject",
        False,
        "a container name",
        "none",
        "Source the rendered file as that container's environment.",
    ),
    _k(
        "env-restart",
        False,
        '"true" or "false"',
        "false",
        "Restart the env-injected container when the file changes.",
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
    ),
    _k("readiness", False, '"true" or "false"', "true", "Probe the watching agent's /readyz."),
    _k(
        "inject-containers",
        False,
        "a comma list of container names",
        "every container",
        "Which containers see the rendered document.",
    ),
    _k(
        "revoke-grace",
        False,
        "seconds or a duration",
        "5s",
        "How long the agent may spend revoking its lease on the way out.",
        flags=("--revoke-grace",),
    ),
    _k(
        "init-first",
        False,
        '"true" or "false"',
        "false",
        "Put the init agent before the pod's own init containers.",
    ),
    _k(
        "notify-http",
        False,
        "http://localhost:port/path",
        "none",
        "A loopback URL the agent POSTs after each publish.",
        flags=("--notify-http",),
    ),
    _k(
        "on-drift",
        False,
        "warn, repair or fail",
        "warn",
        "What the agent does when something else rewrote the file.",
        flags=("--on-drift",),
    ),
    _k(
        "tls-reload",
        True,
        '"true" or "false"',
        "true",
        "Rebuild the store client when mounted trust material changes.",
        flags=("--no-tls-reload",),
    ),
    _k(
        "history",
        False,
        "1 to 10",
        "off",
        "Keep replaced generations beside the file.",
        flags=("--history",),
    ),
    _k(
        "require-ack",
        False,
        '"true" or "false"',
        "false",
        "Readiness waits for the application's acknowledgement.",
        flags=("--require-ack",),
    ),
    _k(
        "events",
        False,
        '"true" or "false"',
        "false",
        "Write Warning Events on the pod for failed renders.",
        flags=("--events",),
    ),
    _k(
        "class",
        False,
        "a class name",
        "none",
        "Name a DynamicConfigClass for source, endpoint and credential.",
    ),
    _k(
        "canary-configmap",
        False,
        "name or name/key (key percent)",
        "none",
        "A percentage that holds new documents for part of the fleet.",
        flags=("--canary",),
    ),
    _k(
        "extra-secret",
        False,
        "a Secret name",
        "none",
        "A Secret mounted read-only into the agent only.",
    ),
    _k(
        "tls-server-name",
        True,
        "a host name",
        "the endpoint's host",
        "The name the store's certificate is checked against.",
        flags=("--tls-server-name",),
    ),
    _k(
        "tls-skip-verify",
        True,
        '"true" or "false"',
        "false",
        "Do not authenticate the store; installation opt-in only.",
        flags=("--tls-skip-verify",),
    ),
    _k(
        "schema-configmap",
        False,
        "name or name/key (key schema.json)",
        "none",
        "A JSON Schema the document must satisfy before publish.",
        flags=("--schema",),
    ),
    _k(
        "startup-policy",
        False,
        "allow-cached, require-fresh or best-effort",
        "allow-cached",
        "What the agent does when the first fetch fails.",
        flags=("--startup-policy",),
    ),
    _k(
        "on-delete",
        False,
        "retain, remove or fail",
        "retain",
        "What the agent does when the document disappears.",
        flags=("--on-delete",),
    ),
    _k(
        "max-document-bytes",
        False,
        "whole bytes",
        "8388608",
        "The largest document the agent accepts.",
        flags=("--max-document-bytes",),
    ),
    _k(
        "max-staleness",
        False,
        "seconds or a duration",
        "none",
        "Readiness fails past this long without a fresh read.",
        flags=("--max-staleness",),
    ),
    _k(
        "meta",
        False,
        '"true" or "false"',
        "false",
        "Write a sibling meta file with the fingerprint.",
        flags=("--meta",),
    ),
    _k(
        "dynamic",
        False,
        '"true" or "false"',
        "false",
        "Treat the document as a Vault dynamic secret with a lease.",
        flags=("--dynamic",),
    ),
    _k(
        "revoke-on-shutdown",
        False,
        '"true" or "false"',
        "true",
        "Revoke the lease when the agent stops.",
        flags=("--no-revoke-on-shutdown",),
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
        flags=("--template",),
    ),
    _k(
        "status",
        False,
        "injected",
        "written by the webhook",
        "The idempotence mark; never a pod's to set.",
    ),
)

REGISTRY: Final[Mapping[str, Key]] = {row.name: row for row in KEYS}

FLEET_KNOBS: Final[Mapping[str, Key]] = {row.name: row for row in KEYS if row.fleet_env}
"""Keys the fleet tier defaults, by annotation name."""

STORE_KNOBS: Final[tuple[str, ...]] = tuple(
    row.name for row in KEYS if row.store_knob and row.name != "source"
)
"""Knobs a per-store group may set (plus ``overridable``), in table order."""


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
