"""Why a pod is refused, as the API server and kubectl will show it.

The reason strings are API: dashboards key on them and the metrics label them. Parser
refusals are ``DynamicConfigMalformed`` unless the message says ``the installation pins``
(then ``DynamicConfigPinned``); gates and classes are ``DynamicConfigPolicy``; a container
name the injection needs is ``DynamicConfigConflict``. Classes answer with HTTP 403, all
others with 400.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "CONFLICT",
    "MALFORMED",
    "PINNED",
    "PINS_PHRASE",
    "POLICY",
    "REASON_LABELS",
    "Refusal",
    "classify",
]

MALFORMED: Final = "DynamicConfigMalformed"
PINNED: Final = "DynamicConfigPinned"
POLICY: Final = "DynamicConfigPolicy"
CONFLICT: Final = "DynamicConfigConflict"
PINS_PHRASE: Final = "the installation pins"

REASON_LABELS: Final = {
    MALFORMED: "malformed",
    POLICY: "policy",
    PINNED: "pinned",
    CONFLICT: "conflict",
}
"""``status.reason`` → the ``reason`` label of ``dynamic_config_admission_refusals_total``."""


def classify(message: str) -> str:
    """The reason of a parser refusal, from its message (the reference's rule)."""
    return PINNED if PINS_PHRASE in message else MALFORMED


@dataclass(frozen=True)
class Refusal(Exception):
    """A pod the webhook will not admit: one sentence that names the fix, a reason, a code."""

    message: str
    reason: str = ""
    code: int = 400
    field: str | None = None
    """The annotation key refused, when one key is at fault (``dynamic-config.rs/file-mode``);
    a test or a tool compares this, never the sentence."""

    def __post_init__(self) -> None:
        if not self.reason:
            object.__setattr__(self, "reason", classify(self.message))

    def __str__(self) -> str:
        return self.message
