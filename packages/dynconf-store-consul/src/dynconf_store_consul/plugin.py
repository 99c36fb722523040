"""Hook implementations for the consul store (none yet: the store lands with its issue)."""
