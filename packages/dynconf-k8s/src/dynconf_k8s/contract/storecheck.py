"""Store-specific rules at admission, from each store plugin's own ``validate``.

The webhook knows no store's auth matrix: it builds the :class:`StoreSpec` the agent would
build from the flags it is about to write, and asks the store plugin. Secrets the webhook
never sees (a token or password from a Secret, an address in ``endpoint-secret``) are
stood in by placeholders, and rules about the shape of a secret address are left to the
agent, which can read it. Refusals come back as data (:class:`dynconf.errors.Refusal`):
admission decides by each refusal's ``field`` alone — one about the ``endpoint`` is left to
the agent when the address is in a Secret, every other one is raised — and renders it with
the annotation that sets each input, so no store's wording can change what is admitted.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from dynconf.errors import Refusal as StoreRefusal
from dynconf.plugins import default_registry
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_k8s.contract.plan import Plan, Render
from dynconf_k8s.contract.refusals import Refusal
from dynconf_k8s.contract.registry import KEYS, annotation, input_key

__all__ = ["check", "spec_for"]

log = logging.getLogger("dynconf.webhook")

_PLACEHOLDER: Final = "secret-backed"
_STORE_FIELD_ROWS: Final = tuple(row for row in KEYS if row.store_field)


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
    return StoreSpec.from_inputs(
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
        extra=dict(render.settings),
        **{**_store_strings(render), "auth": auth},
    )


def _store_strings(render: Render) -> dict[str, Any]:
    """The store's plain string inputs of a render, each from its row into its spec field."""
    return {row.store_field or "": getattr(render, row.target or "") for row in _STORE_FIELD_ROWS}


def _about_endpoint(refusal: StoreRefusal) -> bool:
    """Whether a refusal judges the address, which admission cannot see when it is in a Secret."""
    return refusal.field == "endpoint"


def check(render: Render, plan: Plan) -> None:
    """Refuse with the store's first rule this render breaks (Malformed)."""
    try:
        store = default_registry().store(render.source)
    except Exception:
        return
    try:
        refusals = store.refusals(spec_for(render, plan))
    except Exception as error:
        # A store plugin's bug must not admit what nobody judged, nor stop this process.
        log.error("store_refusals_failed", extra={"store": render.source,
                                                  "error": type(error).__name__})  # fmt: skip
        raise Refusal(
            f"the {render.source} store could not judge this render "
            f"({type(error).__name__}); the store plugin is at fault: report it with the "
            "pod's annotations, or use another store"
        ) from None
    if render.endpoint is None:
        refusals = [refusal for refusal in refusals if not _about_endpoint(refusal)]
    if refusals:
        where = f'render "{render.name}": ' if render.name else ""
        name = render.name
        text = refusals[0].render(lambda field: annotation(input_key(field), name))
        raise Refusal(f"{where}{text}")
