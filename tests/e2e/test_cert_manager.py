"""The chart's cert-manager TLS mode on the node, with a real cert-manager.

cert-manager (built from its published module: its CRDs, the Certificate and issuer
controllers, the approver, the CA signer and CA injection) runs beside the control plane with
the node's kubeconfig. A self-signed ClusterIssuer signs a CA, a CA ClusterIssuer signs the
webhook's certificate: the chain a platform team uses, where a renewal keeps the CA and only
the serving leaf changes.

A release of its own (``dynconf-certmanager``) with ``webhook.certManager`` and
``failurePolicy: Fail`` selects only pods labelled for this leg. The leg proves that cert-manager
issues the Secret the webhook serves, cainjector puts the CA into the webhook configuration, the
apiserver then trusts the webhook (an annotated pod is injected), and a renewal reaches the
serving pair with no admission refused on the way.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.conftest import PROBE, InstallChart, Release
from tests.fixtures.node import KubeNode
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e

LABEL = {"dynconf-e2e/release": "certmanager"}
CLUSTER_NAMESPACE = "cert-manager"
"""Where ClusterIssuers read their Secrets (the CA's key pair)."""
SELF_SIGNED = "dynconf-e2e-selfsigned"
CA = "dynconf-e2e-ca"
GROUP, VERSION = "cert-manager.io", "v1"
RENEWAL_BOUND = 240.0
"""Seconds from a renewal to every replica serving the new leaf: the kubelet's Secret sync
(up to about a minute) plus the webhook's 60 s reload, with room for a loaded node."""


def _apply_crds(api_client: object, crds: Path) -> list[str]:
    extensions = client.ApiextensionsV1Api(api_client)
    names = []
    for path in sorted(crds.glob("*.yaml")):
        for body in yaml.safe_load_all(path.read_text()):
            if not body:
                continue
            names.append(body["metadata"]["name"])
            with contextlib.suppress(client.ApiException):  # left by an interrupted session
                extensions.delete_custom_resource_definition(body["metadata"]["name"])
            _until(lambda n=body["metadata"]["name"]: _crd_gone(extensions, n), "old CRD gone")
            extensions.create_custom_resource_definition(body)
    for name in names:
        _until(lambda n=name: _crd_established(extensions, n), f"CRD {name} established")
    return names


def _crd_gone(extensions: Any, name: str) -> bool:
    try:
        extensions.read_custom_resource_definition(name)
    except client.ApiException as err:
        return bool(err.status == 404)
    return False


def _crd_established(extensions: Any, name: str) -> bool:
    crd = extensions.read_custom_resource_definition(name)
    return any(
        c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])
    )


def _until(check: Any, what: str, timeout: float = 120, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(every)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for condition in obj.get("status", {}).get("conditions", []):
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


@pytest.fixture(scope="module")
def cert_manager(
    kube_node: KubeNode,
    kube_node_client: object,
    cert_manager_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """cert-manager running against the node, with the CA ClusterIssuer Ready."""
    crds = _apply_crds(kube_node_client, cert_manager_bin.resolve().parent / "crds")
    core = client.CoreV1Api(kube_node_client)
    custom = client.CustomObjectsApi(kube_node_client)
    with contextlib.suppress(client.ApiException):
        core.create_namespace({"metadata": {"name": CLUSTER_NAMESPACE}})
    log_path = tmp_path_factory.mktemp("cert-manager") / "cert-manager.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(cert_manager_bin), "--kubeconfig", str(kube_node.plane.kubeconfig),
             "--cluster-resource-namespace", CLUSTER_NAMESPACE],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        issuers = [
            {"metadata": {"name": SELF_SIGNED}, "spec": {"selfSigned": {}}},
            {"metadata": {"name": CA}, "spec": {"ca": {"secretName": CA}}},
        ]
        custom.create_namespaced_custom_object(GROUP, VERSION, CLUSTER_NAMESPACE, "certificates", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Certificate",
            "metadata": {"name": CA},
            "spec": {"isCA": True, "commonName": "dynconf e2e CA", "secretName": CA,
                     "privateKey": {"algorithm": "ECDSA", "size": 256},
                     "issuerRef": {"name": SELF_SIGNED, "kind": "ClusterIssuer", "group": GROUP}},
        })  # fmt: skip
        for issuer in issuers:
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterIssuer", **issuer}
            custom.create_cluster_custom_object(GROUP, VERSION, "clusterissuers", body)

        def ca_ready() -> bool:
            assert process.poll() is None, f"cert-manager exited: {log_path.read_text()[-2000:]}"
            issuer = custom.get_cluster_custom_object(GROUP, VERSION, "clusterissuers", CA)
            return _condition(issuer, "Ready") == "True"

        try:
            _until(ca_ready, "the CA ClusterIssuer Ready", timeout=180)
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{log_path.read_text()[-3000:]}") from None
        yield custom
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        extensions = client.ApiextensionsV1Api(kube_node_client)
        for name in crds:  # their objects go with them
            with contextlib.suppress(client.ApiException):
                extensions.delete_custom_resource_definition(name)
        with contextlib.suppress(client.ApiException):
            core.delete_namespace(CLUSTER_NAMESPACE)
        for name in crds:
            _until(lambda n=name: _crd_gone(extensions, n), f"CRD {name} removed")


@pytest.fixture(scope="module")
def issued(cert_manager: Any, install_chart: InstallChart) -> Iterator[tuple[Release, str]]:
    values = {
        "webhook": {
            "replicas": 2,
            "failurePolicy": "Fail",
            "objectSelector": {"matchLabels": LABEL},
            "certManager": {"enabled": True, "issuerRef": {"name": CA, "kind": "ClusterIssuer"}},
        }
    }
    with install_chart("dynconf-certmanager", values) as release:
        namespace = release.injecting_namespace()
        try:
            release.await_injection(namespace, LABEL, timeout=180)
        except AssertionError as failure:
            tls = _secret(release, f"{release.fullname}-webhook-tls", release.namespace)
            raise AssertionError(
                f"{failure}\ncaBundle: {len(_ca_bundle(release))} bytes; "
                f"serving Secret keys: {sorted(tls)}; ca.crt {len(tls.get('ca.crt', b''))} bytes"
            ) from None
        yield release, namespace


def _ca_bundle(release: Release) -> bytes:
    admission = client.AdmissionregistrationV1Api(release.api_client)
    mwc = admission.read_mutating_webhook_configuration(release.fullname)
    return base64.b64decode(mwc.webhooks[0].client_config.ca_bundle or "")


def _secret(release: Release, name: str, namespace: str) -> dict[str, bytes]:
    data = release.core.read_namespaced_secret(name, namespace).data or {}
    return {key: base64.b64decode(value) for key, value in data.items()}


def _admit(release: Release, namespace: str) -> str | None:
    """One annotated pod, dry run: None when it was injected, else why not."""
    probe = {
        "metadata": {"name": "renewal-probe", "labels": LABEL,
                     "annotations": {f"dynamic-config.rs/{k}": v for k, v in PROBE.items()}},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX}]},
    }  # fmt: skip
    try:
        made = release.core.create_namespaced_pod(namespace, probe, dry_run="All")
    except client.ApiException as err:
        return str(err.body)[-300:]
    if any(c.name == "dynamic-config-agent" for c in made.spec.containers):
        return None
    return "admitted without its agent"


def test_cert_manager_issues_the_pair_and_injects_its_ca(
    issued: tuple[Release, str],
) -> None:
    release, namespace = issued
    webhook_tls = _secret(release, f"{release.fullname}-webhook-tls", release.namespace)
    ca = _secret(release, CA, CLUSTER_NAMESPACE)
    annotations = release.core.read_namespaced_secret(
        f"{release.fullname}-webhook-tls", release.namespace
    ).metadata.annotations
    assert annotations.get("cert-manager.io/issuer-name") == CA
    assert webhook_tls["ca.crt"] == ca["tls.crt"]
    assert _ca_bundle(release) == ca["tls.crt"]
    assert _admit(release, namespace) is None


def test_a_renewal_reaches_every_replica_with_nothing_refused(
    issued: tuple[Release, str], cert_manager: Any
) -> None:
    release, namespace = issued
    custom = cert_manager
    name = f"{release.fullname}-webhook"
    bundle, served = _ca_bundle(release), release.serving_expiries()
    assert len(served) == 2, served
    time.sleep(1.5)  # the renewed leaf's not-after then differs by at least a second
    # what `cmctl renew` does: ask for issuance through the Certificate's Issuing condition
    certificate = custom.get_namespaced_custom_object(
        GROUP, VERSION, release.namespace, "certificates", name
    )
    conditions = [c for c in certificate["status"]["conditions"] if c["type"] != "Issuing"]
    conditions.append({"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                       "message": "renewal asked for by the e2e leg",
                       "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})  # fmt: skip
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, release.namespace, "certificates", name,
        {"status": {"conditions": conditions}},
    )  # fmt: skip
    began = time.monotonic()
    refused: list[str] = []
    while True:
        problem = _admit(release, namespace)
        if problem:
            refused.append(problem)
        now = release.serving_expiries()
        if len(now) == len(served) and all(now[p] != served.get(p) for p in now):
            break
        assert time.monotonic() - began < RENEWAL_BOUND, (
            f"replicas still serve the old leaf after {RENEWAL_BOUND} s: {now} vs {served}"
        )
        time.sleep(2)
    took = time.monotonic() - began
    print(f"\ncert-manager: renewal served by every replica {took:.0f} s after it was asked for")
    assert refused == []
    assert _ca_bundle(release) == bundle  # a CA issuer's renewal keeps the CA
