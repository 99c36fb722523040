"""Hook implementations for the s3 store (none yet: the store lands with its issue)."""
