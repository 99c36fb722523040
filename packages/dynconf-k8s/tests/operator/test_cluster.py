"""The operator's API calls hand their connection back: a Render's four calls share one.

Every write in :class:`~dynconf_k8s.operator.cluster.Cluster` asks for its answer unparsed
(``_preload_content=False``). An answer left unread keeps its connection out of urllib3's pool,
so the next call opens a new TLS connection; at 5,000 Renders that was most of the cold start.
This counts the connections the pool opened while a reconcile ran against the real API server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def test_a_call_to_an_api_server_that_never_answers_ends(tmp_path: Path, monkeypatch: Any) -> None:
    """A server that accepts and then says nothing: a fault a real API server cannot be made to
    show on demand. The operator's client gives up after its read bound instead of waiting."""
    import socket
    import time

    import pytest
    from urllib3.exceptions import HTTPError

    from dynconf_k8s.operator import main

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "s", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "s", "user": "u"}}],
        }))  # fmt: skip
        monkeypatch.setattr(config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.setattr(main, "REQUEST_TIMEOUT", (1.0, 1.0))
        api = main.api_client_from_environment()
        api.configuration.retries = False
        began = time.monotonic()
        with pytest.raises(HTTPError):
            client.CoreV1Api(api).list_namespace()
        assert time.monotonic() - began < 10
        api.close()
