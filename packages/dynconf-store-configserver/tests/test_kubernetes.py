"""Kubernetes auth end to end: the pod's SA token as bearer, reviewed by the real API server."""

from __future__ import annotations

import json

import pytest

from dynconf.errors import AuthError

from .conftest import base_settings, client_source, get

pytestmark = [pytest.mark.configserver, pytest.mark.k8s]


@pytest.fixture(scope="module")
def reviewer_token(kube_client, mint_sa_token) -> str:
    """A service account allowed to create TokenReviews (what the server's own SA needs)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    token = mint_sa_token("config-infra", "config-server")
    binding = client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name="config-server-auth-delegator"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                                  name="system:auth-delegator"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="config-server",
                                       namespace="config-infra")],
    )  # fmt: skip
    try:
        client.RbacAuthorizationV1Api(kube_client).create_cluster_role_binding(binding)
    except ApiException as err:
        if err.status != 409:
            raise
    return token


@pytest.fixture
def kube_server(serve, config_dir, kube_control_plane, reviewer_token):
    token_path = config_dir.write("reviewer-token", reviewer_token)
    raw = base_settings(config_dir, kubernetes={
        "api_server": kube_control_plane.server, "ca": str(kube_control_plane.ca),
        "token_path": str(token_path),
        "grants": [{"service_account": "shop:billing", "applications": ["billing"]}],
    })  # fmt: skip
    return serve(raw, base=config_dir.root)


def test_granted_service_account_reads_its_application(kube_server, mint_sa_token, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(mint_sa_token("shop", "billing"))
    source = client_source(kube_server.url, auth="kubernetes", auth_token_path=str(token_file))
    assert json.loads(source.fetch().text)["db"]["host"] == "db.prod"
    # the grant is per application: shop/prod is the one 404
    other = client_source(kube_server.url, key="shop/prod", auth="kubernetes",
                          auth_token_path=str(token_file))  # fmt: skip
    assert other.fetch() is not None and not other.fetch()


def test_ungranted_or_invalid_token_is_401(kube_server, mint_sa_token, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(mint_sa_token("shop", "intruder"))
    source = client_source(kube_server.url, auth="kubernetes", auth_token_path=str(token_file))
    with pytest.raises(AuthError):
        source.fetch()
    assert get(f"{kube_server.url}/billing/prod", token="not.a.jwt")[0] == 401


def test_verdicts_are_cached(kube_server, mint_sa_token):
    token = mint_sa_token("shop", "billing")
    authenticator = kube_server.app.state.authenticator
    before = authenticator.reviews
    for _ in range(5):
        assert get(f"{kube_server.url}/billing/prod", token=token)[0] == 200
    assert authenticator.reviews == before + 1
