"""Builders for pods, reviews and installations, shared by the webhook tests."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from dynconf_k8s.contract import Installation, parse_installation
from dynconf_k8s.webhook.admission import Decision, decide
from tests.fixtures.kube import await_webhook_called

CANONICAL = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
    "dynamic-config.rs/mode": "sidecar",
}


def _make_pod(annotations: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod with one container ``app`` unless ``containers`` is given."""
    body: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox"}]}
    body.update(spec)
    metadata: dict[str, Any] = {"name": "app"}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def _judge(
    pod: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    namespace: str = "default",
    installation: Installation | None = None,
) -> Decision:
    inst = installation or parse_installation(dict(env or {}))
    review = {"request": {"uid": "test-uid", "namespace": namespace, "object": pod}}
    return decide(review, inst)


def _ops_of(decision: Decision) -> list[dict[str, Any]]:
    patch = decision.response["response"]["patch"]
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(patch))
    return ops


def _added(decision: Decision, name: str) -> dict[str, Any]:
    """The injected container called ``name``."""
    for op in _ops_of(decision):
        value = op.get("value")
        if isinstance(value, dict) and value.get("name") == name and "args" in value:
            return value
    raise AssertionError(f"no injected container {name}")


@pytest.fixture
def canonical() -> dict[str, str]:
    return dict(CANONICAL)


@pytest.fixture
def pod_with() -> Callable[..., dict[str, Any]]:
    def build(
        extra: Mapping[str, str] | None = None, drop: tuple[str, ...] = (), **spec: Any
    ) -> dict[str, Any]:
        annotations = {k: v for k, v in CANONICAL.items() if k.rsplit("/", 1)[1] not in drop}
        annotations.update(
            {f"dynamic-config.rs/{k}" if "/" not in k else k: v for k, v in (extra or {}).items()}
        )
        return _make_pod(annotations, **spec)

    return build


@pytest.fixture
def make_pod() -> Callable[..., dict[str, Any]]:
    return _make_pod


@pytest.fixture
def judge() -> Callable[..., Decision]:
    return _judge


@pytest.fixture
def ops_of() -> Callable[[Decision], list[dict[str, Any]]]:
    return _ops_of


@pytest.fixture
def added() -> Callable[[Decision, str], dict[str, Any]]:
    return _added


def _apply_patch(document: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply add/replace/remove ops (the subset the webhook emits) to a copy."""
    import copy

    doc = copy.deepcopy(document)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif isinstance(parent, list):
            if last == "-":
                parent.append(op["value"])
            else:
                parent.insert(int(last), op["value"])
        else:
            parent[last] = op["value"]
    return doc


@pytest.fixture
def apply_patch() -> Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, Any]]:
    return _apply_patch


def mint_pair(directory: Any, name: str = "tls") -> tuple[str, str, str]:
    """A fresh CA and a leaf for 127.0.0.1/localhost: ``(ca_pem_path, cert_path, key_path)``."""
    from pathlib import Path

    from tests.fixtures.certs import Authority

    authority = Authority("dynamic-config-webhook-ca")
    leaf = authority.issue("127.0.0.1", ["localhost", "127.0.0.1"])
    d = Path(directory)
    (d / f"{name}-ca.crt").write_bytes(authority.cert_pem())
    leaf.write(d / f"{name}.crt", d / f"{name}.key")
    return str(d / f"{name}-ca.crt"), str(d / f"{name}.crt"), str(d / f"{name}.key")


def free_port() -> int:
    """A loopback port nobody listens on now (for a configuration written before its server)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RunningWebhook:
    """A webhook served over TLS on 127.0.0.1 in a thread (the real uvicorn + starlette app).

    ``pair`` serves an existing ``(ca, cert, key)`` instead of a freshly minted one;
    ``reload_every`` re-reads it from disk as ``serve`` does, setting :attr:`reloaded` each time
    a renewed pair is taken up. ``installation`` is a live holder admission reads per review;
    ``synced`` holds ``/readyz`` until it is set.
    ``host`` listens elsewhere than loopback (an Endpoints object,
    which the API server's service proxy follows, may not name a loopback address).
    """

    def __init__(
        self,
        settings: Any,
        tmp: Any,
        *,
        classes: Any = None,
        pair: tuple[str, str, str] | None = None,
        port: int | None = None,
        reload_every: float | None = None,
        host: str = "127.0.0.1",
        installation: Any = None,
        synced: Any = None,
    ) -> None:
        import threading

        import uvicorn

        from dynconf_k8s.webhook.metrics import WebhookMetrics
        from dynconf_k8s.webhook.server import _Server, create_app
        from dynconf_k8s.webhook.tls import ServingTls

        self.ca, cert, key = pair or mint_pair(tmp)
        self.tls = ServingTls(cert, key)
        self.metrics = WebhookMetrics()
        app = create_app(
            settings,
            metrics=self.metrics,
            tls=self.tls,
            classes=classes,
            installation=installation,
            synced=synced,
        )
        self.port = port or free_port()
        config = uvicorn.Config(
            app,
            host=host,
            port=self.port,
            log_config=None,
            access_log=False,
            ssl_context_factory=lambda _c, _d: self.tls.context,
            ssl_certfile=cert,
        )
        self.server = _Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.reloaded = threading.Event()
        self._halt = threading.Event()
        self._reloader: threading.Thread | None = None
        if reload_every:
            self._reloader = threading.Thread(
                target=self._reload, args=(reload_every,), daemon=True
            )
            self._reloader.start()
        import time

        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    def _reload(self, every: float) -> None:
        while not self._halt.wait(every):
            if self.tls.reload():
                self.reloaded.set()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._halt.set()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        if self._reloader is not None:
            self._reloader.join(timeout=10)


@pytest.fixture
def running_webhook(tmp_path: Any) -> Any:
    started: list[RunningWebhook] = []

    def start(settings: Any, **options: Any) -> RunningWebhook:
        hook = RunningWebhook(settings, tmp_path, **options)
        started.append(hook)
        return hook

    yield start
    for hook in started:
        hook.stop()


@pytest.fixture
def cluster(kube_client: Any) -> Any:
    """Namespaces and MutatingWebhookConfigurations made for one test, removed after it."""
    import base64
    import uuid
    from pathlib import Path

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(kube_client)
    admission = client.AdmissionregistrationV1Api(kube_client)
    made: list[tuple[str, Any]] = []
    probe_in: dict[str, str] = {}
    """label -> a namespace this test made with it (not excluded), to probe registrations in."""

    class Cluster:
        core_api = core
        apps = client.AppsV1Api(kube_client)

        def namespace(self, label: str, extra_labels: dict | None = None) -> str:
            name = f"wh-{uuid.uuid4().hex[:8]}"
            labels = {"dynconf-test": label, **(extra_labels or {})}
            core.create_namespace({"metadata": {"name": name, "labels": labels}})
            try:
                core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
            except ApiException as err:
                if err.status != 409:
                    raise
            made.append(("ns", name))
            if "dynamic-config.rs/exclude" not in labels:
                probe_in.setdefault(label, name)
            return name

        def register(
            self,
            hook,
            label: str,
            failure_policy: str = "Fail",
            port: int | None = None,
            await_called: bool = True,
        ) -> str:
            """Register ``hook`` for namespaces labelled ``label``; return once it is called.

            ``await_called=False`` for a configuration nothing can observe being taken up (one
            that fails open on an unreachable webhook); awaiting one registered after it covers
            it, as the API server takes configurations up in order.
            """
            name = f"wh-{uuid.uuid4().hex[:8]}.dynamic-config.rs"
            ca = base64.b64encode(Path(hook.ca).read_bytes()).decode()
            admission.create_mutating_webhook_configuration(
                {
                    "metadata": {"name": name},
                    "webhooks": [
                        {
                            "name": "inject.dynamic-config.rs",
                            "admissionReviewVersions": ["v1"],
                            "sideEffects": "None",
                            "failurePolicy": failure_policy,
                            "reinvocationPolicy": "IfNeeded",
                            "timeoutSeconds": 5,
                            "clientConfig": {
                                "url": f"https://127.0.0.1:{port or hook.port}/mutate",
                                "caBundle": ca,
                            },
                            "rules": [
                                {
                                    "operations": ["CREATE"],
                                    "apiGroups": [""],
                                    "apiVersions": ["v1"],
                                    "resources": ["pods"],
                                }
                            ],
                            "namespaceSelector": {
                                "matchLabels": {"dynconf-test": label},
                                "matchExpressions": [
                                    {"key": "dynamic-config.rs/exclude", "operator": "DoesNotExist"}
                                ],
                            },
                        }
                    ],
                }
            )
            made.append(("mwc", name))
            if await_called:
                namespace = probe_in.get(label) or self.namespace(label)
                probe = {
                    "metadata": {"name": "probe", "annotations": CANONICAL},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "containers": [{"name": "app", "image": "busybox"}],
                    },
                }
                await_webhook_called(core, namespace, probe)
            return name

        def on_teardown(self, undo: Any) -> None:
            """Run ``undo()`` when the test ends (before earlier-made namespaces go)."""
            made.append(("call", undo))

        def create_pod(self, namespace: str, annotations: dict | None, name: str = "app"):
            body = {
                "metadata": {"name": name, "annotations": annotations or {}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "1d"]}],
                },
            }
            return core.create_namespaced_pod(namespace, body)

    yield Cluster()
    for kind, name in reversed(made):
        try:
            if kind == "call":
                name()
            elif kind == "mwc":
                admission.delete_mutating_webhook_configuration(name)
            else:
                core.delete_namespace(name)
        except ApiException:
            pass
