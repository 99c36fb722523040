"""Kubernetes auth against the test apiserver's TokenReview."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from vault_testlib import SpecFactory

from dynconf.errors import AuthError
from dynconf.stores import Fetched
from dynconf_store_vault import VAULT_STORE

pytestmark = [pytest.mark.vault, pytest.mark.k8s]


@pytest.fixture(scope="module")
def reviewer_token(kube_control_plane: Any, kube_client: Any, mint_sa_token: Any) -> str:
    """A token of a ServiceAccount bound to system:auth-delegator (may call TokenReview)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    token = mint_sa_token("vault-auth", "vault-reviewer")
    binding = client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name="dynconf-vault-reviewer"),
        role_ref=client.V1RoleRef(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="system:auth-delegator"
        ),
        subjects=[
            client.RbacV1Subject(
                kind="ServiceAccount", name="vault-reviewer", namespace="vault-auth"
            )
        ],
    )
    try:
        client.RbacAuthorizationV1Api(kube_client).create_cluster_role_binding(binding)
    except ApiException as err:
        if err.status != 409:
            raise
    return str(token)


@pytest.fixture
def kubernetes_mount(
    vault_server: Any,
    kube_control_plane: Any,
    reviewer_token: str,
    enabled_auth: Any,
    read_policy: str,
) -> str:
    mount = enabled_auth("kubernetes")
    client = vault_server.client
    client.write(
        f"auth/{mount}/config",
        kubernetes_host=kube_control_plane.server,
        kubernetes_ca_cert=Path(kube_control_plane.ca).read_text(),
        token_reviewer_jwt=reviewer_token,
    )
    client.write(
        f"auth/{mount}/role/myapp",
        bound_service_account_names=["billing"],
        bound_service_account_namespaces=["shop"],
        token_policies=[read_policy],
        token_ttl="1h",
    )
    return mount


def test_kubernetes_login_with_the_pods_service_account_token(
    vault_server: Any,
    spec_for: SpecFactory,
    kubernetes_mount: str,
    mint_sa_token: Any,
    name: str,
    tmp_path: Path,
) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(name, secret={"owner": name})
    token_file = tmp_path / "token"
    token_file.write_text(mint_sa_token("shop", "billing"))
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="kubernetes",
            auth_mount=kubernetes_mount,
            auth_role="myapp",
            auth_token_path=str(token_file),
        )
    )
    answer = source.fetch()
    assert isinstance(answer, Fetched) and json.loads(answer.text) == {"owner": name}


def test_service_account_token_is_re_read_at_every_login(
    vault_server: Any,
    spec_for: SpecFactory,
    kubernetes_mount: str,
    mint_sa_token: Any,
    name: str,
    tmp_path: Path,
) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(name, secret={"owner": name})
    token_file = tmp_path / "token"
    token_file.write_text(mint_sa_token("shop", "billing"))
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="kubernetes",
            auth_mount=kubernetes_mount,
            auth_role="myapp",
            auth_token_path=str(token_file),
        )
    )
    assert isinstance(source.fetch(), Fetched)
    # the kubelet rotates the projected file; here it now holds an unbound account's token
    token_file.write_text(mint_sa_token("shop", f"other-{uuid.uuid4().hex[:6]}"))
    vault_server.client.sys.revoke_prefix(f"auth/{kubernetes_mount}/login")
    with pytest.raises(AuthError, match="refused the kubernetes login"):
        source.fetch()
    assert source.keeper.login_attempts == 2


def test_kubernetes_defaults_to_the_pod_token_path(spec_for: SpecFactory, name: str) -> None:
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="kubernetes", auth_role="myapp"))
    with pytest.raises(AuthError, match=r"/var/run/secrets/kubernetes\.io/serviceaccount/token"):
        source.fetch()
