"""selfRotate: the webhook as its own certificate authority, rotating on a Lease.

Every replica runs :class:`SelfRotation`; one of them holds the Lease
``dynamic-config-webhook-rotation`` and is the only one that mints. The leader rotates when the
Secret's ``dynamic-config.rs/not-after`` annotation is missing or the pair's remaining validity
falls to a third of its life (times a jitter drawn per term, so a fleet restarted together does
not rotate together). A rotation mints a CA and a leaf in memory, patches every
``webhooks[i].clientConfig.caBundle`` of the MutatingWebhookConfiguration with the new CA and
the previous one (the two-CA window), then server-side-applies the Secret. Every replica
serves the Secret's pair through the same file reload cert-manager's renewals use.

The bundle is patched *before* the Secret is written (the reference writes the Secret first):
the API server then trusts the new CA before any replica can serve a leaf it signed, and the
previous CA stays until the next rotation, so no admission fails in between. The Lease (30 s
term) is held through :class:`dynconf_k8s.lease.LeaderLease`, tried every round and again
between the bundle and the Secret; any round that does not lead (taken, a 409, refused) abandons
the rotation there, and the next leader starts over from the Secret.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
import os
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from dynconf_k8s.contract.installation import InstallationError
from dynconf_k8s.lease import LeaderLease
from dynconf_k8s.webhook.kube import KubeAccess, MissingIdentity
from dynconf_k8s.webhook.metrics import WebhookMetrics

__all__ = [
    "FIELD_MANAGER",
    "LEASE_NAME",
    "NOT_AFTER",
    "Minted",
    "RotationSettings",
    "SelfRotation",
    "mint",
]

log = logging.getLogger("dynconf_k8s.webhook")

LEASE_NAME: Final = "dynamic-config-webhook-rotation"
FIELD_MANAGER: Final = "dynamic-config-webhook"
NOT_AFTER: Final = "dynamic-config.rs/not-after"
CA_NAME: Final = "dynamic-config-webhook-ca"
BACKDATE: Final = dt.timedelta(hours=1)
"""How far before the minting moment a certificate's life starts. The API server checks the
certificate by its own clock: a webhook on a node whose clock runs ahead would otherwise
serve a certificate that is not yet valid there, and every admission would fail (with
``failurePolicy: Ignore``, pods would start without their agent). An hour covers any skew a
working cluster has; the leaf's end is measured from the minting moment, so its life is not
shortened."""
_PEM_END: Final = b"-----END CERTIFICATE-----"


@dataclass(frozen=True)
class RotationSettings:
    """Where the pair lives and who this replica is; :meth:`from_environ` reads the contract's."""

    namespace: str
    service: str
    secret: str
    mwc: str
    identity: str
    validity_seconds: float = 24 * 3600.0
    check_seconds: float = 15.0
    lease_seconds: float = 30.0
    extra_names: tuple[str, ...] = ()
    bundle_settle_seconds: float = 5.0
    """How long the widened caBundle is given to reach every API server's webhook client
    (an informer, so not instant) before any replica can serve a leaf of the new CA."""
    """More leaf SANs (an IP or a DNS name) for a webhook reached other than by its Service."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RotationSettings | None:
        """None unless ``DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE`` is on; every missing name at once."""
        env = os.environ if environ is None else environ
        if env.get("DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE", "").strip().lower() not in ("1", "true"):
            return None
        names = {
            "namespace": "DYNAMIC_CONFIG_WEBHOOK_NAMESPACE",
            "service": "DYNAMIC_CONFIG_WEBHOOK_SERVICE",
            "secret": "DYNAMIC_CONFIG_WEBHOOK_TLS_SECRET",
            "mwc": "DYNAMIC_CONFIG_WEBHOOK_MWC",
            "identity": "HOSTNAME",
        }
        values = {field: (env.get(var) or "").strip() for field, var in names.items()}
        problems = [
            f"{names[field]} is required with DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE (the chart's "
            "webhook.selfRotate.enabled sets it)"
            for field, value in values.items()
            if not value
        ]
        validity = env.get("DYNAMIC_CONFIG_WEBHOOK_VALIDITY_SECONDS", "").strip()
        seconds = 24 * 3600.0
        if validity:
            try:
                seconds = float(int(validity))
            except ValueError:
                seconds = 0.0
            if seconds < 600:
                problems.append(
                    "DYNAMIC_CONFIG_WEBHOOK_VALIDITY_SECONDS takes whole seconds, at least 600"
                )
        if problems:
            raise InstallationError(problems)
        return cls(
            namespace=values["namespace"],
            service=values["service"],
            secret=values["secret"],
            mwc=values["mwc"],
            identity=values["identity"],
            validity_seconds=seconds,
        )


@dataclass(frozen=True)
class Minted:
    """One rotation's material, PEM-encoded."""

    ca: bytes
    cert: bytes
    key: bytes
    not_after: dt.datetime


def mint(
    service: str,
    namespace: str,
    validity_seconds: float,
    extra_names: tuple[str, ...] = (),
    now: dt.datetime | None = None,
) -> Minted:
    """A fresh CA (twice the leaf's life) and a leaf for the Service's names, in memory only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    start = now or dt.datetime.now(dt.UTC)
    before = start - BACKDATE
    validity = dt.timedelta(seconds=validity_seconds)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(before)
        .not_valid_after(start + 2 * validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    dns = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", service]
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
    for name in extra_names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = start + validity
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Minted(
        ca=ca.public_bytes(serialization.Encoding.PEM),
        cert=leaf.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        not_after=not_after,
    )


def first_certificate(pem: bytes) -> bytes | None:
    """The first PEM certificate of a bundle (the previous rotation's CA), with its newline."""
    end = pem.find(_PEM_END)
    if end < 0:
        return None
    start = pem.find(b"-----BEGIN CERTIFICATE-----")
    return pem[start : end + len(_PEM_END)] + b"\n"


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_rfc3339(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class SelfRotation:
    """The rotation loop of one replica; only the Lease holder mints."""

    def __init__(
        self,
        settings: RotationSettings,
        access: KubeAccess,
        metrics: WebhookMetrics | None = None,
        *,
        jitter: Callable[[], float] = lambda: random.uniform(0.9, 1.1),  # noqa: S311 - spreading, not secrecy
    ) -> None:
        self.settings = settings
        self.access = access
        self.metrics = metrics
        self.lease = LeaderLease(
            LEASE_NAME, settings.namespace, settings.identity, term=settings.lease_seconds
        )
        self.leading = False
        self._jitter = jitter
        self._factor = jitter()
        self._wake = threading.Event()
        self._forced = False
        self._rotated = threading.Condition()
        self.rotations = 0

    def due(self, not_after: dt.datetime | None, now: dt.datetime) -> bool:
        """Missing, or at most a third of the validity (times this term's jitter) left."""
        if not_after is None:
            return True
        left = (not_after - now).total_seconds()
        return left <= self.settings.validity_seconds / 3 * self._factor

    def rotate_now(self) -> None:
        """Ask for a rotation at the next round (the leader's; followers ignore it)."""
        self._forced = True
        self._wake.set()

    def wait_rotations(self, count: int, timeout: float) -> bool:
        """Block until this replica has rotated ``count`` times in all; False on timeout."""
        with self._rotated:
            return self._rotated.wait_for(lambda: self.rotations >= count, timeout)

    def run(self, stop: threading.Event) -> None:
        """Rounds every ``check_seconds`` (or when woken) until ``stop``."""
        while not stop.is_set():
            try:
                self.round()
            except Exception:  # the loop must outlive any one failure; the next round retries
                log.exception("rotation round failed")
            self._wake.wait(self.settings.check_seconds)
            self._wake.clear()

    def stop_waiting(self) -> None:
        """Wake the loop so it sees its stop event now rather than at the next round."""
        self._wake.set()

    def round(self) -> bool:
        """Hold the lease and rotate when due; True when this round rotated."""
        try:
            api_client = self.access.api_client()
        except MissingIdentity as exc:
            log.error("rotation has no identity", extra={"error": str(exc)})
            return False
        with api_client:
            self.leading = self.lease.try_hold(api_client).leading
            if not self.leading:
                return False
            secret = self._read_secret(api_client)
            annotations = (secret.metadata.annotations or {}) if secret else {}
            now = dt.datetime.now(dt.UTC)
            if not (self._forced or self.due(_parse_rfc3339(annotations.get(NOT_AFTER)), now)):
                self._trust_current(api_client, secret)
                return False
            self._forced = False
            previous = None
            if secret is not None and secret.data and secret.data.get("ca.crt"):
                previous = first_certificate(base64.b64decode(secret.data["ca.crt"]))
            return self._rotate(api_client, previous)

    def _read_secret(self, api_client: Any) -> Any:
        from kubernetes import client  # type: ignore[import-untyped]
        from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

        try:
            return client.CoreV1Api(api_client).read_namespaced_secret(
                self.settings.secret, self.settings.namespace
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _still_leading(self, api_client: Any, step: str) -> bool:
        if self.lease.try_hold(api_client).leading:
            return True
        self.leading = False
        log.warning("rotation abandoned: the lease was lost", extra={"step": step})
        return False

    def _trust_current(self, api_client: Any, secret: Any) -> None:
        """Keep the caBundle trusting the Secret's CA when no rotation is due.

        Found on the node: a reinstall renders the webhook configuration afresh (no caBundle)
        while helm keeps the Secret (``resource-policy: keep``) with a pair valid for a day, so
        the replicas served it and the apiserver refused them all until the next rotation. The
        CA is put in front of whatever the bundle holds; nothing trusted is dropped.
        """
        from kubernetes import client

        data = (secret.data or {}) if secret is not None else {}
        current = first_certificate(base64.b64decode(data.get("ca.crt") or ""))
        if current is None:
            return
        admission = client.AdmissionregistrationV1Api(api_client)
        mwc = admission.read_mutating_webhook_configuration(self.settings.mwc)
        ops = []
        for i, webhook in enumerate(mwc.webhooks or []):
            held = base64.b64decode(webhook.client_config.ca_bundle or "")
            if current.strip() not in held:
                value = base64.b64encode(current + held).decode()
                ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle",
                            "value": value})  # fmt: skip
        if ops:
            admission.patch_mutating_webhook_configuration(self.settings.mwc, ops)
            log.info("caBundle repaired", extra={"webhooks": len(ops)})

    def _rotate(self, api_client: Any, previous_ca: bytes | None) -> bool:
        from kubernetes import client

        s = self.settings
        minted = mint(s.service, s.namespace, s.validity_seconds, s.extra_names)
        bundle = base64.b64encode(minted.ca + (previous_ca or b"")).decode()
        admission = client.AdmissionregistrationV1Api(api_client)
        mwc = admission.read_mutating_webhook_configuration(s.mwc)
        ops = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i in range(len(mwc.webhooks or []))
        ]
        if ops:
            admission.patch_mutating_webhook_configuration(s.mwc, ops)
            if previous_ca:
                # an event's wait, not time.sleep: the same pause, and one that a node whose
                # wall clock is shifted (libfaketime in the skew tests) cannot stretch
                threading.Event().wait(s.bundle_settle_seconds)
        if not self._still_leading(api_client, "secret"):
            return False
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": s.secret,
                "namespace": s.namespace,
                "annotations": {NOT_AFTER: _rfc3339(minted.not_after)},
            },
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": base64.b64encode(minted.cert).decode(),
                "tls.key": base64.b64encode(minted.key).decode(),
                "ca.crt": base64.b64encode(minted.ca).decode(),
            },
        }
        client.CoreV1Api(api_client).patch_namespaced_secret(
            s.secret,
            s.namespace,
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        self._factor = self._jitter()
        if self.metrics is not None:
            self.metrics.rotations.inc()
        log.info(
            "certificate rotated",
            extra={"secret": s.secret, "not_after": _rfc3339(minted.not_after),
                   "webhooks": len(ops), "ca_window": 2 if previous_ca else 1},
        )  # fmt: skip
        with self._rotated:
            self.rotations += 1
            self._rotated.notify_all()
        return True
