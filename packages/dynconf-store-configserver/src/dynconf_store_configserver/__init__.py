"""The configserver store for dynconf (skeleton: the store lands with its issue)."""
