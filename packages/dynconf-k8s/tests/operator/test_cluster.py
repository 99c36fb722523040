"""The operator's API calls hand their connection back: a Render's four calls share one.

Every write in :class:`~dynconf_k8s.operator.cluster.Cluster` asks for its answer unparsed
(``_preload_content=False``). An answer left unread keeps its connection out of urllib3's pool,
so the next call opens a new TLS connection; at 5,000 Renders that was most of the cold start.
This counts the connections the pool opened while a reconcile ran against the real API server.
"""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes import client, config  # type: ignore[import-untyped]

from dynconf_k8s.operator.cluster import Cluster
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.reconcile import Reconciler
from dynconf_k8s.operator.types import GROUP, PLURALS, RENDER_KIND, VERSION

from .conftest import Kube, ready
from .test_reconcile import write_doc
from .test_tracing import Classes


def test_a_renders_four_calls_reuse_one_connection(
    operator_kubeconfig: Path, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    write_doc(tmp_path, {"port": 9000})
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(operator_kubeconfig), client_configuration=configuration
    )
    api = client.ApiClient(configuration)
    try:
        reconciler = Reconciler(Cluster(api), Classes(tmp_path), OperatorMetrics())
        names = [f"r{index}" for index in range(3)]
        for name in names:
            kube.create(RENDER_KIND, namespace, name, {
                "class": "files", "key": "app/config.json", "intervalSeconds": 60,
                "target": {"configMap": f"{name}-out", "file": "config.json"},
            })  # fmt: skip
        for name in names:
            raw = kube.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURALS[RENDER_KIND], name
            )
            # a first render: the target read (absent), its apply, the status, the Event
            assert reconciler.reconcile(raw) == 60.0
        pool = api.rest_client.pool_manager.connection_from_url(configuration.host)
        assert pool.num_connections == 1
        for name in names:
            kube.await_render(namespace, name, ready("Rendered"))
            target = kube.core.read_namespaced_config_map(f"{name}-out", namespace)
            assert json.loads(target.data["config.json"]) == {"port": 9000}
    finally:
        api.close()
