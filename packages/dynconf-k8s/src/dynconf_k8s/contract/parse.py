"""A pod's annotations, judged and resolved into a :class:`Plan`.

The checks run in the contract's order and the first refusal wins, so a pod with two
problems always hears about the same one first. Every refusal is a :class:`Refusal` whose
message names the key and the fix. Store-specific rules (which auth method needs what)
are not here: :mod:`dynconf_k8s.contract.storecheck` asks each store plugin's
``validate``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, Final, TypeVar

from dynconf.stores import redact_url
from dynconf_k8s.agent.notify import NotifyUrlError, parse_notify_url
from dynconf_k8s.contract import storecheck
from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.contract.knobs import nonempty
from dynconf_k8s.contract.plan import Also, Plan, Render, mount_dir
from dynconf_k8s.contract.provenance import Provenance
from dynconf_k8s.contract.refusals import PINS_PHRASE, Refusal
from dynconf_k8s.contract.registry import (
    ALSO,
    ALSO_SECTION,
    KEYS,
    PREFIX,
    REGISTRY,
    Key,
    annotation,
    split_key,
)
from dynconf_k8s.contract.rules import (
    ConfigMapRef,
    RuleError,
    parse_bool,
    parse_file_path,
    parse_flag_part,
    parse_quantity,
    quantity_bytes,
)

__all__ = [
    "INJECTED",
    "image_allowed",
    "injected_container_present",
    "parse_pod",
]

T = TypeVar("T")
INJECTED = "injected"
AGENT = "dynamic-config-agent"
INIT = "dynamic-config-init"
_PAIRS = (("endpoint", "endpoint-secret"), ("template", "template-configmap"))
"""Either-or pairs: one input, two places to give it (a cross-key rule, not a row's)."""
_POD_ROWS: Final = tuple(row for row in KEYS if row.target and not row.per_render)
_RENDER_ROWS: Final = tuple(row for row in KEYS if row.target and row.per_render)
_STORE_ROWS: Final = tuple(row for row in KEYS if row.store_shaped)
_SETTING_ROWS: Final = tuple(row for row in KEYS if row.setting)
"""The rows of the loaded stores' setting inputs (:func:`~.registry.store_input_rows`)."""
_RESOURCES: Final = tuple(row for row in KEYS if row.rule is parse_quantity and row.fleet_env)
"""The agent's CPU and memory, defaulted by every tier (ephemeral storage is the pod's own)."""
STORE_MEMORY_FLOOR: Final = {"firestore": "128Mi", "s3": "96Mi"}
"""The memory limit an agent of these stores gets at least, unless the pod or the store's own
installation default says otherwise: their clients peak above 64Mi or close to it (measured
by ``bench/agent_memory.py``: firestore 81 MiB, s3 57 MiB), and the floor keeps 25 % above
the peak. It raises the fleet default or the built-in, never a pinned fleet value."""


def _store_memory_floor(pod: _Pod, store: str | None, value: str) -> str:
    """``value`` raised to :data:`STORE_MEMORY_FLOOR` when only the fleet or built-in set it."""
    floor = STORE_MEMORY_FLOOR.get(store or "")
    if floor is None or pod.get("agent-memory-limit") is not None:
        return value
    if pod.inst.store_tier("agent-memory-limit", store) is not None:
        return value
    fleet = pod.inst.tier("agent-memory-limit", store)
    if fleet is not None and fleet.pinned:
        return value
    have, need = quantity_bytes(value), quantity_bytes(floor)
    if have is not None and need is not None and have < need:
        if pod.trace is not None:
            pod.trace.builtin(annotation("agent-memory-limit"), floor, f"the {store} floor")
        return floor
    return value


def injected_container_present(spec: object) -> bool:
    """Whether the pod already carries an injected agent (the idempotence check).

    Runs before the spec's shape is checked (a pod that asks for nothing is never
    shape-checked), so anything that is not a mapping or a list is no agent.
    """
    if not isinstance(spec, Mapping):
        return False
    for group in ("containers", "initContainers"):
        containers = spec.get(group)
        if not isinstance(containers, list):
            continue
        for container in containers:
            if isinstance(container, Mapping) and container.get("name") in (AGENT, INIT):
                return True
    return False


def _by_name(annotations: Mapping[str, str]) -> dict[tuple[str, str | None], str]:
    """The contract's annotations by ``(base, suffix)``: the key :func:`annotation` spells.

    Admission asks for a few hundred keys a pod mostly does not set; a lookup by name skips
    writing each key out. Exactly the keys ``annotation(base, suffix)`` can spell are indexed
    (no registry name holds a dot): ``source.`` or ``source..x`` are left for
    :func:`_check_keys` to refuse, never read as ``source``.
    """
    ours: dict[tuple[str, str | None], str] = {}
    for key, text in annotations.items():
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue
        base, dot, suffix = key[len(PREFIX) :].partition(".")
        if dot and (not suffix or "." in suffix):
            continue
        ours[base, suffix or None] = text
    return ours


def _pinned(key: str, pod: str, tier: str) -> Refusal:
    return Refusal(
        f'{key} is "{redact_url(pod)}", but {PINS_PHRASE} it to "{redact_url(tier)}" '
        '— match it or drop the annotation (the installer opens the value with a "?" marker, '
        'or everything with overridable "true")'
    )


class _Pod:
    """The annotations and spec of one pod, with helpers that refuse in the contract's words."""

    def __init__(
        self,
        annotations: Mapping[str, str],
        spec: object,
        inst: Installation,
        trace: Provenance | None = None,
    ) -> None:
        self.ann = annotations
        self._spec = spec
        self.inst = inst
        self.trace = trace
        self._ours = _by_name(annotations)

    @cached_property
    def spec(self) -> Mapping[str, Any]:
        """The spec, read only once the pod asks for injection.

        A pod that asks for nothing is allowed untouched whatever its spec holds; the
        webhook's shape check (``webhook/shape.py``) has refused a malformed spec, by its
        path, before an injecting pod gets here.
        """
        if not isinstance(self._spec, Mapping):
            raise Refusal("request.object.spec is not an object, and admission needs a pod spec")
        return self._spec

    @cached_property
    def containers(self) -> list[Mapping[str, Any]]:
        return list(self.spec.get("containers") or [])

    def get(self, name: str, suffix: str | None = None) -> str | None:
        """The text of ``annotation(name, suffix)``, looked up without spelling the key."""
        return self._ours.get((name, suffix or None))

    def rule(self, name: str, rule: Callable[[str], T], suffix: str | None = None) -> T | None:
        text = self.get(name, suffix)
        return None if text is None else _judge(name, rule, text, suffix)

    def value(self, name: str, suffix: str | None = None) -> Any:
        """The annotation through its row's rule; ``None`` when the pod does not set it."""
        return self.rule(name, REGISTRY[name].rule, suffix)

    def resolve(self, row: Key, store: str | None, suffix: str | None = None) -> Any:
        """A row's value: the annotation, else the tiers its row names, else its default.

        A fleet-defaulted row asks annotation (pin-checked) > per-store > fleet; a
        store-shaped row asks annotation > per-store (its pins are checked up front, with the
        pairs'); any other row has only the annotation. Every text goes through the row's rule.
        """
        if self.trace is None and (row.name, suffix or None) not in self._ours:
            return self._unset(row, store, suffix)
        if row.fleet_env:
            value: Any = self.tiered(row.name, row.rule, store, suffix)
        elif row.store_shaped:
            text = self.store_string(row.name, store, suffix)
            value = None if text is None else _judge(row.name, row.rule, text, suffix)
        else:
            value = self.value(row.name, suffix)
            if row.rule is parse_bool:
                self._note_switch(row, suffix)
        return row.value if value is None else value

    def _unset(self, row: Key, store: str | None, suffix: str | None) -> Any:
        """:meth:`resolve` of a row the pod does not write, with nothing to record: the path
        most rows of every pod take, so it asks only the tier that can answer."""
        if row.fleet_env:
            tier = self.inst.tier(row.name, store)
            value = None if tier is None else row.rule(tier.text)
        elif row.store_shaped:
            tier = self.inst.store_tier(row.name, store)
            value = None if tier is None else _judge(row.name, row.rule, tier.text, suffix)
        else:
            value = None
        return row.value if value is None else value

    def _note_switch(self, row: Key, suffix: str | None) -> None:
        """Record a true/false key: the pod's, or the contract's built-in (explain)."""
        if self.trace is None:
            return
        text = self.get(row.name, suffix)
        if text is None:
            self.trace.builtin(annotation(row.name, suffix), "true" if row.value else "false")
        else:
            self.trace.resolved(annotation(row.name, suffix), text, None)

    def note(
        self, name: str, store: str | None, suffix: str | None = None, *, store_only: bool = False
    ) -> None:
        """Record which tier answers ``name`` (explain's provenance; a no-op in admission)."""
        if self.trace is None:
            return
        tier = self.inst.store_tier(name, store) if store_only else self.inst.tier(name, store)
        self.trace.resolved(annotation(name, suffix), self.get(name, suffix), tier)

    def check_pin(self, name: str, store: str | None, suffix: str | None = None) -> None:
        text = self.get(name, suffix)
        tier = self.inst.tier(name, store)
        if text is not None and tier is not None and tier.pinned and text != tier.text:
            raise _pinned(annotation(name, suffix), text, tier.text)

    def tiered(
        self, name: str, rule: Callable[[str], T], store: str | None, suffix: str | None = None
    ) -> T | None:
        """Annotation (pin-checked) > per-store > fleet; ``None`` when nobody set it."""
        self.check_pin(name, store, suffix)
        self.note(name, store, suffix)
        value = self.rule(name, rule, suffix)
        if value is not None:
            return value
        tier = self.inst.tier(name, store)
        return rule(tier.text) if tier is not None else None

    def store_string(self, name: str, store: str | None, suffix: str | None) -> str | None:
        text = self.get(name, suffix)
        tier = self.inst.store_tier(name, store)
        if text is not None or tier is not None:
            self.note(name, store, suffix, store_only=True)
        if text is not None:
            return text
        return tier.text if tier is not None else None

    def pair(
        self, names: tuple[str, str], store: str | None, suffix: str | None
    ) -> tuple[str | None, str | None]:
        """An either-or pair resolves as a level: any pod half mutes both installation halves."""
        first, second = (self.get(n, suffix) for n in names)
        if first is not None or second is not None:
            for name in names:
                if self.get(name, suffix) is not None:
                    self.note(name, store, suffix, store_only=True)
            return first, second
        tiers = [self.inst.store_tier(n, store) for n in names]
        for name, tier in zip(names, tiers, strict=True):
            if tier is not None:
                self.note(name, store, suffix, store_only=True)
        return tuple(t.text if t else None for t in tiers)  # type: ignore[return-value]

    def container_index(self, name: str) -> int | None:
        for index, container in enumerate(self.containers):
            if container.get("name") == name:
                return index
        return None


def _judge(name: str, rule: Callable[[str], T], text: str, suffix: str | None) -> T:
    try:
        return rule(text)
    except RuleError as exc:
        raise Refusal(f"{annotation(name, suffix)} {exc}", field=annotation(name, suffix)) from None


def _check_keys(pod: _Pod) -> None:
    for key in pod.ann:
        if key.startswith(PREFIX) and split_key(key) is None:
            raise Refusal(
                f"{key} is not part of the contract; the annotation reference lists every key "
                "it takes"
            )


def _check_store_pins(pod: _Pod, store: str | None, suffix: str | None) -> None:
    if store is None:
        return
    for row in _STORE_ROWS:
        text = pod.get(row.name, suffix)
        tier = pod.inst.store_tier(row.name, store)
        if text is not None and tier is not None and tier.pinned and text != tier.text:
            raise _pinned(annotation(row.name, suffix), text, tier.text)
    for first, second in _PAIRS:
        for mine, other in ((first, second), (second, first)):
            tier = pod.inst.store_tier(other, store)
            if pod.get(mine, suffix) is not None and tier is not None and tier.pinned:
                raise Refusal(
                    f"{annotation(mine, suffix)} is set, but {PINS_PHRASE} "
                    f'{annotation(other, suffix)} to "{redact_url(tier.text)}" — the pair '
                    "answers as one: drop the annotation, or restate the pinned value instead"
                )


def _required(name: str, suffix: str | None) -> Refusal:
    if suffix:
        return Refusal(f'render "{suffix}" exists, so {annotation(name, suffix)} is required')
    extra = ""
    if name == "source":
        extra = (
            " (the installation default is DYNAMIC_CONFIG_AGENT_SOURCE — the chart's "
            "agent.defaults.source)"
        )
    return Refusal(
        f"{annotation('inject')} is true, so {annotation(name)} is required (per annotation, "
        f"or as an installation default){extra}"
    )


def _render_rows(pod: _Pod, render: Render, suffix: str | None) -> None:
    """Every per-render row with a target, resolved against this render's store."""
    for row in _RENDER_ROWS:
        setattr(render, row.target or "", pod.resolve(row, render.source, suffix))
    for row in _SETTING_ROWS:
        value = pod.resolve(row, render.source, suffix)
        if value is not None and value is not False:
            render.settings[row.setting or ""] = "true" if value is True else str(value)


def _row_text(pod: _Pod, name: str, suffix: str | None, text: str) -> Any:
    """An installation-or-annotation text through the row's rule, refused by its key."""
    return _judge(name, REGISTRY[name].rule, text, suffix)


def _endpoint(pod: _Pod, render: Render, suffix: str | None) -> None:
    endpoint, endpoint_secret = pod.pair(("endpoint", "endpoint-secret"), render.source, suffix)
    if endpoint is not None and endpoint_secret is not None:
        raise Refusal(
            f"{annotation('endpoint', suffix)} and {annotation('endpoint-secret', suffix)} are "
            "both set — one address, one place: keep one of them"
        )
    if endpoint is None and endpoint_secret is None:
        raise Refusal(
            f"{annotation('endpoint', suffix)} is required (or "
            f"{annotation('endpoint-secret', suffix)} naming a Secret that holds it, or a "
            "per-store default endpoint)"
        )
    render.endpoint = endpoint
    if endpoint_secret is not None:
        render.endpoint_secret = _row_text(pod, "endpoint-secret", suffix, endpoint_secret)


def _ssh(pod: _Pod, render: Render, suffix: str | None) -> None:
    ssh = pod.store_string("ssh-secret", render.source, suffix)
    if ssh is None:
        return
    if render.auth not in (None, "ssh-key"):
        raise Refusal(
            f"{annotation('ssh-secret', suffix)} implies auth ssh-key, but "
            f"{annotation('auth', suffix)} names another method — drop one of them"
        )
    render.ssh = _row_text(pod, "ssh-secret", suffix, ssh)


def _skip_verify(pod: _Pod, render: Render, suffix: str | None) -> None:
    if not render.tls_skip_verify:
        return
    if pod.trace is not None:
        pod.trace.gate(
            annotation("tls-skip-verify", suffix),
            "webhook.allowTlsSkipVerify",
            pod.inst.allow_tls_skip_verify,
        )
    if not pod.inst.allow_tls_skip_verify:
        raise Refusal(
            f"{annotation('tls-skip-verify', suffix)} is not offered by this installation; an "
            "administrator enables it with webhook.allowTlsSkipVerify "
            "(DYNAMIC_CONFIG_WEBHOOK_ALLOW_TLS_SKIP_VERIFY) — or trust the store's CA with "
            "ca-configmap instead"
        )
    if render.ca is not None:
        raise Refusal(
            f"{annotation('tls-skip-verify', suffix)} and {annotation('ca-configmap', suffix)} "
            "are contradictory: naming an authority and not checking it are two answers to "
            "one question — keep ca-configmap"
        )


def _template(pod: _Pod, render: Render, suffix: str | None) -> None:
    if (
        pod.get("template", suffix) is not None
        and pod.get("template-configmap", suffix) is not None
    ):
        raise Refusal(
            f"{annotation('template', suffix)} and {annotation('template-configmap', suffix)} "
            "are both set — one template, one place: keep one of them"
        )
    inline, configmap = pod.pair(("template", "template-configmap"), render.source, suffix)
    render.template_inline = inline
    if configmap is not None:
        render.template_configmap = _row_text(pod, "template-configmap", suffix, configmap)


def _render_checks(pod: _Pod, render: Render, suffix: str | None) -> None:
    """A render's rows, then the rules between its keys (the same for every render)."""
    _render_rows(pod, render, suffix)
    _endpoint(pod, render, suffix)
    _ssh(pod, render, suffix)
    _skip_verify(pod, render, suffix)


def _named_render(pod: _Pod, name: str, default_dir: str) -> Render:
    source_text = pod.get("source", name)
    if source_text is None:
        raise _required("source", name)
    source = str(pod.value("source", name))
    _check_store_pins(pod, source, name)
    path = pod.rule("path", parse_file_path, name)
    key = pod.store_string("key", source, name)
    if key is None:
        raise _required("key", name)
    if path is None:
        raise _required("path", name)
    if mount_dir(path) != default_dir:
        raise Refusal(
            f"{annotation('path', name)} is outside {default_dir}: every render shares ONE "
            f"volume, mounted at the directory of {annotation('path')} — put this file there too"
        )
    render = Render(name=name, source=source, key=key, path=path)
    _render_checks(pod, render, name)
    _template(pod, render, name)
    render.metrics_port = pod.value("metrics-port", name) or None  # no fleet tier per name
    return render


def _suffixes(pod: _Pod) -> tuple[list[str], list[str], list[str]]:
    named: set[str] = set()
    also: set[str] = set()
    also_section: set[str] = set()
    for key in pod.ann:
        if not key.startswith(PREFIX):
            continue
        split = split_key(key)
        if split is None or split[1] is None:
            continue
        base, suffix = split[0], split[1]
        {ALSO: also, ALSO_SECTION: also_section}.get(base, named).add(suffix)
    return sorted(named), sorted(also), sorted(also_section)


def _notify(pod: _Pod, mode: str) -> str | None:
    url = pod.get("notify-http")
    if url is None:
        return None
    if mode == "init":
        raise Refusal(
            f"{annotation('notify-http')} has nothing to notify under mode init: the agent "
            "writes once and exits before the application starts — drop it or use sidecar/both"
        )
    try:
        parse_notify_url(url)
    except NotifyUrlError as error:
        raise Refusal(f"{annotation('notify-http')} {error}") from None
    return url


def parse_pod(
    pod_object: Mapping[str, Any],
    installation: Installation,
    provenance: Provenance | None = None,
) -> tuple[Plan | None, list[str]]:
    """Judge a pod: ``(None, [])`` when it asks for nothing, else its plan and warnings.

    Raises :class:`Refusal` for the first problem in the contract's order. The idempotence
    pass-through (a marked pod that already carries the agent) is the caller's check.
    ``provenance``, when given, records which tier answered each key as it is resolved
    (``explain``); it never changes the answer.
    """
    metadata = pod_object.get("metadata") or {}
    annotations: Mapping[str, str] = metadata.get("annotations") or {}
    pod = _Pod(annotations, pod_object.get("spec") or {}, installation, provenance)
    inst = installation

    status = pod.get("status")
    if status is not None and status != INJECTED:
        raise Refusal(
            f"{annotation('status')} is written by the webhook and is not a pod's to set; drop "
            f'it (to opt out, set {annotation("inject")} to "false")'
        )
    if status == INJECTED:
        raise Refusal(
            f"{annotation('status')} says injected, but the pod carries no injected agent — a "
            "copied manifest? Drop the annotation and let the webhook inject"
        )
    inject = pod.get("inject")
    if inject is None or inject == "false":
        return None, []
    if inject != "true":
        raise Refusal(f'{annotation("inject")} takes "true" or "false"')
    _check_keys(pod)

    source: str | None = pod.value("source")
    fleet_source = inst.fleet.get("source")
    if (
        source is not None
        and fleet_source is not None
        and fleet_source.pinned
        and (source != fleet_source.text)
    ):
        raise _pinned(annotation("source"), source, fleet_source.text)
    store = source or (fleet_source.text if fleet_source else None)
    pod.note("source", None)
    _check_store_pins(pod, store, None)

    default = Render(name=None, source=store or "", key="", path="")
    plan = Plan(
        default=default,
        image=inst.image,
        installation_image=inst.image,
        pull_secret=inst.pull_secret,
        fleet_env=list(inst.fleet_env),
    )
    for row in _POD_ROWS:
        setattr(plan, row.target or "", pod.resolve(row, store))
    _render_checks(pod, default, None)
    default.metrics_port = pod.resolve(REGISTRY["metrics-port"], store) or None
    mode = plan.mode

    _resources(pod, plan, store)
    _same_user(pod, plan)
    _env_checks(pod, plan)
    _lease_checks(pod, plan)
    plan.notify_http = _notify(pod, mode)
    if plan.history is not None and plan.volume_medium == "disk":
        raise Refusal(
            f"{annotation('history')} would keep replaced documents on node-backed storage "
            f"under {annotation('volume-medium')} disk, where a secret outlives the pod — drop "
            "one of them"
        )
    plan.canary = _canary(pod, mode)
    _agent_image(pod, plan)
    if plan.events and pod.trace is not None:
        pod.trace.gate(annotation("events"), "webhook.allowEvents", inst.allow_events)
    if plan.events and not inst.allow_events:
        raise Refusal(
            f"{annotation('events')} is not offered by this installation; an administrator "
            "enables it with webhook.allowEvents (DYNAMIC_CONFIG_WEBHOOK_ALLOW_EVENTS) and the "
            "agent.events Role"
        )
    _ack_checks(plan)
    _agent_env(pod, plan)
    _inject_containers(pod, plan)
    _env_inject_container(pod, plan, pod.get("env-inject"))
    _template(pod, default, None)
    _renders(pod, plan, store)

    for render in (default, *plan.named):
        storecheck.check(render, plan)
    from dynconf_k8s.contract.warnings import warnings_for

    return plan, warnings_for(pod.ann, plan)


def _resources(pod: _Pod, plan: Plan, store: str | None) -> None:
    """The agent's requests and limits: every tier for CPU and memory, the pod's own for
    ephemeral storage, a request never above its limit."""
    for row in _RESOURCES:
        pod.check_pin(row.name, store)
    for row in _RESOURCES:
        value = pod.resolve(row, store)
        if row.name == "agent-memory-limit" and value is not None:
            value = _store_memory_floor(pod, store, str(value))
        if value is not None:
            target = plan.requests if row.name.endswith("request") else plan.limits
            target[row.name.split("-")[1]] = str(value)
    ephemeral_request = pod.rule("agent-ephemeral-request", parse_quantity)
    ephemeral_limit = pod.rule("agent-ephemeral-limit", parse_quantity)
    if ephemeral_request and ephemeral_limit:
        low, high = quantity_bytes(ephemeral_request), quantity_bytes(ephemeral_limit)
        if low is not None and high is not None and low > high:
            raise Refusal(
                f"{annotation('agent-ephemeral-request')} is larger than "
                f"{annotation('agent-ephemeral-limit')}; a request cannot exceed its limit"
            )
    if ephemeral_request:
        plan.requests["ephemeral-storage"] = ephemeral_request
    if ephemeral_limit:
        plan.limits["ephemeral-storage"] = ephemeral_limit


def _env_checks(pod: _Pod, plan: Plan) -> None:
    """env-inject and env-restart need the file before the container starts; aws-secret is
    s3's own."""
    mode, store = plan.mode, plan.default.source or None
    env_inject = pod.get("env-inject")
    if env_inject is not None and mode == "sidecar":
        raise Refusal(
            f"{annotation('env-inject')} needs the file before the container starts, and mode "
            "sidecar renders it beside the container — use mode init or both"
        )
    if plan.env_restart and env_inject is None:
        raise Refusal(
            f"{annotation('env-restart')} restarts the env-injected container, and "
            f"{annotation('env-inject')} names none — set it, or drop env-restart"
        )
    if plan.env_restart and mode != "both":
        raise Refusal(
            f"{annotation('env-restart')} needs mode both: the init agent writes the file the "
            "container starts with, the watcher notices it change"
        )
    aws = pod.store_string("aws-secret", store, None)
    if pod.get("aws-secret") is not None and store != "s3":
        raise Refusal(
            f"{annotation('aws-secret')} carries AWS keys for an s3 source, and this render "
            "reads another store — drop it"
        )
    plan.aws_secret = aws if store == "s3" else None


def _lease_checks(pod: _Pod, plan: Plan) -> None:
    """A lease is a dynamic render's: revoke-grace and revoke-on-shutdown need one; init-first
    needs an init agent."""
    plan.revoke_grace = _revoke_grace(pod, plan)
    if plan.init_first and plan.mode == "sidecar":
        raise Refusal(
            f"{annotation('init-first')} orders the init agent, and mode sidecar has none — "
            "use mode init or both, or drop it"
        )
    if not plan.revoke_on_shutdown and not plan.dynamic:
        raise Refusal(
            f"{annotation('revoke-on-shutdown')} is about a lease, and only "
            f"{annotation('dynamic')} renders hold one — drop it or set dynamic"
        )


def _ack_checks(plan: Plan) -> None:
    """require-ack is answered through a watching agent's readiness probe."""
    if not plan.require_ack:
        return
    if not plan.readiness:
        raise Refusal(
            f"{annotation('require-ack')} makes the acknowledgement part of readiness, and "
            f"{annotation('readiness')} is false — drop one of them"
        )
    if plan.mode == "init":
        raise Refusal(
            f"{annotation('require-ack')} needs a watching agent to answer /applied, and mode "
            "init has none — use sidecar or both"
        )
    if not plan.default.metrics_port:
        raise Refusal(
            f"{annotation('require-ack')} makes the acknowledgement part of readiness, and this "
            f'agent has no readiness probe: {annotation("metrics-port")} is unset or "0" — '
            "give the agent a metrics port, or drop require-ack"
        )


def _renders(pod: _Pod, plan: Plan, store: str | None) -> None:
    """The named renders and ``also`` files, all in the default path's directory; then the
    default render's own required path and key."""
    inst, default = pod.inst, plan.default
    path = pod.rule("path", parse_file_path)
    if path is not None:
        default_dir = mount_dir(path)
    else:
        tier_path = inst.tier("path", store)
        default_dir = mount_dir(tier_path.text) if tier_path else "/config"
    named_names, also_names, also_sections = _suffixes(pod)
    plan.named = [_named_render(pod, name, default_dir) for name in named_names]
    plan.also = _also(pod, also_names, also_sections, default_dir)
    _distinct_ports(plan)

    pod.check_pin("path", store)
    pod.note("path", store)
    path = path if path is not None else _tier_text(inst, "path", store)
    if path is None:
        raise _required("path", None)
    default.path = nonempty(path)
    _distinct_files(plan)
    if store is None:
        raise _required("source", None)
    key = pod.store_string("key", store, None)
    if key is None:
        raise _required("key", None)
    default.key = key


def _tier_text(inst: Installation, name: str, store: str | None) -> str | None:
    tier = inst.tier(name, store)
    return tier.text if tier else None


def _same_user(pod: _Pod, plan: Plan) -> None:
    if not pod.resolve(REGISTRY["agent-run-as-same-user"], None):
        return
    if pod.get("agent-run-as-user") is not None:
        raise Refusal(
            f"{annotation('agent-run-as-same-user')} and {annotation('agent-run-as-user')} both "
            "choose the agent's uid — keep one of them"
        )
    first = pod.containers[0].get("securityContext") or {} if pod.containers else {}
    pod_context = pod.spec.get("securityContext") or {}
    uid = first.get("runAsUser", pod_context.get("runAsUser"))
    if uid is None:
        raise Refusal(
            f"{annotation('agent-run-as-same-user')} has no runAsUser to inherit: set one on "
            "the first container or the pod, or use agent-run-as-user"
        )
    if int(uid) == 0:
        raise Refusal(
            f"{annotation('agent-run-as-same-user')} would run the agent as root (the "
            "application's uid is 0); the agent stays nonroot — use agent-run-as-user"
        )
    plan.run_as_user = int(uid)
    gid = first.get("runAsGroup", pod_context.get("runAsGroup"))
    if gid:
        plan.run_as_group = int(gid)


def _revoke_grace(pod: _Pod, plan: Plan) -> int | None:
    grace = pod.value("revoke-grace")
    if grace is None:
        return None
    budget = pod.spec.get("terminationGracePeriodSeconds", 30)
    if int(str(grace)) > int(budget):
        raise Refusal(
            f"{annotation('revoke-grace')} is longer than the pod's "
            f"terminationGracePeriodSeconds ({budget}); the kubelet would SIGKILL the agent "
            "mid-revoke — shorten it or raise the pod's grace period"
        )
    if not plan.dynamic:
        raise Refusal(
            f"{annotation('revoke-grace')} bounds revoking a lease, and only "
            f"{annotation('dynamic')} renders hold one — drop it or set dynamic"
        )
    return int(str(grace))


def _canary(pod: _Pod, plan_mode: str) -> ConfigMapRef | None:
    text = pod.get("canary-configmap")
    if text is None:
        return None
    if plan_mode == "init":
        raise Refusal(
            f"{annotation('canary-configmap')} holds documents back for a watching agent, and "
            "mode init publishes once and exits — use sidecar or both"
        )
    return _row_text(pod, "canary-configmap", None, text)  # type: ignore[no-any-return]


def image_allowed(image: str, prefix: str) -> bool:
    """``prefix`` admits ``image`` at a reference boundary, never mid-name.

    ``registry.example/agents`` admits ``registry.example/agents:1``, ``…/agents@sha256:…``
    and ``…/agents/x`` but not ``registry.example/agentsevil:1``; a prefix that itself ends in
    ``/``, ``:`` or ``@`` already sits on a boundary.
    """
    if not prefix or not image.startswith(prefix):
        return False
    return len(image) == len(prefix) or prefix[-1] in "/:@" or image[len(prefix)] in "/:@"


def _agent_image(pod: _Pod, plan: Plan) -> None:
    image = pod.get("agent-image")
    if image is None:
        return
    admitted = any(image_allowed(image, prefix) for prefix in pod.inst.agent_image_allow)
    if pod.trace is not None:
        pod.trace.gate(annotation("agent-image"), "webhook.agentImageAllow", admitted)
    if not admitted:
        raise Refusal(
            f"{annotation('agent-image')} names an image no webhook.agentImageAllow prefix "
            "(DYNAMIC_CONFIG_WEBHOOK_AGENT_IMAGE_ALLOW) admits; drop it to use the "
            "installation's agent, or ask an administrator to allow the prefix"
        )
    plan.image = image


def _agent_env(pod: _Pod, plan: Plan) -> None:
    pairs: list[tuple[str, str]] | None = pod.value("agent-env")
    if pairs is None:
        return
    if plan.aws_secret is not None:
        for name, _value in pairs:
            if name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                raise Refusal(
                    f"{annotation('agent-env')} sets {name}, which {annotation('aws-secret')} "
                    "already sets — one credential, one place: drop it from agent-env"
                )
    plan.agent_env = pairs


def _inject_containers(pod: _Pod, plan: Plan) -> None:
    text = pod.get("inject-containers")
    if text is None:
        plan.mount_containers = list(range(len(pod.containers)))
        return
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise Refusal(
            f"{annotation('inject-containers')} names no container — a render nothing can read "
            "is a render nobody asked for; name the containers, or drop it for all of them"
        )
    indices = []
    for name in names:
        index = pod.container_index(name)
        if index is None:
            raise Refusal(
                f'{annotation("inject-containers")} names "{name}", and this pod has no such '
                "container; fix the name"
            )
        indices.append(index)
    plan.mount_containers = sorted(set(indices))


def _env_inject_container(pod: _Pod, plan: Plan, name: str | None) -> None:
    if name is None:
        return
    index = pod.container_index(name)
    if index is None:
        raise Refusal(
            f'{annotation("env-inject")} names "{name}", and this pod has no such container; '
            "fix the name"
        )
    if index not in plan.mount_containers:
        raise Refusal(
            f"{annotation('env-inject')} names a container {annotation('inject-containers')} "
            "leaves out; the wrapper sources the rendered file, so add it there"
        )
    if not pod.containers[index].get("command"):
        raise Refusal(
            f'{annotation("env-inject")} needs an explicit command on container "{name}": the '
            "wrapper runs it after sourcing the file, and an image ENTRYPOINT is invisible here "
            "— set command (and args) on the container"
        )
    if plan.env_restart and pod.containers[index].get("livenessProbe"):
        raise Refusal(
            f'{annotation("env-restart")} adds a livenessProbe, and container "{name}" already '
            "has one — drop env-restart or the container's probe"
        )
    plan.env_inject = index


def _distinct_ports(plan: Plan) -> None:
    """Every watching agent shares the pod's network namespace: one port, one listener."""
    if not plan.watches:
        return
    seen: dict[int, str] = {}
    for render in (plan.default, *plan.named):
        port = render.metrics_port
        if not port:
            continue
        key = annotation("metrics-port", render.name)
        if port in seen:
            raise Refusal(
                f"{key} is the port {seen[port]} already gives another agent, and two agents "
                "in one pod cannot listen on one port — give each render its own"
            )
        seen[port] = key


def _distinct_files(plan: Plan) -> None:
    """Two renderings of one file would overwrite each other (and the agent refuses it)."""
    seen: dict[str, str] = {}
    files = [(annotation("path", r.name), r.path) for r in (plan.default, *plan.named)]
    files += [(annotation(ALSO, also.name), also.path) for also in plan.also]
    for key, path in files:
        if path in seen:
            raise Refusal(
                f"{key} names the same file as {seen[path]}; two renderings of one file would "
                "overwrite each other — give each its own path"
            )
        seen[path] = key


def _also(pod: _Pod, names: list[str], sections: list[str], default_dir: str) -> list[Also]:
    out = []
    for name in sections:
        if name not in names:
            raise Refusal(
                f"{annotation(ALSO_SECTION, name)} has no {annotation(ALSO, name)} naming the "
                "file it cuts; add the path or drop the section"
            )
    for name in names:
        path = pod.rule(ALSO, parse_file_path, name) or ""
        pod.rule(ALSO, parse_flag_part, name)
        pod.rule(ALSO_SECTION, parse_flag_part, name)
        if mount_dir(path) != default_dir:
            raise Refusal(
                f"{annotation(ALSO, name)} lands outside {default_dir}; it lands in the same "
                f"directory as {annotation('path')} (one shared volume)"
            )
        out.append(Also(name, path, pod.get(ALSO_SECTION, name)))
    return out
