"""The operator against the real test API server, under the ServiceAccount the chart would bind.

- ``operator_crds``: the generated CRDs installed (server-side apply) and Established.
- ``operator_api``: an ``ApiClient`` authenticated as a ServiceAccount bound to a ClusterRole
  built from :data:`dynconf_k8s.operator.rbac.RULES` — so every call the operator makes must be
  granted by exactly that role, and a missing rule fails here with a 403.
- ``operator``: an in-process :class:`Operator` on that identity, stopped after the test.
- ``restarting_operator``: a factory for an :class:`Operator` with restarts on, under a second
  ServiceAccount bound to ``RULES`` + ``RESTART_RULES`` (stopped after the test).
- ``audit_kubeconfig`` / ``audit_api``: a third ServiceAccount bound to ``RULES`` +
  ``AUDIT_RULES``, the identity of an operator whose pod audit is on (the chart's default).
- ``namespace``: a fresh namespace per test, deleted afterwards.
- ``await_item`` / ``await_gone``: bounded waits on a watch (list first, then follow events).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

from dynconf_k8s.operator.crds import crd_manifests
from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.rbac import cluster_role
from dynconf_k8s.operator.restarts import RestartSettings
from dynconf_k8s.operator.types import GROUP, PLURALS, RENDER_KIND, VERSION

SYSTEM_NAMESPACE = "dynconf-operator-system"
SERVICE_ACCOUNT = "dynamic-config-operator"
ROLE = "dynconf-test-operator"


def await_item(
    list_call: Callable[..., Any],
    predicate: Callable[[dict[str, Any]], bool],
    *,
    timeout: float = 30.0,
    **kwargs: Any,
) -> dict[str, Any]:
    """The first listed or watched object satisfying ``predicate``, within ``timeout`` seconds."""
    listed = json.loads(list_call(**kwargs, _preload_content=False).data)
    for item in listed.get("items", []):
        if predicate(item):
            return item
    version = listed["metadata"]["resourceVersion"]
    stream = watch.Watch()
    for event in stream.stream(
        list_call,
        resource_version=version,
        timeout_seconds=int(timeout),
        deserialize=False,
        **kwargs,
    ):
        if event["type"] in ("ADDED", "MODIFIED") and predicate(event["object"]):
            stream.stop()
            return dict(event["object"])
    raise AssertionError(f"no object satisfied the wait within {timeout} s ({kwargs})")


def await_gone(list_call: Callable[..., Any], *, timeout: float = 60.0, **kwargs: Any) -> None:
    """Return once the listed objects are deleted (watch ``DELETED``), within ``timeout``."""
    listed = json.loads(list_call(**kwargs, _preload_content=False).data)
    remaining = {item["metadata"]["name"] for item in listed.get("items", [])}
    if not remaining:
        return
    stream = watch.Watch()
    for event in stream.stream(
        list_call,
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=int(timeout),
        deserialize=False,
        **kwargs,
    ):
        if event["type"] == "DELETED":
            remaining.discard(event["object"]["metadata"]["name"])
            if not remaining:
                stream.stop()
                return
    raise AssertionError(f"{sorted(remaining)} still exist after {timeout} s")


@pytest.fixture(scope="session")
def operator_crds(kube_client: Any) -> list[dict[str, Any]]:
    ext = client.ApiextensionsV1Api(kube_client)
    crds = crd_manifests()
    for crd in crds:
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"],
            crd,
            field_manager="dynconf-tests",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    for crd in crds:
        name = crd["metadata"]["name"]
        await_item(
            ext.list_custom_resource_definition,
            lambda item: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in ((item.get("status") or {}).get("conditions") or [])
            ),
            field_selector=f"metadata.name={name}",
        )
    return crds


def apply_role(rbac: Any, manifest: dict[str, Any]) -> None:
    """Server-side apply one ClusterRole as the tests' field manager."""
    rbac.patch_cluster_role(
        manifest["metadata"]["name"],
        manifest,
        field_manager="dynconf-tests",
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def _bound_kubeconfig(
    kube_client: Any,
    kube_control_plane: Any,
    mint_sa_token: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
    *,
    account: str,
    role: str,
    restarts: bool,
    audit: bool = False,
) -> Path:
    """A kubeconfig for ServiceAccount ``account``, bound to the ClusterRole ``role`` only."""
    token = mint_sa_token(SYSTEM_NAMESPACE, account, expiration_seconds=86400)
    rbac = client.RbacAuthorizationV1Api(kube_client)
    apply_role(rbac, cluster_role(role, restarts=restarts, audit=audit))
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": SYSTEM_NAMESPACE}],
    }
    rbac.patch_cluster_role_binding(
        role,
        binding,
        field_manager="dynconf-tests",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {
                    "server": kube_control_plane.server,
                    "certificate-authority": str(kube_control_plane.ca),
                },
            }
        ],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "test", "user": "operator"}}],
        "current-context": "operator",
    }
    path = tmp_path_factory.mktemp(account) / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="session")
def operator_kubeconfig(
    kube_client: Any,
    kube_control_plane: Any,
    mint_sa_token: Callable[..., str],
    operator_crds: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A kubeconfig for the operator's ServiceAccount, bound to the RULES ClusterRole only."""
    return _bound_kubeconfig(
        kube_client,
        kube_control_plane,
        mint_sa_token,
        tmp_path_factory,
        account=SERVICE_ACCOUNT,
        role=ROLE,
        restarts=False,
    )


def _api(kubeconfig: Path) -> Any:
    from kubernetes import config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 16
    return client.ApiClient(configuration)


@pytest.fixture(scope="session")
def operator_api(operator_kubeconfig: Path) -> Iterator[Any]:
    api = _api(operator_kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="session")
def restarts_api(
    kube_client: Any,
    kube_control_plane: Any,
    mint_sa_token: Callable[..., str],
    operator_crds: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """The operator's identity with restarts on: RULES + RESTART_RULES, nothing more."""
    kubeconfig = _bound_kubeconfig(
        kube_client,
        kube_control_plane,
        mint_sa_token,
        tmp_path_factory,
        account=f"{SERVICE_ACCOUNT}-restarts",
        role=f"{ROLE}-restarts",
        restarts=True,
    )
    api = _api(kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="session")
def audit_kubeconfig(
    kube_client: Any,
    kube_control_plane: Any,
    mint_sa_token: Callable[..., str],
    operator_crds: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The operator's identity with the pod audit on: RULES + AUDIT_RULES, nothing more."""
    return _bound_kubeconfig(
        kube_client,
        kube_control_plane,
        mint_sa_token,
        tmp_path_factory,
        account=f"{SERVICE_ACCOUNT}-audit",
        role=f"{ROLE}-audit",
        restarts=False,
        audit=True,
    )


@pytest.fixture(scope="session")
def audit_api(audit_kubeconfig: Path) -> Iterator[Any]:
    api = _api(audit_kubeconfig)
    yield api
    api.close()


class StatusGrant:
    """An operator identity whose right to write Render status the test takes and gives back.

    A refused status write is the one fault a single API server produces on demand: the
    target write before it succeeds, the status write after it does not.
    """

    def __init__(self, kube_client: Any, role: str, api: Any) -> None:
        self._rbac = client.RbacAuthorizationV1Api(kube_client)
        self._role = role
        self.api = api

    def _apply(self, *, status: bool) -> None:
        manifest = cluster_role(self._role)
        if not status:
            manifest["rules"] = [
                rule for rule in manifest["rules"] if not any(
                    resource.endswith("/status") for resource in rule["resources"]
                )
            ]  # fmt: skip
        apply_role(self._rbac, manifest)

    def revoke(self) -> None:
        self._apply(status=False)

    def grant(self) -> None:
        self._apply(status=True)


@pytest.fixture
def status_grant(
    kube_client: Any,
    kube_control_plane: Any,
    mint_sa_token: Callable[..., str],
    operator_crds: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[StatusGrant]:
    role = f"{ROLE}-status"
    kubeconfig = _bound_kubeconfig(
        kube_client,
        kube_control_plane,
        mint_sa_token,
        tmp_path_factory,
        account=f"{SERVICE_ACCOUNT}-status",
        role=role,
        restarts=False,
    )
    api = _api(kubeconfig)
    yield StatusGrant(kube_client, role, api)
    api.close()


@pytest.fixture
def restarting_operator(restarts_api: Any) -> Iterator[Callable[..., Operator]]:
    """``start(min_interval=…, settle=…)``: a running Operator with restarts on."""
    started: list[Operator] = []

    def start(min_interval: float = 60.0, settle: float = 5.0) -> Operator:
        running = Operator(
            restarts_api,
            identity="test-restarts",
            workers=2,
            restarts=RestartSettings(min_interval=min_interval, settle=settle),
        )
        running.start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture
def operator(operator_api: Any) -> Iterator[Operator]:
    running = Operator(operator_api, identity="test-operator", workers=2)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def namespace(kube_client: Any) -> Iterator[str]:
    core = client.CoreV1Api(kube_client)
    name = f"op-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


class Kube:
    """Small helpers over the admin client for building and reading test objects."""

    def __init__(self, api: Any) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def create(self, kind: str, namespace: str | None, name: str, spec: dict[str, Any]) -> None:
        plural = PLURALS[kind]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "spec": spec,
        }
        if namespace:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
        else:
            self.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    def patch_spec(self, kind: str, namespace: str | None, name: str, spec: dict[str, Any]) -> None:
        plural = PLURALS[kind]
        body = {"spec": spec}
        if namespace:
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                body,
                _content_type="application/merge-patch+json",
            )
        else:
            self.custom.patch_cluster_custom_object(
                GROUP, VERSION, plural, name, body, _content_type="application/merge-patch+json"
            )

    def await_render(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        return await_item(
            self.custom.list_namespaced_custom_object,
            predicate,
            timeout=timeout,
            group=GROUP,
            version=VERSION,
            namespace=namespace,
            plural=PLURALS[RENDER_KIND],
            field_selector=f"metadata.name={name}",
        )

    def await_configmap(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        return await_item(
            self.core.list_namespaced_config_map,
            predicate,
            timeout=timeout,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
        )

    def await_secret(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        return await_item(
            self.core.list_namespaced_secret,
            predicate,
            timeout=timeout,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
        )

    ready = staticmethod(lambda reason, status="True": ready(reason, status))

    def await_gone(self, kind: str, namespace: str, name: str, timeout: float = 60.0) -> None:
        call = (
            self.core.list_namespaced_config_map
            if kind == "ConfigMap"
            else self.core.list_namespaced_secret
        )
        await_gone(
            call, timeout=timeout, namespace=namespace, field_selector=f"metadata.name={name}"
        )

    def await_event(
        self, namespace: str, name: str, reason: str, timeout: float = 15.0
    ) -> dict[str, Any]:
        return await_item(
            self.core.list_namespaced_event,
            lambda item: item.get("reason") == reason,
            timeout=timeout,
            namespace=namespace,
            field_selector=f"involvedObject.name={name}",
        )

    def await_lease(self, namespace: str, name: str, timeout: float = 30.0) -> dict[str, Any]:
        """The Lease once somebody holds it."""
        return await_item(
            client.CoordinationV1Api(self.core.api_client).list_namespaced_lease,
            lambda item: bool((item.get("spec") or {}).get("holderIdentity")),
            timeout=timeout,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
        )

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        listed = json.loads(
            self.core.list_namespaced_event(
                namespace,
                field_selector=f"involvedObject.name={name}",
                _preload_content=False,
            ).data
        )
        return list(listed.get("items", []))


@pytest.fixture(scope="session")
def kube(kube_client: Any) -> Kube:
    return Kube(kube_client)


def ready(reason: str, status: str = "True") -> Callable[[dict[str, Any]], bool]:
    """A predicate: the Render's Ready condition has ``status`` and ``reason``."""

    def check(item: dict[str, Any]) -> bool:
        for condition in (item.get("status") or {}).get("conditions", []):
            if condition["type"] == "Ready":
                return bool(condition["status"] == status and condition["reason"] == reason)
        return False

    return check
