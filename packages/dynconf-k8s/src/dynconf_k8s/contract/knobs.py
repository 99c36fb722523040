"""Which rule checks which key, for annotations and installation tiers alike.

An installation default is validated exactly as the annotation it stands in for, so the
rule for each defaultable knob lives here once and both parsers call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from dynconf_k8s.contract.rules import (
    RuleError,
    parse_bool,
    parse_configmap_ref,
    parse_file_mode,
    parse_file_path,
    parse_mode,
    parse_port,
    parse_quantity,
    parse_secret_ref,
    parse_source,
    parse_uid,
    parse_volume_medium,
    parse_whole_seconds,
)

__all__ = ["KNOB_RULES", "check_installation_value", "nonempty"]


def nonempty(text: str) -> str:
    if not text.strip():
        raise RuleError("is empty; give a value or drop it")
    return text


KNOB_RULES: Final[Mapping[str, Callable[[str], object]]] = {
    "source": parse_source,
    "path": parse_file_path,
    "mode": parse_mode,
    "watch-seconds": parse_whole_seconds,
    "volume-medium": parse_volume_medium,
    "native-sidecar": parse_bool,
    "agent-cpu-request": parse_quantity,
    "agent-memory-request": parse_quantity,
    "agent-cpu-limit": parse_quantity,
    "agent-memory-limit": parse_quantity,
    "file-mode": parse_file_mode,
    "agent-run-as-user": parse_uid,
    "agent-run-as-group": parse_uid,
    "metrics-port": parse_port,
    "endpoint": nonempty,
    "endpoint-secret": parse_secret_ref,
    "key": nonempty,
    "token-secret": parse_secret_ref,
    "password-secret": parse_secret_ref,
    "ca-configmap": parse_configmap_ref("ca.crt"),
    "tls-secret": nonempty,
    "ssh-secret": parse_configmap_ref("ssh-privatekey"),
    "aws-secret": nonempty,
    "section": nonempty,
    "auth": nonempty,
    "auth-mount": nonempty,
    "auth-role": nonempty,
    "auth-username": nonempty,
    "auth-token-path": nonempty,
    "namespace": nonempty,
    "ref": nonempty,
    "api-url": nonempty,
    "template": nonempty,
    "template-configmap": parse_configmap_ref("template"),
}
"""Installation-tier rules by knob; annotations of the same name use the same rule."""


def check_installation_value(knob: str, text: str) -> str | None:
    """The rule a tier value breaks, or ``None``."""
    rule = KNOB_RULES.get(knob, nonempty)
    try:
        rule(text)
    except RuleError as exc:
        return str(exc)
    return None
