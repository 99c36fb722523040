"""Hook implementations for the firestore store (none yet: the store lands with its issue)."""
