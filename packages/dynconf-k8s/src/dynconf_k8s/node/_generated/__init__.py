"""Generated CSI messages; see scripts/gen-csi-proto."""
