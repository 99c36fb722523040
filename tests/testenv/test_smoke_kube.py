"""Smoke tests proving the Kubernetes control-plane fixtures give a real, usable apiserver."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client, watch  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from tests.fixtures.kube import KubeControlPlane

pytestmark = pytest.mark.k8s


def _namespace(core: Any) -> str:
    """A fresh namespace, so repeated runs against one control plane never collide."""
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def test_configmap_written_is_read_back(kube_client: object) -> None:
    core = client.CoreV1Api(kube_client)
    namespace = _namespace(core)
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="app"), data={"config.toml": "port = 9000\n"}
    )
    core.create_namespaced_config_map(namespace, body)

    read = core.read_namespaced_config_map("app", namespace)

    assert read.data == {"config.toml": "port = 9000\n"}
    assert read.metadata.uid


def test_minted_token_is_authenticated_by_token_review(
    kube_client: object,
    kube_control_plane: KubeControlPlane,
    mint_sa_token: Callable[..., str],
) -> None:
    token = mint_sa_token("smoke-sa", "app")
    review = client.AuthenticationV1Api(kube_client).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    )

    assert review.status.authenticated is True
    assert review.status.user.username == "system:serviceaccount:smoke-sa:app"
    assert kube_control_plane.sa_issuer in review.status.audiences


def test_token_for_another_audience_is_rejected_by_default_review(
    kube_client: object, mint_sa_token: Callable[..., str]
) -> None:
    token = mint_sa_token("smoke-sa", "app", audiences=["vault"])
    api = client.AuthenticationV1Api(kube_client)

    default = api.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    )
    vault = api.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=["vault"]))
    )

    assert default.status.authenticated is not True
    assert vault.status.authenticated is True


def test_rbac_denies_a_service_account_without_roles(
    kube_control_plane: KubeControlPlane, mint_sa_token: Callable[..., str]
) -> None:
    token = mint_sa_token("smoke-rbac", "nobody")
    configuration = client.Configuration()
    configuration.host = kube_control_plane.server
    configuration.ssl_ca_cert = str(kube_control_plane.ca)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(configuration) as as_nobody, pytest.raises(ApiException) as denied:
        client.CoreV1Api(as_nobody).list_namespaced_config_map("smoke-rbac")

    assert denied.value.status == 403


def test_owned_configmap_is_garbage_collected_after_its_owner(
    kube_client: object, kube_control_plane: KubeControlPlane
) -> None:
    if not kube_control_plane.controller_manager:
        pytest.skip("kube-controller-manager is not running (no garbage collector)")
    core = client.CoreV1Api(kube_client)
    namespace = _namespace(core)
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    reference = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="owned", owner_references=[reference])
        ),
    )

    listed = core.list_namespaced_config_map(namespace)

    core.delete_namespaced_config_map("owner", namespace)

    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        namespace,
        field_selector="metadata.name=owned",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=60,
    )
    deleted = any(event["type"] == "DELETED" for event in stream)
    assert deleted, "the owned ConfigMap still exists 60 s after its owner was deleted"


def test_deleted_namespace_is_finalized_by_the_namespace_controller(
    kube_client: object, kube_control_plane: KubeControlPlane
) -> None:
    if not kube_control_plane.controller_manager:
        pytest.skip("kube-controller-manager is not running (no namespace controller)")
    core = client.CoreV1Api(kube_client)
    namespace = _namespace(core)
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="content"))
    )
    listed = core.list_namespace(field_selector=f"metadata.name={namespace}")

    core.delete_namespace(namespace)

    stream = watch.Watch().stream(
        core.list_namespace,
        field_selector=f"metadata.name={namespace}",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=60,
    )
    deleted = any(event["type"] == "DELETED" for event in stream)
    assert deleted, f"namespace {namespace} still exists 60 s after it was deleted"
