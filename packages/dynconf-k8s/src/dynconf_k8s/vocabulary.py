"""Words of the contract that the agent, the webhook and the operator all speak.

A leaf module (it imports nothing of ours), so the agent's flag parser and the webhook's
annotation parser read the same tuples without importing each other.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ON_DELETE", "ON_DRIFT", "STARTUP_POLICIES", "STORES"]

STORES: Final = (
    "consul",
    "vault",
    "config-server",
    "firestore",
    "git",
    "redis",
    "etcd",
    "nats",
    "s3",
)
"""The nine stores, in the contract's order (refusals list them this way). The agent accepts
``file`` (embedded) besides, and any store the loaded plugin lock carries."""

STARTUP_POLICIES: Final = ("allow-cached", "require-fresh", "best-effort")
"""``--startup-policy`` / ``startup-policy``: what a failed first fetch does."""
ON_DELETE: Final = ("retain", "remove", "fail")
"""``--on-delete`` / ``on-delete``: what a document gone from the store does."""
ON_DRIFT: Final = ("warn", "repair", "fail")
"""``--on-drift`` / ``on-drift``: what a rendered file changed by something else does."""
