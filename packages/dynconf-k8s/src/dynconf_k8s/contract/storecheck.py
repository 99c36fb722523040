"""Store-specific rules at admission, from each store plugin's own ``validate``.

The webhook knows no store's auth matrix: it builds the :class:`StoreSpec` the agent would
build from the flags it is about to write, and asks the store plugin. Secrets the webhook
never sees (a token or password from a Secret, an address in ``endpoint-secret``) are
stood in by placeholders, and rules about the shape of a secret address are left to the
agent, which can read it. Refusals come back in the agent's flag vocabulary and are
translated to the annotation that sets each flag.
"""

from __future__ import annotations

import re
from typing import Any, Final

from dynconf.plugins import default_registry
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_k8s.contract.plan import Plan, Render
from dynconf_k8s.contract.refusals import Refusal
from dynconf_k8s.contract.registry import FLAG_KEYS, KEYS, REGISTRY, annotation

__all__ = ["check", "spec_for"]

_PLACEHOLDER: Final = "secret-backed"
_STORE_FIELD_ROWS: Final = tuple(row for row in KEYS if row.store_field)
_FLAG_TO_KEY: Final = {
    **FLAG_KEYS,
    **{" and ".join(REGISTRY["tls-secret"].flags): "tls-secret"},
    **{"/".join(REGISTRY["tls-secret"].flags): "tls-secret"},
}
"""Each agent flag a store's refusal may name → the annotation that sets it (the rows')."""
_FLAG = re.compile(
    "|".join(re.escape(flag) for flag in sorted(_FLAG_TO_KEY, key=len, reverse=True))
    + r"(?![a-z-])"
)
_ENDPOINT_WORDS: Final = ("endpoint", "url", "address", "scheme", "host")


def spec_for(render: Render, plan: Plan) -> StoreSpec:
    """The spec the agent would build from this render's flags and environment."""
    env_names = {name for name, _ in (*plan.agent_env,)}
    auth = render.auth
    if render.ssh is not None and auth is None:
        auth = "ssh-key"
    tls = TlsSettings(
        ca_file=f"/etc/dynamic-config/ca/{render.ca.key}" if render.ca else None,
        cert_file="/etc/dynamic-config/tls/tls.crt" if render.tls_secret else None,
        key_file="/etc/dynamic-config/tls/tls.key" if render.tls_secret else None,
        server_name=render.tls_server_name,
        skip_verify=render.tls_skip_verify,
    )
    has_token = render.token_secret is not None or "DYNAMIC_CONFIG_AGENT_TOKEN" in env_names
    has_password = (
        render.password_secret is not None or "DYNAMIC_CONFIG_AGENT_PASSWORD" in env_names
    )
    return StoreSpec(
        source=render.source,
        endpoint=render.endpoint if render.endpoint is not None else _PLACEHOLDER,
        key=render.key,
        section=render.section,
        ssh_key=f"/etc/dynamic-config/ssh/{render.ssh.key}" if render.ssh else None,
        timeout=float(render.timeout) if render.timeout is not None else None,
        dynamic=plan.dynamic and render.name is None,
        tls=tls,
        token=_PLACEHOLDER if has_token else None,
        password=_PLACEHOLDER if has_password else None,
        **{**_store_strings(render), "auth": auth},
    )


def _store_strings(render: Render) -> dict[str, Any]:
    """The store's plain string inputs of a render, each from its row into its spec field."""
    return {row.store_field or "": getattr(render, row.target or "") for row in _STORE_FIELD_ROWS}


def _translate(message: str, suffix: str | None) -> str:
    message = _FLAG.sub(lambda m: annotation(_FLAG_TO_KEY[m.group(0)], suffix), message)
    message = message.replace(
        "a token (DYNAMIC_CONFIG_AGENT_TOKEN)", annotation("token-secret", suffix)
    )
    return message.replace(
        "a password (DYNAMIC_CONFIG_AGENT_PASSWORD)", annotation("password-secret", suffix)
    )


def check(render: Render, plan: Plan) -> None:
    """Refuse with the store's first rule this render breaks (Malformed)."""
    try:
        store = default_registry().store(render.source)
    except Exception:
        return
    try:
        refusals = store.validate(spec_for(render, plan))
    except Exception:
        return
    if render.endpoint is None:
        refusals = [
            r for r in refusals
            if _PLACEHOLDER not in r and not any(w in r.lower() for w in _ENDPOINT_WORDS)
        ]  # fmt: skip
    if refusals:
        where = f'render "{render.name}": ' if render.name else ""
        raise Refusal(f"{where}{_translate(refusals[0], render.name)}")
