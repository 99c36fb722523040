"""Generated CSI and plugin-registration messages; see scripts/gen-csi-proto."""
