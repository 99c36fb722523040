"""selfRotate: minting, the due rule, settings, and two replicas rotating against a real API server.

The apiserver test plays the kubelet itself (no kubelet runs): a watch on the Secret writes
its pair into each replica's directory, the way a mounted Secret is updated, and each replica
picks it up through the same TLS reload ``serve`` runs.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from dynconf_k8s.contract import InstallationError, parse_installation
from dynconf_k8s.webhook.kube import KubeAccess
from dynconf_k8s.webhook.metrics import WebhookMetrics
from dynconf_k8s.webhook.rotation import (
    LEASE_NAME,
    NOT_AFTER,
    RotationSettings,
    SelfRotation,
    mint,
)
from dynconf_k8s.webhook.settings import WebhookSettings
from tests.fixtures.certs import strict_handshake

CANONICAL = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}
DAY = 24 * 3600.0


def _settings(**over: Any) -> RotationSettings:
    base = {"namespace": "ns", "service": "svc", "secret": "tls", "mwc": "mwc",
            "identity": "a"}  # fmt: skip
    return RotationSettings(**{**base, **over})


def test_mint_gives_a_leaf_for_the_service_names_under_a_ca_living_twice_as_long() -> None:
    now = dt.datetime(2026, 8, 20, tzinfo=dt.UTC)
    minted = mint("dynamic-config-webhook", "dc", DAY, ("127.0.0.1",), now=now)
    ca = x509.load_pem_x509_certificate(minted.ca)
    leaf = x509.load_pem_x509_certificate(minted.cert)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value

    assert ca.subject.rfc4514_string() == "CN=dynamic-config-webhook-ca"
    assert leaf.issuer == ca.subject
    assert sans.get_values_for_type(x509.DNSName) == [
        "dynamic-config-webhook.dc.svc", "dynamic-config-webhook.dc.svc.cluster.local",
        "dynamic-config-webhook",
    ]  # fmt: skip
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # valid at an API server whose clock is up to an hour behind the minting node's
    assert leaf.not_valid_before_utc == ca.not_valid_before_utc == now - dt.timedelta(hours=1)
    assert leaf.not_valid_after_utc == minted.not_after == now + dt.timedelta(days=1)
    assert ca.not_valid_after_utc == now + dt.timedelta(days=2)


@pytest.mark.parametrize("skew_minutes", [10, -10])
def test_a_certificate_minted_on_a_skewed_node_passes_a_strict_handshake_on_the_true_clock(
    tmp_path: Path, skew_minutes: int
) -> None:
    """The API server verifies by its own clock: a webhook node ten minutes ahead (or behind)
    must still serve a certificate that is valid there, or every admission fails."""
    skewed = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=skew_minutes)
    minted = mint("dynamic-config-webhook", "dc", DAY, ("127.0.0.1",), now=skewed)
    (tmp_path / "ca.pem").write_bytes(minted.ca)
    (tmp_path / "tls.crt").write_bytes(minted.cert)
    (tmp_path / "tls.key").write_bytes(minted.key)
    served = _strict_handshake(tmp_path / "ca.pem", tmp_path, "dynamic-config-webhook.dc.svc")
    assert not served


def _strict_handshake(ca: Path, pair: Path, name: str) -> list[BaseException]:
    """``pair``'s ``tls.crt``/``tls.key`` served and verified by ``ca`` as ``name`` with
    ``VERIFY_X509_STRICT``; the server side's failures (none when it held)."""
    return strict_handshake(ca, pair / "tls.crt", pair / "tls.key", name)


def test_a_minted_pair_carries_every_extension_strict_verification_requires(
    tmp_path: Path,
) -> None:
    """Python 3.13 verifies with ``VERIFY_X509_STRICT`` by default; the pair must pass it there
    and on every older Python, so the handshake sets the flag itself."""
    minted = mint("dynamic-config-webhook", "dc", DAY, ("127.0.0.1",))
    ca = x509.load_pem_x509_certificate(minted.ca)
    leaf = x509.load_pem_x509_certificate(minted.cert)

    def extension(cert: x509.Certificate, kind: type[Any]) -> x509.Extension[Any]:
        return cert.extensions.get_extension_for_class(kind)

    ca_ski = extension(ca, x509.SubjectKeyIdentifier).value
    assert extension(ca, x509.BasicConstraints).critical
    assert extension(ca, x509.BasicConstraints).value.ca
    ca_usage = extension(ca, x509.KeyUsage)
    assert ca_usage.critical and ca_usage.value.key_cert_sign and ca_usage.value.crl_sign
    assert extension(leaf, x509.BasicConstraints).critical
    assert not extension(leaf, x509.BasicConstraints).value.ca
    leaf_usage = extension(leaf, x509.KeyUsage)
    assert leaf_usage.critical and leaf_usage.value.digital_signature
    assert not leaf_usage.value.key_cert_sign
    assert list(extension(leaf, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not extension(leaf, x509.SubjectAlternativeName).critical
    assert extension(leaf, x509.SubjectKeyIdentifier).value == (
        x509.SubjectKeyIdentifier.from_public_key(leaf.public_key())
    )
    aki = extension(leaf, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    (tmp_path / "ca.pem").write_bytes(minted.ca)
    (tmp_path / "tls.crt").write_bytes(minted.cert)
    (tmp_path / "tls.key").write_bytes(minted.key)
    assert not _strict_handshake(tmp_path / "ca.pem", tmp_path, "dynamic-config-webhook.dc.svc")


@pytest.mark.parametrize(
    ("jitter", "hours_left", "due"),
    [(1.0, 8.1, False), (1.0, 7.9, True), (0.9, 7.5, False), (1.1, 8.5, True)],
)
def test_rotation_is_due_at_a_third_of_the_validity_times_the_jitter(
    jitter: float, hours_left: float, due: bool
) -> None:
    rotation = SelfRotation(_settings(), KubeAccess(), jitter=lambda: jitter)
    now = dt.datetime(2026, 8, 20, tzinfo=dt.UTC)

    assert rotation.due(now + dt.timedelta(hours=hours_left), now) is due
    assert rotation.due(None, now) is True


def test_self_rotate_without_its_names_stops_the_start_listing_each() -> None:
    with pytest.raises(InstallationError) as caught:
        RotationSettings.from_environ(
            {"DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE": "1", "DYNAMIC_CONFIG_WEBHOOK_NAMESPACE": "dc"}
        )

    assert [p.split(" ")[0] for p in caught.value.problems] == [
        "DYNAMIC_CONFIG_WEBHOOK_SERVICE", "DYNAMIC_CONFIG_WEBHOOK_TLS_SECRET",
        "DYNAMIC_CONFIG_WEBHOOK_MWC", "HOSTNAME",
    ]  # fmt: skip
    assert RotationSettings.from_environ({}) is None


# ------------------------------------------------------------------------- against the apiserver
class Kubelet:
    """Writes the Secret's pair into each replica directory whenever the Secret changes."""

    def __init__(self, api_client: Any, namespace: str, secret: str, dirs: list[Path]) -> None:
        self.api_client, self.namespace, self.secret, self.dirs = (
            api_client, namespace, secret, dirs,
        )  # fmt: skip
        self.synced = threading.Condition()
        self.versions: list[bytes] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api_client)
        while not self._halt.is_set():
            stream = watch.Watch()
            for event in stream.stream(
                core.list_namespaced_secret,
                self.namespace,
                field_selector=f"metadata.name={self.secret}",
                timeout_seconds=1,
            ):
                data = event["object"].data or {}
                if event["type"] != "DELETED" and "tls.crt" in data:
                    self._write(
                        base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])
                    )
                if self._halt.is_set():
                    stream.stop()

    def _write(self, cert: bytes, key: bytes) -> None:
        if self.versions and self.versions[-1] == cert:
            return
        for directory in self.dirs:
            for name, content in (("tls.crt", cert), ("tls.key", key)):
                scratch = directory / f".{name}.tmp"
                scratch.write_bytes(content)
                os.replace(scratch, directory / name)
        with self.synced:
            self.versions.append(cert)
            self.synced.notify_all()

    def wait_version(self, count: int, timeout: float = 30) -> bytes:
        with self.synced:
            assert self.synced.wait_for(lambda: len(self.versions) >= count, timeout)
            return self.versions[count - 1]

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=10)


def _served_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    import socket

    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()


def _same_cert(a: bytes, b: bytes) -> bool:
    return x509.load_pem_x509_certificate(a) == x509.load_pem_x509_certificate(b)


def _bundle_cas(admission: Any, mwc: str) -> list[list[x509.Certificate]]:
    config = admission.read_mutating_webhook_configuration(mwc)
    return [
        x509.load_pem_x509_certificates(base64.b64decode(w.client_config.ca_bundle))
        for w in config.webhooks
    ]


@pytest.fixture
def rotation_identity(
    kube_client: Any, kube_control_plane: Any, mint_sa_token: Any, tmp_path: Path
) -> Any:
    """A namespace, and the webhook's ServiceAccount with the narrow rights selfRotate needs."""
    from kubernetes import client

    core, rbac = client.CoreV1Api(kube_client), client.RbacAuthorizationV1Api(kube_client)
    tag = uuid.uuid4().hex[:8]
    namespace, account = f"wh-rot-{tag}", "dynamic-config-webhook"
    mwc = f"wh-rot-{tag}.dynamic-config.rs"
    token = mint_sa_token(namespace, account)
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "name": f"rotation-{tag}"}
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": f"rotation-{tag}"},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "create", "update"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch"]},
        ],
    })  # fmt: skip
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"rotation-{tag}"}, "subjects": subject,
        "roleRef": {**role_ref, "kind": "Role"},
    })  # fmt: skip
    rbac.create_cluster_role({
        "metadata": {"name": f"rotation-{tag}"},
        "rules": [{"apiGroups": ["admissionregistration.k8s.io"],
                   "resources": ["mutatingwebhookconfigurations"],
                   "resourceNames": [mwc], "verbs": ["get", "patch"]}],
    })  # fmt: skip
    rbac.create_cluster_role_binding({
        "metadata": {"name": f"rotation-{tag}"}, "subjects": subject,
        "roleRef": {**role_ref, "kind": "ClusterRole"},
    })  # fmt: skip
    (tmp_path / "sa-token").write_text(token)
    access = KubeAccess(
        server=kube_control_plane.server,
        token_path=str(tmp_path / "sa-token"),
        ca_path=str(kube_control_plane.ca),
    )
    yield namespace, mwc, access
    rbac.delete_cluster_role_binding(f"rotation-{tag}")
    rbac.delete_cluster_role(f"rotation-{tag}")
    core.delete_namespace(namespace)


def test_two_replicas_one_leads_and_a_forced_rotation_keeps_admitting(
    kube_client: Any, cluster: Any, running_webhook: Any, rotation_identity: Any, tmp_path: Path
) -> None:
    from kubernetes import client

    namespace, mwc, access = rotation_identity
    admission = client.AdmissionregistrationV1Api(kube_client)
    label = uuid.uuid4().hex[:8]
    pods_ns = cluster.namespace(label)
    ports = {"a": _free_port(), "b": _free_port()}
    # The chart's configuration: created before any certificate exists, caBundle runtime-owned.
    admission.create_mutating_webhook_configuration({
        "metadata": {"name": mwc},
        "webhooks": [
            {"name": f"{replica}.inject.dynamic-config.rs", "admissionReviewVersions": ["v1"],
             "sideEffects": "None", "failurePolicy": "Fail", "reinvocationPolicy": "IfNeeded",
             "timeoutSeconds": 5,
             "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate"},
             "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["pods"]}],
             "namespaceSelector": {"matchLabels": {"dynconf-test": label}}}
            for replica, port in ports.items()
        ],
    })  # fmt: skip
    cluster.on_teardown(lambda: admission.delete_mutating_webhook_configuration(mwc))
    dirs = {replica: tmp_path / replica for replica in ports}
    for directory in dirs.values():
        directory.mkdir()
    kubelet = Kubelet(kube_client, namespace, "webhook-tls", list(dirs.values()))
    cluster.on_teardown(kubelet.stop)

    halt = threading.Event()
    rotations: dict[str, SelfRotation] = {}
    for replica in ports:
        settings = RotationSettings(
            namespace=namespace, service="dynamic-config-webhook", secret="webhook-tls",
            mwc=mwc, identity=f"webhook-{replica}", check_seconds=0.2, extra_names=("127.0.0.1",),
        )  # fmt: skip
        rotations[replica] = SelfRotation(settings, access, WebhookMetrics())
        thread = threading.Thread(target=rotations[replica].run, args=(halt,), daemon=True)
        thread.start()
        cluster.on_teardown(thread.join)

    def stop_rotations() -> None:
        halt.set()
        for rotation in rotations.values():
            rotation.stop_waiting()

    cluster.on_teardown(stop_rotations)

    first_leaf = kubelet.wait_version(1)
    # the Secret lands a moment before its writer counts the rotation; wait for the count
    deadline = time.monotonic() + 10
    while not any(rotation.rotations for rotation in rotations.values()):
        assert time.monotonic() < deadline, "no replica counted the first rotation"
        time.sleep(0.02)
    leaders = [r for r, rotation in rotations.items() if rotation.rotations]
    assert len(leaders) == 1
    leader = rotations[leaders[0]]
    lease = client.CoordinationV1Api(kube_client).read_namespaced_lease(LEASE_NAME, namespace)
    assert lease.spec.holder_identity == f"webhook-{leaders[0]}"
    secret = client.CoreV1Api(kube_client).read_namespaced_secret("webhook-tls", namespace)
    first_ca = x509.load_pem_x509_certificate(base64.b64decode(secret.data["ca.crt"]))
    assert secret.type == "kubernetes.io/tls" and NOT_AFTER in secret.metadata.annotations
    assert _bundle_cas(admission, mwc) == [[first_ca], [first_ca]]

    serving = WebhookSettings(installation=parse_installation({}))
    replicas = {
        r: running_webhook(
            serving,
            port=ports[r],
            reload_every=0.05,
            pair=(str(dirs[r] / "ca.crt"), str(dirs[r] / "tls.crt"), str(dirs[r] / "tls.key")),
        )
        for r in ports
    }
    assert [c.name for c in cluster.create_pod(pods_ns, CANONICAL).spec.containers] == [
        "app", "dynamic-config-agent",
    ]  # fmt: skip

    # Admissions run all through the rotation, each pod through both replicas.
    outcomes: list[object] = []
    stop_creating = threading.Event()

    def create_pods() -> None:
        n = 0
        while not stop_creating.is_set():
            n += 1
            try:
                pod = cluster.create_pod(pods_ns, CANONICAL, name=f"during-{n}")
                outcomes.append([c.name for c in pod.spec.containers])
            except Exception as exc:  # every failure is reported by the assertion below
                outcomes.append(exc)

    creator = threading.Thread(target=create_pods, daemon=True)
    creator.start()
    leader.rotate_now()
    assert leader.wait_rotations(2, timeout=30)
    second_leaf = kubelet.wait_version(2)
    for replica in replicas.values():
        assert replica.reloaded.wait(30)
    bundle_when_served = _bundle_cas(admission, mwc)
    served = [_served_certificate(port) for port in ports.values()]
    after = len(outcomes)
    while len(outcomes) < after + 3 and creator.is_alive():
        creator.join(timeout=0.5)
    stop_creating.set()
    creator.join(timeout=30)

    secret = client.CoreV1Api(kube_client).read_namespaced_secret("webhook-tls", namespace)
    second_ca = x509.load_pem_x509_certificate(base64.b64decode(secret.data["ca.crt"]))
    assert second_ca != first_ca and not _same_cert(second_leaf, first_leaf)
    assert all(_same_cert(cert, second_leaf) for cert in served)
    assert bundle_when_served == [[second_ca, first_ca], [second_ca, first_ca]]
    failures = [o for o in outcomes if not isinstance(o, list)]
    assert not failures, failures[:3]
    assert all(o == ["app", "dynamic-config-agent"] for o in outcomes)
    assert len(outcomes) >= after + 3
    assert leader.metrics is not None
    assert (
        leader.metrics.registry.get_sample_value("dynamic_config_certificate_rotations_total") == 2
    )
    assert sum(r.rotations for r in rotations.values()) == 2


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_kept_secret_gets_its_ca_into_a_fresh_configuration_without_rotating(
    kube_client: Any, cluster: Any, rotation_identity: Any
) -> None:
    """A reinstall: helm kept the Secret (a valid pair), the configuration is new, no caBundle."""
    from kubernetes import client

    namespace, mwc, access = rotation_identity
    admission = client.AdmissionregistrationV1Api(kube_client)
    admission.create_mutating_webhook_configuration({
        "metadata": {"name": mwc},
        "webhooks": [{"name": "inject.dynamic-config.rs", "admissionReviewVersions": ["v1"],
                      "sideEffects": "None", "failurePolicy": "Fail",
                      "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
                      "namespaceSelector": {"matchLabels": {"dynconf-test": "none"}}}],
    })  # fmt: skip
    cluster.on_teardown(lambda: admission.delete_mutating_webhook_configuration(mwc))
    pair = mint("dynamic-config-webhook", namespace, DAY)
    client.CoreV1Api(kube_client).create_namespaced_secret(namespace, {
        "metadata": {"name": "webhook-tls", "annotations": {
            NOT_AFTER: (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).strftime(
                "%Y-%m-%dT%H:%M:%SZ")}},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in
                 (("tls.crt", pair.cert), ("tls.key", pair.key), ("ca.crt", pair.ca))},
    })  # fmt: skip
    settings = RotationSettings(
        namespace=namespace, service="dynamic-config-webhook", secret="webhook-tls", mwc=mwc,
        identity="webhook-a",
    )  # fmt: skip
    rotation = SelfRotation(settings, access, WebhookMetrics())

    rotated = rotation.round()

    assert not rotated and rotation.rotations == 0
    assert _bundle_cas(admission, mwc) == [[x509.load_pem_x509_certificate(pair.ca)]]


_ROTATING_REPLICA = """
import signal, sys, threading
from dynconf_k8s.webhook.kube import KubeAccess
from dynconf_k8s.webhook.rotation import RotationSettings, SelfRotation
namespace, mwc, server, token, ca, identity = sys.argv[1:7]
settings = RotationSettings(
    namespace=namespace, service="dynamic-config-webhook", secret="webhook-tls", mwc=mwc,
    identity=identity, check_seconds=0.5, lease_seconds=6.0, extra_names=("127.0.0.1",),
    bundle_settle_seconds=0.5,
)
rotation = SelfRotation(settings, KubeAccess(server=server, token_path=token, ca_path=ca))
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: (stop.set(), rotation.stop_waiting()))
rotation.run(stop)
"""


def _valid_on_the_true_clock(kube_client: Any, namespace: str, mwc: str) -> x509.Certificate:
    """The Secret's leaf, checked by the cluster's clock: in its validity window, signed by a
    CA the configuration trusts, and accepted by a strict handshake."""
    import tempfile

    from kubernetes import client

    secret = client.CoreV1Api(kube_client).read_namespaced_secret("webhook-tls", namespace)
    pair = {name: base64.b64decode(secret.data[name]) for name in ("tls.crt", "tls.key", "ca.crt")}
    leaf = x509.load_pem_x509_certificate(pair["tls.crt"])
    now = dt.datetime.now(dt.UTC)
    assert leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc
    ca = x509.load_pem_x509_certificate(pair["ca.crt"])
    admission = client.AdmissionregistrationV1Api(kube_client)
    assert all(ca in trusted for trusted in _bundle_cas(admission, mwc))
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        for name, content in pair.items():
            (directory / name).write_bytes(content)
        assert not _strict_handshake(directory / "ca.crt", directory, "127.0.0.1")
    return leaf


def test_replicas_ten_minutes_ahead_and_behind_rotate_for_the_true_clock(
    kube_client: Any, cluster: Any, rotation_identity: Any, skewed_env: Any
) -> None:
    """Two rotating replicas as processes, one node ten minutes ahead and one behind (the
    API server keeps the true clock): one leads, the Secret it writes is valid where it is
    checked, and when the leader dies the other takes over and mints a pair as valid."""
    import signal
    import subprocess
    import sys

    from kubernetes import client

    namespace, mwc, access = rotation_identity
    admission = client.AdmissionregistrationV1Api(kube_client)
    admission.create_mutating_webhook_configuration({
        "metadata": {"name": mwc},
        "webhooks": [{
            "name": "skew.inject.dynamic-config.rs", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Ignore",
            "clientConfig": {"url": f"https://127.0.0.1:{_free_port()}/mutate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"dynconf-test": uuid.uuid4().hex[:8]}},
        }],
    })  # fmt: skip
    cluster.on_teardown(lambda: admission.delete_mutating_webhook_configuration(mwc))
    core = client.CoreV1Api(kube_client)
    leases = client.CoordinationV1Api(kube_client)

    def start(identity: str, minutes: int) -> subprocess.Popen[str]:
        args = [namespace, mwc, access.server, access.token_path, access.ca_path, identity]
        process = subprocess.Popen(
            [sys.executable, "-c", _ROTATING_REPLICA, *args],
            env={**os.environ, **skewed_env(minutes)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        cluster.on_teardown(lambda: process.poll() is None and process.kill())
        return process

    def holder() -> str | None:
        try:
            return str(leases.read_namespaced_lease(LEASE_NAME, namespace).spec.holder_identity)
        except Exception:
            return None

    def secret_version() -> str | None:
        try:
            found = core.read_namespaced_secret("webhook-tls", namespace)
        except Exception:
            return None
        return str(found.metadata.resource_version) if found.data else None

    def await_true(check: Any, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    ahead = start("webhook-ahead", 10)
    await_true(lambda: secret_version() is not None, "the ahead replica wrote no pair")
    assert holder() == "webhook-ahead"
    first = _valid_on_the_true_clock(kube_client, namespace, mwc)

    behind = start("webhook-behind", -10)
    written = secret_version()
    time.sleep(8)  # more than a lease term: the behind replica sees a held lease, not a stale one
    assert holder() == "webhook-ahead"
    assert secret_version() == written, "a follower rotated under a held lease"
    assert behind.poll() is None and ahead.poll() is None

    ahead.send_signal(signal.SIGKILL)
    ahead.wait(10)
    await_true(lambda: holder() == "webhook-behind", "the behind replica never took the lease")
    core.delete_namespaced_secret("webhook-tls", namespace)  # the new leader mints at once
    await_true(lambda: secret_version() is not None, "the behind replica wrote no pair")
    second = _valid_on_the_true_clock(kube_client, namespace, mwc)
    assert second != first
    behind.send_signal(signal.SIGTERM)
    assert behind.wait(15) == 0, behind.stdout.read() if behind.stdout else ""
