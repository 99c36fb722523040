"""``--auth kubernetes``: log in to a Consul kubernetes auth method with the pod's SA JWT.

Consul (ACLs on) validates the JWT against the real test apiserver's TokenReview, using a
reviewer service account, and reads the ServiceAccount object; the binding rule grants a
reader role to service accounts of one namespace.
"""

from __future__ import annotations

import json
import uuid

import pytest

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import Fetched

pytestmark = [pytest.mark.consul, pytest.mark.k8s]

NAMESPACE = "consul-login"


@pytest.fixture(scope="module")
def k8s_method(acl_consul, kube_control_plane, kube_client, mint_sa_token):
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(kube_client)
    reviewer = mint_sa_token("consul-system", "consul-reviewer")
    subject = client.RbacV1Subject(kind="ServiceAccount", name="consul-reviewer",
                                   namespace="consul-system")  # fmt: skip
    role_name = f"consul-sa-reader-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role(client.V1ClusterRole(
        metadata=client.V1ObjectMeta(name=role_name),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["serviceaccounts"],
                                   verbs=["get"])],
    ))  # fmt: skip
    for name, role in (("consul-auth-delegator", "system:auth-delegator"),
                       ("consul-sa-reader", role_name)):  # fmt: skip
        rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=f"{name}-{uuid.uuid4().hex[:6]}"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                                      name=role),
            subjects=[subject],
        ))  # fmt: skip
    acl_consul.reader_policy("k8s-reader", "k8s/")
    acl_consul.admin("PUT", "/v1/acl/auth-method", {
        "Name": "k8s-pods", "Type": "kubernetes", "MaxTokenTTL": "10m",
        "Config": {"Host": kube_control_plane.server,
                   "CACert": kube_control_plane.ca.read_text(),
                   "ServiceAccountJWT": reviewer},
    })  # fmt: skip
    acl_consul.admin("PUT", "/v1/acl/binding-rule", {
        "AuthMethod": "k8s-pods", "BindType": "role", "BindName": "k8s-reader",
        "Selector": f'serviceaccount.namespace=="{NAMESPACE}"',
    })  # fmt: skip
    acl_consul.put("k8s/app/config.json", '{"from": "consul"}')
    return {"key": "k8s/app/config.json", "reviewer": reviewer}


def test_pod_identity_login_reads_the_key(acl_consul, k8s_method, mint_sa_token, make_source,
                                          tmp_path):  # fmt: skip
    token_file = tmp_path / "token"
    token_file.write_text(mint_sa_token(NAMESPACE, "billing") + "\n")
    source = make_source(acl_consul.url, k8s_method["key"], auth="kubernetes",
                         auth_mount="k8s-pods", auth_token_path=str(token_file))  # fmt: skip
    answer = source.fetch()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"from": "consul"}


def test_service_account_file_is_reread_at_every_login(acl_consul, k8s_method, mint_sa_token,
                                                       make_source, tmp_path):  # fmt: skip
    token_file = tmp_path / "token"
    token_file.write_text(mint_sa_token(NAMESPACE, "billing"))
    source = make_source(acl_consul.url, k8s_method["key"], auth="kubernetes",
                         auth_mount="k8s-pods", auth_token_path=str(token_file))  # fmt: skip
    assert isinstance(source.fetch(), Fetched)
    # the kubelet rotates the projected token: the next login must send the new one
    token_file.write_text(mint_sa_token("other-namespace", "intruder"))
    source.credential.invalidate()
    with pytest.raises(AuthError):
        source.fetch()  # the binding rule does not match the other namespace: nothing granted
    token_file.write_text(mint_sa_token(NAMESPACE, "billing"))
    source.credential.invalidate()
    assert isinstance(source.fetch(), Fetched)


def test_missing_token_file_is_reported_naming_the_flag(acl_consul, k8s_method, make_source,
                                                         tmp_path):  # fmt: skip
    source = make_source(acl_consul.url, k8s_method["key"], auth="kubernetes",
                         auth_mount="k8s-pods", auth_token_path=str(tmp_path / "nope"))  # fmt: skip
    with pytest.raises(RemoteError, match="--auth-token-path"):
        source.fetch()


def test_sa_jwt_never_appears_in_errors_or_logs(acl_consul, k8s_method, mint_sa_token,
                                                make_source, tmp_path, caplog):  # fmt: skip
    bearer = mint_sa_token("other-namespace", "intruder")
    caplog.set_level("DEBUG")
    caplog.clear()  # the minting client's own debug lines are the test's, not the store's
    token_file = tmp_path / "token"
    token_file.write_text(bearer)
    source = make_source(acl_consul.url, k8s_method["key"], auth="kubernetes",
                         auth_mount="k8s-pods", auth_token_path=str(token_file))  # fmt: skip
    with pytest.raises(AuthError) as caught:
        source.fetch()
    blob = "\n".join([str(caught.value), repr(source.credential), source.describe()]
                     + [r.getMessage() + repr(r.__dict__) for r in caplog.records])  # fmt: skip
    assert bearer not in blob
    assert k8s_method["reviewer"] not in blob
