"""Hook implementations for the nats store (none yet: the store lands with its issue)."""
