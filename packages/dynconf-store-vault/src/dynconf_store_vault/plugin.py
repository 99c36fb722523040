"""Hook implementations for the vault store (none yet: the store lands with its issue)."""
