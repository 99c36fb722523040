"""The s3 store for dynconf (skeleton: the store lands with its issue)."""
