"""The installation: fleet and per-store defaults, pins, gates and opt-ins, from strings.

An installation arrives as environment variables (``DYNAMIC_CONFIG_AGENT_*``,
``DYNAMIC_CONFIG_WEBHOOK_*``) and optionally as a mounted YAML document, which
:mod:`dynconf_k8s.contract.document` renders into the very same variables first; a
variable set on the container wins over the document. Everything is validated here, once,
at start: :func:`parse_installation` raises :class:`InstallationError` with every problem,
so a typo stops the process instead of the first admission.

Tiers: annotation > per-store default (the render's store) > fleet default > built-in. Any
installation value may be pinned: its own trailing ``!`` (pinned) or ``?`` (open), else its
store group's ``overridable=``, else ``DYNAMIC_CONFIG_AGENT_DEFAULTS_OVERRIDABLE``. A pin
refuses a *differing* annotation; it never applies to a knob the installation did not set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from dynconf_k8s.contract.gates import Gate, parse_gate
from dynconf_k8s.contract.knobs import check_installation_value
from dynconf_k8s.contract.registry import FLEET_KNOBS, STORE_KNOBS
from dynconf_k8s.contract.rules import STORES, RuleError, parse_agent_env, parse_bool

__all__ = [
    "BUILTIN_IMAGE",
    "ENV",
    "SERVER_VARIABLES",
    "Installation",
    "InstallationError",
    "TierValue",
    "parse_installation",
    "split_marker",
]

BUILTIN_IMAGE: Final = "ghcr.io/dynconf/dynconf-agent:v0.3.0"
"""The agent image when ``DYNAMIC_CONFIG_AGENT_IMAGE`` is unset. Images are tagged
``v<appVersion>`` of the chart (not the Python distribution's version), so the tag follows
``charts/dynamic-config/Chart.yaml``; a chart test holds the two equal."""


class ENV:
    """The installation's variable names, declared once."""

    IMAGE: Final = "DYNAMIC_CONFIG_AGENT_IMAGE"
    PULL_SECRET: Final = "DYNAMIC_CONFIG_AGENT_PULL_SECRET"  # noqa: S105 - a variable name
    AGENT_ENV: Final = "DYNAMIC_CONFIG_AGENT_ENV"
    OVERRIDABLE: Final = "DYNAMIC_CONFIG_AGENT_DEFAULTS_OVERRIDABLE"
    STORE_DEFAULTS: Final = "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS"
    AGENT_ENV_ALLOW: Final = "DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW"
    SOURCE_ALLOW: Final = "DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW"
    SOURCE_DENY: Final = "DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY"
    AGENT_IMAGE_ALLOW: Final = "DYNAMIC_CONFIG_WEBHOOK_AGENT_IMAGE_ALLOW"
    ALLOW_EVENTS: Final = "DYNAMIC_CONFIG_WEBHOOK_ALLOW_EVENTS"
    ALLOW_TLS_SKIP_VERIFY: Final = "DYNAMIC_CONFIG_WEBHOOK_ALLOW_TLS_SKIP_VERIFY"
    CLASSES: Final = "DYNAMIC_CONFIG_WEBHOOK_CLASSES"
    DEFAULTS_FILE: Final = "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"


SERVER_VARIABLES: Final = tuple(
    "DYNAMIC_CONFIG_WEBHOOK_" + name
    for name in (
        "ADDR", "METRICS_ADDR", "TLS_CERT", "TLS_KEY", "PLAINTEXT", "SELF_ROTATE", "NAMESPACE",
        "SERVICE", "TLS_SECRET", "MWC", "VALIDITY_SECONDS", "EXPLAIN", "RELOAD_SECONDS",
        "INSTALLATION", "SHUTDOWN_DELAY_SECONDS",
    )
)  # fmt: skip
"""Variables the server reads (:mod:`dynconf_k8s.webhook.settings`); known, not judged here."""

_INSTALLATION_VARIABLES: Final = (
    ENV.IMAGE, ENV.PULL_SECRET, ENV.AGENT_ENV, ENV.OVERRIDABLE, ENV.STORE_DEFAULTS,
    ENV.AGENT_ENV_ALLOW, ENV.SOURCE_ALLOW, ENV.SOURCE_DENY, ENV.AGENT_IMAGE_ALLOW,
    ENV.ALLOW_EVENTS, ENV.ALLOW_TLS_SKIP_VERIFY, ENV.CLASSES, ENV.DEFAULTS_FILE,
    *(row.fleet_env for row in FLEET_KNOBS.values() if row.fleet_env),
)  # fmt: skip
KNOWN_VARIABLES: Final = frozenset(_INSTALLATION_VARIABLES + SERVER_VARIABLES)
_AGENT_RUNTIME: Final = frozenset({"DYNAMIC_CONFIG_AGENT_TOKEN", "DYNAMIC_CONFIG_AGENT_PASSWORD"})
"""The agent's own variables; a webhook that carries them is not misconfigured by them."""


class InstallationError(ValueError):
    """The installation cannot be served; ``problems`` lists every one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("the installation is not valid:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class TierValue:
    """One installation value: its text (marker removed), whether it is pinned, its tier."""

    text: str
    pinned: bool
    tier: str


@dataclass(frozen=True)
class Installation:
    """Everything the webhook knows about the cluster it serves, validated."""

    image: str = BUILTIN_IMAGE
    pull_secret: str | None = None
    fleet: Mapping[str, TierValue] = field(default_factory=dict)
    fleet_env: tuple[tuple[str, str], ...] = ()
    per_store: Mapping[str, Mapping[str, TierValue]] = field(default_factory=dict)
    agent_env_allow: Gate = field(default_factory=Gate)
    source_allow: Gate = field(default_factory=Gate)
    source_deny: Gate = field(default_factory=Gate)
    agent_image_allow: tuple[str, ...] = ()
    allow_events: bool = False
    allow_tls_skip_verify: bool = False
    classes_enabled: bool = False

    def tier(self, knob: str, store: str | None) -> TierValue | None:
        """The installation's answer for ``knob`` on a render of ``store`` (store tier first)."""
        if store is not None:
            found = self.per_store.get(store, {}).get(knob)
            if found is not None:
                return found
        return self.fleet.get(knob)

    def store_tier(self, knob: str, store: str | None) -> TierValue | None:
        """Only the per-store tier (store-shaped knobs have no fleet tier)."""
        if store is None:
            return None
        return self.per_store.get(store, {}).get(knob)


def split_marker(text: str) -> tuple[str, bool | None]:
    """``(value, pinned)``: a trailing ``!`` pins, ``?`` opens, nothing leaves it to the tier."""
    stripped = text.rstrip()
    if stripped.endswith("!"):
        return stripped[:-1].rstrip(), True
    if stripped.endswith("?"):
        return stripped[:-1].rstrip(), False
    return stripped, None


def _bool_setting(env: Mapping[str, str], name: str, problems: list[str]) -> bool:
    text = env.get(name, "").strip()
    if not text:
        return False
    try:
        return parse_bool(text)
    except RuleError as exc:
        problems.append(f"{name} {exc}")
        return False


def _fleet(env: Mapping[str, str], overridable: bool, problems: list[str]) -> dict[str, TierValue]:
    fleet: dict[str, TierValue] = {}
    for knob, row in FLEET_KNOBS.items():
        assert row.fleet_env is not None
        if row.fleet_env not in env:
            continue
        text, marker = split_marker(env[row.fleet_env])
        problem = check_installation_value(knob, text)
        if problem:
            problems.append(f"{row.fleet_env} {problem}")
            continue
        pinned = (not overridable) if marker is None else marker
        fleet[knob] = TierValue(text, pinned, row.fleet_env)
    return fleet


_STORE_FORM: Final = "the form is `store: knob=value, knob=value; store: …`"


def _per_store(
    text: str, overridable: bool, problems: list[str]
) -> dict[str, dict[str, TierValue]]:
    where = ENV.STORE_DEFAULTS
    out: dict[str, dict[str, TierValue]] = {}
    # Problems name a group or an entry by its position, never by its text: the text is a
    # value (an endpoint, a Secret's name), and problems reach logs and status fields.
    for number, raw in enumerate(text.split(";"), start=1):
        if not raw.strip():
            continue
        head, colon, body = raw.partition(":")
        store = head.strip()
        if not colon or " " in store or "=" in store:
            problems.append(f"{where}: group {number} has no `store:` head; {_STORE_FORM}")
            continue
        if store not in STORES:
            problems.append(
                f"{where}: {store!r} is not a store; the stores are {', '.join(STORES)}"
            )
            continue
        if store in out:
            problems.append(f"{where}: {store} appears twice; merge its groups into one")
            continue
        pairs: list[tuple[str, str, bool | None]] = []
        group_overridable: bool | None = None
        for position, entry in enumerate(body.split(","), start=1):
            if not entry.strip():
                continue
            knob, equals, value = entry.partition("=")
            knob = knob.strip()
            if not equals:
                problems.append(f"{where}: {store}: entry {position} is not knob=value")
                continue
            value, marker = split_marker(value.strip())
            if knob == "overridable":
                try:
                    group_overridable = parse_bool(value)
                except RuleError as exc:
                    problems.append(f"{where}: {store}'s overridable {exc}")
                continue
            if knob not in STORE_KNOBS:
                problems.append(
                    f"{where}: {store}: {knob} is not a defaultable knob; the knobs are "
                    + ", ".join((*STORE_KNOBS, "overridable"))
                )
                continue
            problem = check_installation_value(knob, value)
            if problem:
                problems.append(f"{where}: {store}'s {knob} {problem}")
                continue
            pairs.append((knob, value, marker))
        rule = overridable if group_overridable is None else group_overridable
        out[store] = {
            knob: TierValue(value, (not rule) if marker is None else marker, f"perStore.{store}")
            for knob, value, marker in pairs
        }
    return out


_SERVICE_LINK: Final = re.compile(
    r"[A-Z0-9_]+(_SERVICE_HOST=[0-9a-fA-F.:]+|_SERVICE_PORT(_[A-Z0-9_]+)?=[0-9]+"
    r"|_PORT(_[0-9]+_(TCP|UDP|SCTP))?=(tcp|udp|sctp)://\S+"
    r"|_PORT_[0-9]+_(TCP|UDP|SCTP)_(PROTO=(tcp|udp|sctp)|PORT=[0-9]+|ADDR=[0-9a-fA-F.:]+))"
)
"""What the kubelet sets in every container for each Service of its namespace (unless the pod
says ``enableServiceLinks: false``): a Service named ``dynamic-config-webhook`` gives
``DYNAMIC_CONFIG_WEBHOOK_SERVICE_HOST=10.0.0.7``, ``DYNAMIC_CONFIG_WEBHOOK_PORT=tcp://…`` and
so on, which are the platform's, not a typo of ours. Matched with their value's shape, so a
misspelt setting ending in ``_PORT`` is still refused."""


def _service_link(name: str, value: str) -> bool:
    return _SERVICE_LINK.fullmatch(f"{name}={value}") is not None


def _unknown_variables(env: Mapping[str, str]) -> list[str]:
    problems = []
    for name in sorted(env):
        if not name.startswith(("DYNAMIC_CONFIG_AGENT_", "DYNAMIC_CONFIG_WEBHOOK_")):
            continue
        if name in KNOWN_VARIABLES or name in _AGENT_RUNTIME:
            continue
        if _service_link(name, env[name]):
            continue
        problems.append(
            f"{name} is not an installation setting; the ones there are: "
            + ", ".join(sorted(KNOWN_VARIABLES))
        )
    return problems


def parse_installation(env: Mapping[str, str]) -> Installation:
    """Validate and build the installation from variables (document already merged in).

    Raises :class:`InstallationError` listing every problem.
    """
    problems = _unknown_variables(env)
    overridable = True
    if ENV.OVERRIDABLE in env and env[ENV.OVERRIDABLE].strip():
        try:
            overridable = parse_bool(env[ENV.OVERRIDABLE].strip())
        except RuleError as exc:
            problems.append(f"{ENV.OVERRIDABLE} {exc}")
    fleet = _fleet(env, overridable, problems)
    per_store = _per_store(env.get(ENV.STORE_DEFAULTS, ""), overridable, problems)
    fleet_env: list[tuple[str, str]] = []
    if env.get(ENV.AGENT_ENV, "").strip():
        try:
            fleet_env = parse_agent_env(env[ENV.AGENT_ENV])
        except RuleError as exc:
            problems.append(f"{ENV.AGENT_ENV} {exc}")
    gates = {}
    for name, stores in (
        (ENV.AGENT_ENV_ALLOW, False),
        (ENV.SOURCE_ALLOW, True),
        (ENV.SOURCE_DENY, True),
    ):
        gate, gate_problems = parse_gate(env.get(name, ""), stores=stores, where=name)
        problems.extend(gate_problems)
        gates[name] = gate
    image_allow = tuple(
        p.strip() for p in env.get(ENV.AGENT_IMAGE_ALLOW, "").split(",") if p.strip()
    )
    image = env.get(ENV.IMAGE, "").strip() or BUILTIN_IMAGE
    installation = Installation(
        image=image,
        pull_secret=env.get(ENV.PULL_SECRET, "").strip() or None,
        fleet=fleet,
        fleet_env=tuple(fleet_env),
        per_store=per_store,
        agent_env_allow=gates[ENV.AGENT_ENV_ALLOW],
        source_allow=gates[ENV.SOURCE_ALLOW],
        source_deny=gates[ENV.SOURCE_DENY],
        agent_image_allow=image_allow,
        allow_events=_bool_setting(env, ENV.ALLOW_EVENTS, problems),
        allow_tls_skip_verify=_bool_setting(env, ENV.ALLOW_TLS_SKIP_VERIFY, problems),
        classes_enabled=_bool_setting(env, ENV.CLASSES, problems),
    )
    if problems:
        raise InstallationError(problems)
    return installation
