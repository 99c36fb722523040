"""Hook implementations for the git store (none yet: the store lands with its issue)."""
