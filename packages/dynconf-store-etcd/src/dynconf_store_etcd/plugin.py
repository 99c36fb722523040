"""Hook implementations for the etcd store (none yet: the store lands with its issue)."""
