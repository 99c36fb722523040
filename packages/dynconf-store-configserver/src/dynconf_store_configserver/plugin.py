"""Hook implementations for the configserver store (none yet: the store lands with its issue)."""
