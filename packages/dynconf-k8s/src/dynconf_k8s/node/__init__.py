"""``dynamic-config-node-agent``: a CSI node plugin sharing one fetch and one watch per document.

Pods on a node that read the same document from the same store under the same credential share
one store client, one fetch and one watch; each pod still gets its own file, format, section and
mode in its own inline CSI volume (driver ``config.dynamic-config.rs``). :mod:`.attributes`
turns a volume into a reader, :mod:`.shared` keeps the documents and their watches,
:mod:`.records` remembers volumes across restarts, :mod:`.service` is the CSI Identity and Node
services, :mod:`.metrics` the two gauges and probes, :mod:`.main` the process. The render path
is the sidecar's own (``dynconf.pipeline``), called as a library.
"""

from dynconf_k8s.node.attributes import DocumentKey, VolumeRefused, VolumeSpec, parse_volume
from dynconf_k8s.node.service import DRIVER_NAME, NodeAgent, NodeSettings
from dynconf_k8s.node.shared import Documents

__all__ = [
    "DRIVER_NAME",
    "DocumentKey",
    "Documents",
    "NodeAgent",
    "NodeSettings",
    "VolumeRefused",
    "VolumeSpec",
    "parse_volume",
]
