"""From a class, a Render and a fetched document to the target's ``data``.

Everything here is the agent's path: the store spec is checked by the store type's own
``validate`` (the rules the agent and the webhook apply), the client comes from the same
``build``, and the document goes through :func:`dynconf.pipeline.prepare` — size ceiling,
parse, render by the file's extension — before a shape cuts it into keys. Nothing here talks
to the API server; :mod:`dynconf_k8s.operator.reconcile` does.

Refusals are :class:`RenderRefused` errors carrying the ``Ready`` reason they map to; their
messages are the contract's sentences and name the fix, never a value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dynconf.budget import ledger
from dynconf.errors import InvalidError, MissingError, Origin
from dynconf.follow import fetch_once
from dynconf.pipeline import RenderRequest, env_entries, prepare, verbatim_entries
from dynconf.plugins import default_registry
from dynconf.render import OutputSpec, select_section
from dynconf.stores import SETTING, Absent, Fetched, StoreSpec
from dynconf_k8s.contract.registry import REGISTRY, input_key
from dynconf_k8s.operator.types import Reason, RenderSpec, RenderTarget

__all__ = [
    "PLACEHOLDER_FILE",
    "ResolvedClass",
    "RenderRefused",
    "TargetRef",
    "check_target",
    "render_data",
]

PLACEHOLDER_FILE: Final = "entries.json"
"""The output the entry shapes render through ``prepare`` (its bytes are not published)."""

_KEY_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")


class RenderRefused(InvalidError):
    """A refusal the ``Ready`` condition reports with its own reason."""

    def __init__(self, message: str, *, reason: str = Reason.RENDER_FAILED) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ResolvedClass:
    """A class reduced to what a render needs, whichever kind it was."""

    source: str
    endpoint: str
    token: str | None = None


@dataclass(frozen=True)
class TargetRef:
    """The object a Render writes: ``kind`` is ``ConfigMap`` or ``Secret``."""

    kind: str
    name: str


def check_target(target: RenderTarget, source: str) -> TargetRef:
    """The target object, or the refusal naming what to change in ``spec.target``."""
    if target.config_map and target.secret:
        raise RenderRefused("target names both configMap and secret: one document, one destination")
    if not target.config_map and not target.secret:
        raise RenderRefused("target names neither configMap nor secret")
    if target.shape == "file" and not target.file:
        raise RenderRefused(
            "the file shape needs target.file: its extension picks the rendered format"
        )
    if target.config_map and source == "vault":
        raise RenderRefused(
            "a vault document rendered into a ConfigMap is a secrecy downgrade; give the Render a "
            "`secret:` target instead"
        )
    if target.config_map:
        return TargetRef("ConfigMap", target.config_map)
    assert target.secret is not None
    return TargetRef("Secret", target.secret)


def render_data(
    spec: RenderSpec,
    resolved: ResolvedClass,
    *,
    fetch: Callable[[StoreSpec], Fetched] | None = None,
) -> dict[str, str]:
    """Fetch the Render's document once and cut it into the target's keys.

    ``file`` → ``{target.file: rendered text}``; ``envEntries`` → one UPPER_SNAKE key per leaf;
    ``entries`` → one key per leaf, dotted path verbatim. ``fetch`` replaces the store round
    trip (benchmarks share one fetch); by default the store type builds a client, fetches
    and closes it.
    """
    store = StoreSpec(
        source=resolved.source, endpoint=resolved.endpoint, key=spec.key, token=resolved.token
    )
    store_type = default_registry().store(resolved.source)
    refusals = [refusal.render(spec_spelling) for refusal in store_type.refusals(store)]
    if refusals:
        raise RenderRefused("; ".join(refusals))
    fetched = (fetch or fetch_document)(store)
    target = spec.target
    file_name = target.file if target.shape == "file" and target.file else PLACEHOLDER_FILE
    request = RenderRequest(outputs=[OutputSpec(path=Path(file_name))])
    prepared = prepare(fetched, request, origin=Origin.remote(store_type.describe(store)))
    if target.shape == "file":
        data = {file_name: _text(prepared.outputs[request.main.path])}
    else:
        document = select_section(prepared.document, None)
        data = env_entries(document) if target.shape == "envEntries" else verbatim_entries(document)
    for key in data:
        _check_key(key)
    return data


def spec_spelling(field: str) -> str:
    """A store input as a Render or its class spells it (``spec.key``, ``spec.endpoint``,
    ``spec.tokenSecret``): the row's operator field, else the input's own name."""
    row = REGISTRY.get(input_key(field))
    if row is not None and row.spec_field:
        return f"spec.{row.spec_field}"
    return field.removeprefix(SETTING)


def fetch_document(store: StoreSpec) -> Fetched:
    """Build the store's client, read the document once, release the client.

    The read is :func:`dynconf.follow.fetch_once`'s, whether the client blocks or is async.
    """
    source = default_registry().store(store.source).build(store)
    answer = fetch_once(source, close=True, calls=ledger().for_spec(store))
    if isinstance(answer, Absent):
        raise MissingError(
            "the document is not in the store; write it there first or fix the Render's key",
            origin=Origin.remote(source.describe()),
        )
    return answer


def _text(rendered: bytes) -> str:
    try:
        return rendered.decode("utf-8")
    except UnicodeDecodeError:
        raise RenderRefused("the rendered document is not UTF-8 text") from None


def _check_key(key: str) -> None:
    if not key or len(key) > 253 or not set(key) <= _KEY_CHARS or key in (".", ".."):
        raise RenderRefused(
            f"the key `{key}` is not a valid ConfigMap or Secret key (letters, digits, `-`, `_`, "
            "`.`); rename it in the store or use the envEntries shape",
        )
