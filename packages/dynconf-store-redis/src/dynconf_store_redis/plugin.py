"""Hook implementations for the redis store (none yet: the store lands with its issue)."""
