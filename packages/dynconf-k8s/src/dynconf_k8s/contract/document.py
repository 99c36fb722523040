"""The mounted installation document, rendered into the variables' grammar.

A map is defined as what it renders to: the document is read with the engine's YAML reader
and turned into the same strings an installer could have set as variables (maps iterate in
sorted order), then parsed by the one installation parser. Two spellings, one set of rules
and messages. A variable set on the container wins over the document's rendering of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from dynconf.errors import DynconfError, Origin
from dynconf.formats.yaml_ import parse as parse_yaml
from dynconf_k8s.contract.installation import ENV, InstallationError
from dynconf_k8s.contract.registry import FLEET_KNOBS

__all__ = ["DOCUMENT_KEYS", "merge_environment", "render_document"]

_SCALAR_KEYS: Final[Mapping[str, str]] = {
    **{row.document_key: row.fleet_env for row in FLEET_KNOBS.values()
       if row.document_key and row.fleet_env},
    "agentEnv": ENV.AGENT_ENV,
    "overridable": ENV.OVERRIDABLE,
}  # fmt: skip
_GATE_KEYS: Final[Mapping[str, str]] = {
    "agentEnvAllow": ENV.AGENT_ENV_ALLOW,
    "sourceAllow": ENV.SOURCE_ALLOW,
    "sourceDeny": ENV.SOURCE_DENY,
}
DOCUMENT_KEYS: Final = tuple(sorted((*_SCALAR_KEYS, *_GATE_KEYS, "storeDefaults")))


def _scalar(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def _store_defaults(value: object, problems: list[str]) -> str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        problems.append("storeDefaults: a map of store to settings; this is not a map")
        return None
    groups = []
    for store in sorted(value):
        settings = value[store]
        if isinstance(settings, str):
            groups.append(f"{store}: {settings}")
            continue
        if not isinstance(settings, dict):
            problems.append(
                f"storeDefaults.{store}: a map of setting to value, or that grammar as one "
                f"string; this is {_shape(settings)}"
            )
            continue
        pairs = []
        for knob in sorted(settings):
            text = _scalar(settings[knob])
            if text is None:
                problems.append(
                    f"storeDefaults.{store}.{knob}: a string, number or boolean; this is "
                    f"{_shape(settings[knob])}"
                )
                continue
            pairs.append(f"{knob}={text}")
        groups.append(f"{store}: {', '.join(pairs)}")
    return "; ".join(groups)


def _gate(key: str, value: object, problems: list[str]) -> str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        problems.append(f"{key}: a map of namespace to a list of names; this is {_shape(value)}")
        return None
    groups = []
    for namespace in sorted(value):
        names = value[namespace]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            problems.append(f"{key}.{namespace}: a list of names; this is {_shape(names)}")
            continue
        groups.append(f"{namespace}: {', '.join(names)}")
    return "; ".join(groups)


def _shape(value: object) -> str:
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a word"
    if value is None:
        return "empty"
    return "a " + type(value).__name__


def _is_null(text: str) -> bool:
    """Whether ``text`` holds a YAML null scalar (``~``, ``null``) rather than nothing at all.

    A blank or comment-only document is an empty installation; an explicit null is a stray
    scalar where a mapping belongs, and is refused like any other non-mapping.
    """
    import yaml

    if not any(
        line.strip() and not line.lstrip().startswith("#") and line.strip() not in ("---", "...")
        for line in text.splitlines()
    ):
        return False
    try:
        return yaml.safe_load(text) is None
    except yaml.YAMLError:
        return False


def render_document(text: str, *, origin: str = "the installation document") -> dict[str, str]:
    """The variables a document stands for; raises :class:`InstallationError` on any problem."""
    try:
        document = parse_yaml(text, Origin.file(origin))
    except DynconfError as exc:
        raise InstallationError([f"{origin}: {exc}"]) from None
    if not document and _is_null(text):
        raise InstallationError(
            [
                f"{origin}: the document is a bare null (~), not a mapping of settings; "
                "write the settings, or leave the document empty"
            ]
        )
    problems: list[str] = []
    out: dict[str, str] = {}
    for key in sorted(document):
        value = document[key]
        if key == "endpoint":
            problems.append(
                f"{origin}: endpoint is not an installation setting — there is no fleet "
                "endpoint; set it per store under storeDefaults.<store>.endpoint"
            )
        elif key in _SCALAR_KEYS:
            text_value = _scalar(value)
            if text_value is None:
                problems.append(
                    f"{origin}: {key}: a string, number or boolean; this is {_shape(value)}"
                )
            else:
                out[_SCALAR_KEYS[key]] = text_value
        elif key == "storeDefaults":
            rendered = _store_defaults(value, problems)
            if rendered is not None:
                out[ENV.STORE_DEFAULTS] = rendered
        elif key in _GATE_KEYS:
            rendered = _gate(key, value, problems)
            if rendered is not None:
                out[_GATE_KEYS[key]] = rendered
        else:
            problems.append(
                f"{origin}: {key} is not an installation setting; the ones there are: "
                + ", ".join(DOCUMENT_KEYS)
            )
    if problems:
        raise InstallationError(problems)
    return out


def merge_environment(
    environ: Mapping[str, str], document_text: str | None, *, origin: str
) -> dict[str, str]:
    """The installation's variables: the document's rendering, overridden by real variables.

    Only ``DYNAMIC_CONFIG_*`` variables are carried; a variable set but empty counts as set.
    """
    merged = render_document(document_text, origin=origin) if document_text else {}
    merged.update(
        {name: value for name, value in environ.items() if name.startswith("DYNAMIC_CONFIG_")}
    )
    return merged
