"""The Helm chart rendered offline: lint, every TLS mode and toggle through kubeconform -strict,
the structure the contract fixes, the restricted posture on every pod, and the renders that must
fail with their sentence."""

from __future__ import annotations

import base64
import datetime
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from dynconf_k8s.contract import BUILTIN_IMAGE
from tests.chart.support import (
    CHART,
    Manifest,
    assert_valid,
    by_kind,
    documents,
    env_of,
    helm_template,
    one,
    pod_specs,
    tool_env,
)
from tests.fixtures.kube import Kubeconform

pytestmark = pytest.mark.helm


def _ca_certificate() -> bytes:
    """A throwaway self-signed CA certificate (PEM): the caBundle of an own-cert install."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "installer-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


CA_PEM = _ca_certificate()
CA_BUNDLE = base64.b64encode(CA_PEM).decode()
APP_VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])

TOGGLES: dict[str, tuple[str, ...]] = {
    "default": (),
    "cert-manager": (
        "webhook.certManager.enabled=true",
        "webhook.certManager.issuerRef.name=internal-ca",
        "webhook.certManager.duration=2160h",
        "webhook.certManager.renewBefore=360h",
    ),
    "selfrotate": ("webhook.selfRotate.enabled=true",),
    "own-cert": (
        "webhook.ownCert.enabled=true",
        "webhook.ownCert.secretName=installer-tls",
        f"webhook.ownCert.caBundle={CA_BUNDLE}",
    ),
    "network-policy": ("networkPolicy.enabled=true",),
    "network-policy-selfrotate": ("networkPolicy.enabled=true", "webhook.selfRotate.enabled=true"),
    "service-monitor": ("webhook.metrics.serviceMonitor.enabled=true",),
    "no-metrics": ("webhook.metrics.enabled=false",),
    "gating": (
        "webhook.namespaceGating=true",
        "webhook.excludeNamespaces={monitoring,istio-system}",
        "webhook.objectSelector.matchLabels.team=payments",
        "webhook.failurePolicy=Fail",
    ),
    "operator": ("operator.enabled=true",),
    "operator-ha": ("operator.enabled=true", "operator.replicas=3"),
    "node-agent": ("nodeAgent.enabled=true",),  # with upstream's registrar, the default
    "node-agent-builtin": ("nodeAgent.enabled=true", "nodeAgent.registration=builtin"),
    "agent-events": (
        "agent.events.enabled=true",
        "agent.events.namespaces={payments,shop}",
        "agent.events.serviceAccounts={billing}",
        "webhook.allowEvents=true",
    ),
    "classes": ("webhook.classes.enabled=true",),
    "explain": (
        "webhook.explain.enabled=true",
        "webhook.explain.subjects[0].kind=Group",
        "webhook.explain.subjects[0].name=system:authenticated",
        "webhook.explain.subjects[0].apiGroup=rbac.authorization.k8s.io",
    ),
    "host-network": ("webhook.hostNetwork=true", "webhook.replicas=1"),
    "string-installation": (
        "agent.defaults.source=consul",
        "agent.defaults.path=/config/rendered.toml",
        "agent.defaults.fileMode=0640",
        "agent.defaults.watchSeconds=30",
        "agent.defaults.overridable=false",
        "agent.defaults.perStore=consul: endpoint=http://consul.infra.svc:8500!\\, watch-seconds=10",
        "webhook.agentEnvAllow=payments: HTTPS_PROXY\\, AWS_*; *: RUST_LOG",
        "webhook.sourceDeny=sandbox: git",
        "agent.pullSecret=mirror-cred",
    ),
    "digests": (
        "webhook.digest=sha256:" + "a" * 64,
        "agent.digest=sha256:" + "b" * 64,
        "operator.enabled=true",
        "operator.digest=sha256:" + "c" * 64,
        "nodeAgent.enabled=true",
        "nodeAgent.digest=sha256:" + "d" * 64,
        "webhook.tag=v9.9.9",
    ),
    "image-registry": (
        "global.imageRegistry=registry.example:5000",
        "operator.enabled=true",
        "nodeAgent.enabled=true",
    ),
}

MAP_INSTALLATION: dict[str, Any] = {
    "agent": {
        "defaults": {
            "perStore": {
                "vault": {
                    "overridable": False,
                    "endpoint": "https://vault.vault.svc:8200",
                    "auth": "kubernetes",
                    "watch-seconds": 30,
                },
                "s3": "agent-memory-limit=128Mi",
            }
        }
    },
    "webhook": {
        "sourceAllow": {"payments": ["vault", "s3"], "*": ["consul"]},
        "agentEnvAllow": {"payments": ["HTTPS_PROXY", "AWS_*"]},
        "sourceDeny": "sandbox: git",
    },
}


def _render(helm_bin: Path, tmp_path: Path, *sets: str, **kw: Any) -> list[Manifest]:
    return documents(helm_template(helm_bin, tmp_path, *sets, **kw).stdout)


def _webhook(docs: list[Manifest]) -> Manifest:
    return one(docs, "Deployment", "dynamic-config-webhook")


def _container(pod: Manifest, name: str) -> Manifest:
    return next(c for c in pod["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def _containers(pod: Manifest) -> list[str]:
    return [c["name"] for c in pod["spec"]["template"]["spec"]["containers"]]


def _mounts(container: Manifest) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


def _flag(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``args``, spelled ``--flag value`` or ``--flag=value``."""
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(flag + "="):
            return arg.removeprefix(flag + "=")
    return None


# ------------------------------------------------------------------------------------ lint


def test_helm_lint_passes_with_defaults_and_with_every_component(
    helm_bin: Path, tmp_path: Path
) -> None:
    for sets in ((), ("operator.enabled=true", "nodeAgent.enabled=true")):
        argv = [str(helm_bin), "lint", "--strict", str(CHART), "--namespace", "dynamic-config"]
        for pair in sets:
            argv += ["--set", pair]
        result = subprocess.run(
            argv, capture_output=True, text=True, env=tool_env(tmp_path), check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr


# ------------------------------------------------------------------ renders + kubeconform


@pytest.mark.parametrize("toggle", sorted(TOGGLES))
def test_each_toggle_renders_objects_kubeconform_accepts(
    toggle: str, helm_bin: Path, kubeconform: Kubeconform, tmp_path: Path
) -> None:
    rendered = helm_template(helm_bin, tmp_path, *TOGGLES[toggle]).stdout

    assert_valid(kubeconform, rendered, tmp_path)


def test_map_installation_renders_objects_kubeconform_accepts(
    helm_bin: Path, kubeconform: Kubeconform, tmp_path: Path
) -> None:
    rendered = helm_template(helm_bin, tmp_path, values=MAP_INSTALLATION).stdout

    assert_valid(kubeconform, rendered, tmp_path)


# ------------------------------------------------------------------------------ posture


RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


@pytest.mark.parametrize("toggle", sorted(TOGGLES))
def test_every_pod_is_restricted_and_none_is_privileged(
    toggle: str, helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES[toggle])

    for where, spec in pod_specs(docs):
        assert not spec.get("hostPID") and not spec.get("hostIPC"), where
        for container in spec.get("initContainers", []) + spec["containers"]:
            context = container["securityContext"]
            label = f"{where}/{container['name']}"
            assert not context.get("privileged", False), label
            assert "add" not in context.get("capabilities", {}), label
            for key, value in RESTRICTED_CONTAINER.items():
                assert context.get(key) == value, f"{label}: {key}"
            if where != "DaemonSet/dynamic-config-node-agent":
                # the node agent is the one documented exception: root, nothing else
                assert context.get("runAsNonRoot") is True, label
                assert context.get("runAsUser") == 65532, label
            for mount in container.get("volumeMounts", []):
                assert mount.get("mountPropagation") in (None, "HostToContainer"), label


def test_node_agent_is_the_only_hostpath_user_and_propagates_host_to_container(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true", "operator.enabled=true")

    for where, spec in pod_specs(docs):
        has_host_path = any("hostPath" in v for v in spec.get("volumes", []))
        assert has_host_path == (where == "DaemonSet/dynamic-config-node-agent"), where
    daemonset = one(docs, "DaemonSet", "dynamic-config-node-agent")
    agent = _container(daemonset, "node-agent")
    pods = next(m for m in agent["volumeMounts"] if m["name"] == "pods-dir")
    assert pods == {
        "name": "pods-dir",
        "mountPath": "/var/lib/kubelet/pods",
        "mountPropagation": "HostToContainer",
    }
    volumes = {v["name"]: v["hostPath"] for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["plugin-dir"] == {
        "path": "/var/lib/kubelet/plugins/config.dynamic-config.rs",
        "type": "DirectoryOrCreate",
    }
    assert volumes["registration-dir"] == {
        "path": "/var/lib/kubelet/plugins_registry",
        "type": "Directory",
    }
    driver = one(docs, "CSIDriver", "config.dynamic-config.rs")
    assert driver["spec"] == {
        "attachRequired": False,
        "podInfoOnMount": True,
        "volumeLifecycleModes": ["Ephemeral"],
    }
    assert env_of(agent)["DYNAMIC_CONFIG_METRICS_ADDR"] == "0.0.0.0:9111"
    assert "KUBE_NODE_NAME" in env_of(agent)


def test_node_agent_is_ready_only_once_it_serves(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true")

    agent = _container(one(docs, "DaemonSet", "dynamic-config-node-agent"), "node-agent")
    assert agent["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert agent["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_node_agent_requests_memory_above_its_measured_peak(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true")

    agent = _container(one(docs, "DaemonSet", "dynamic-config-node-agent"), "node-agent")
    # measured: 89.7-95.5 MiB over the 60-minute soak, 64-73 MiB serving 500 volumes
    assert agent["resources"] == {
        "requests": {"cpu": "20m", "memory": "128Mi"},
        "limits": {"memory": "256Mi"},
    }


NODE_AGENT = "dynamic-config-node-agent"
HOST_SOCKET = "/var/lib/kubelet/plugins/config.dynamic-config.rs/csi.sock"
"""The node agent's CSI socket as the kubelet dials it: what registration tells the kubelet."""


def test_node_agent_runs_upstreams_registrar_by_default(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true")

    daemonset = one(docs, "DaemonSet", NODE_AGENT)
    assert _containers(daemonset) == ["node-agent", "node-driver-registrar"]
    registrar = _container(daemonset, "node-driver-registrar")
    assert registrar["image"] == "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0"
    assert registrar["args"] == [
        "--csi-address=/csi/csi.sock",
        f"--kubelet-registration-path={HOST_SOCKET}",
        "--http-endpoint=:9809",
    ]
    assert _mounts(registrar) == {"plugin-dir": "/csi", "registration-dir": "/registration"}
    assert registrar["ports"] == [{"name": "healthz", "containerPort": 9809}]
    assert registrar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    agent = _container(daemonset, "node-agent")
    # the node agent serves the socket the registrar dials, and registers nothing itself
    assert agent["args"] == ["--endpoint", "unix:///csi/csi.sock"]
    assert "registration-dir" not in _mounts(agent)
    assert _mounts(agent)["plugin-dir"] == "/csi"


def test_node_agent_registration_builtin_registers_itself_without_a_registrar(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true", "nodeAgent.registration=builtin")

    daemonset = one(docs, "DaemonSet", NODE_AGENT)
    assert _containers(daemonset) == ["node-agent"]
    agent = _container(daemonset, "node-agent")
    assert agent["args"] == [
        "--endpoint",
        "unix:///csi/csi.sock",
        "--kubelet-registration-path",
        HOST_SOCKET,
        "--registration-dir",
        "/registration",
    ]
    assert _mounts(agent)["registration-dir"] == "/registration"
    assert _mounts(agent)["plugin-dir"] == "/csi"


@pytest.mark.parametrize("registration", ["registrar", "builtin"])
def test_registration_names_the_socket_under_a_moved_kubelet_path(
    registration: str, helm_bin: Path, tmp_path: Path
) -> None:
    kubelet = "/var/lib/k0s/kubelet"
    sets = (f"nodeAgent.registration={registration}", f"nodeAgent.kubeletPath={kubelet}")
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true", *sets)

    daemonset = one(docs, "DaemonSet", NODE_AGENT)
    told = {
        name: _flag(_container(daemonset, name).get("args", []), "--kubelet-registration-path")
        for name in _containers(daemonset)
    }
    registers = "node-driver-registrar" if registration == "registrar" else "node-agent"
    socket = f"{kubelet}/plugins/config.dynamic-config.rs/csi.sock"
    assert {name: path for name, path in told.items() if path} == {registers: socket}
    volumes = {v["name"]: v["hostPath"] for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["plugin-dir"]["path"] == f"{kubelet}/plugins/config.dynamic-config.rs"
    assert volumes["registration-dir"]["path"] == f"{kubelet}/plugins_registry"


def test_a_release_from_before_registration_existed_gets_the_registrar(
    helm_bin: Path, tmp_path: Path
) -> None:
    # `helm upgrade --reuse-values` from a chart without the value: the key is absent
    docs = _render(helm_bin, tmp_path, "nodeAgent.enabled=true", "nodeAgent.registration=null")

    assert _containers(one(docs, "DaemonSet", NODE_AGENT)) == [
        "node-agent",
        "node-driver-registrar",
    ]


def test_an_unknown_registration_fails_the_render_even_without_the_schema(
    helm_bin: Path, tmp_path: Path
) -> None:
    sets = ("nodeAgent.enabled=true", "nodeAgent.registration=sidecar")
    skip = ("--skip-schema-validation",)

    result = helm_template(helm_bin, tmp_path, *sets, flags=skip, check=False)

    assert result.returncode != 0, "registration=sidecar rendered"
    assert (
        'nodeAgent.registration is "sidecar"; set it to registrar (upstream\'s '
        "node-driver-registrar sidecar, the default) or builtin (the node agent registers "
        "itself, for nodes that cannot pull the registrar image)"
    ) in result.stderr, result.stderr


def test_node_agent_is_off_by_default(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path)

    assert not by_kind(docs, "DaemonSet") and not by_kind(docs, "CSIDriver")
    assert not [d for d in docs if "operator" in d["metadata"]["name"]]


def test_operator_stores_keep_state_on_a_writable_emptydir(helm_bin: Path, tmp_path: Path) -> None:
    """Its root is read-only: git's clone cache goes to an emptyDir through XDG_CACHE_HOME."""
    docs = _render(helm_bin, tmp_path, "operator.enabled=true")
    operator = one(docs, "Deployment", "dynamic-config-operator")
    container = _container(operator, "operator")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    cache = env_of(container)["XDG_CACHE_HOME"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == cache]
    (volume,) = [
        v for v in operator["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    ]
    assert "emptyDir" in volume


# ---------------------------------------------------------------- webhook configuration


def test_webhook_configuration_excludes_the_control_plane_and_its_own_namespace(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, namespace="platform-config")

    mwc = one(docs, "MutatingWebhookConfiguration", "dynamic-config")
    (hook,) = mwc["webhooks"]
    assert hook["name"] == "inject.dynamic-config.rs"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["timeoutSeconds"] == 5
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["rules"][0]["operations"] == ["CREATE"]
    assert hook["rules"][0]["resources"] == ["pods"]
    assert hook["clientConfig"]["service"] == {
        "name": "dynamic-config-webhook",
        "namespace": "platform-config",
        "path": "/mutate",
        "port": 443,
    }
    (expression,) = hook["namespaceSelector"]["matchExpressions"]
    assert expression == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "kube-node-lease", "platform-config"],
    }
    assert "objectSelector" not in hook


def test_namespace_gating_object_selector_and_extra_exclusions(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["gating"])

    (hook,) = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    names, gate = hook["namespaceSelector"]["matchExpressions"]
    assert names["values"] == [
        "kube-system",
        "kube-node-lease",
        "dynamic-config",
        "monitoring",
        "istio-system",
    ]
    assert gate == {"key": "dynamic-config.rs/injection", "operator": "In", "values": ["enabled"]}
    assert hook["objectSelector"] == {"matchLabels": {"team": "payments"}}
    assert hook["failurePolicy"] == "Fail"


# ---------------------------------------------------------------------------- TLS modes


def test_chart_minted_tls_embeds_the_secret_ca_and_rolls_on_it(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path)

    secret = one(docs, "Secret", "dynamic-config-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    (hook,) = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    pem = base64.b64decode(secret["data"]["tls.crt"]).decode()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    template = _webhook(docs)["spec"]["template"]
    assert "checksum/tls" in template["metadata"]["annotations"]
    assert template["spec"]["automountServiceAccountToken"] is False
    sa = one(docs, "ServiceAccount", "dynamic-config-webhook")
    assert sa["automountServiceAccountToken"] is False
    assert not by_kind(docs, "Role") and not by_kind(docs, "ClusterRole")


def test_chart_minted_certificate_names_the_service(helm_bin: Path, tmp_path: Path) -> None:
    from cryptography import x509

    docs = _render(helm_bin, tmp_path, namespace="cfg")

    secret = one(docs, "Secret", "dynamic-config-webhook-tls")
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {
        "dynamic-config-webhook.cfg.svc",
        "dynamic-config-webhook.cfg",
    }
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    assert cert.issuer == ca.subject
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert 3649 <= days <= 3651


def test_cert_manager_mode_issues_a_certificate_and_injects_the_ca(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["cert-manager"])

    certificate = one(docs, "Certificate", "dynamic-config-webhook")
    assert certificate["spec"]["secretName"] == "dynamic-config-webhook-tls"
    assert certificate["spec"]["dnsNames"] == [
        "dynamic-config-webhook.dynamic-config.svc",
        "dynamic-config-webhook.dynamic-config",
    ]
    assert certificate["spec"]["issuerRef"]["name"] == "internal-ca"
    assert certificate["spec"]["issuerRef"]["kind"] == "ClusterIssuer"
    assert certificate["spec"]["duration"] == "2160h"
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "dynamic-config/dynamic-config-webhook"
    )
    assert "caBundle" not in mwc["webhooks"][0]["clientConfig"]
    assert not by_kind(docs, "Secret")
    assert "checksum/tls" not in _webhook(docs)["spec"]["template"]["metadata"]["annotations"]


def test_cert_manager_without_an_issuer_fails_with_a_sentence(
    helm_bin: Path, tmp_path: Path
) -> None:
    result = helm_template(helm_bin, tmp_path, "webhook.certManager.enabled=true", check=False)

    assert result.returncode != 0
    assert "webhook.certManager.issuerRef.name is required" in result.stderr


def test_selfrotate_mode_grants_exactly_its_narrow_rbac(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["selfrotate"])

    secret = one(docs, "Secret", "dynamic-config-webhook-tls")
    assert secret["data"] == {"tls.crt": "", "tls.key": ""}
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    role = one(docs, "Role", "dynamic-config-webhook-selfrotate")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["dynamic-config-webhook-tls"],
            "verbs": ["get", "patch", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["dynamic-config-webhook-rotation"],
            "verbs": ["get", "update", "patch"],
        },
    ]
    cluster_role = one(docs, "ClusterRole", "dynamic-config-selfrotate")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": ["dynamic-config"],
            "verbs": ["get", "patch"],
        }
    ]
    one(docs, "RoleBinding", "dynamic-config-webhook-selfrotate")
    one(docs, "ClusterRoleBinding", "dynamic-config-selfrotate")
    deployment = _webhook(docs)
    spec = deployment["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is True
    assert spec["volumes"][0]["secret"]["optional"] is True
    webhook = _container(deployment, "webhook")
    assert webhook["livenessProbe"]["initialDelaySeconds"] >= 90
    env = env_of(webhook)
    assert env["DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE"] == "1"
    assert env["DYNAMIC_CONFIG_WEBHOOK_NAMESPACE"] == "dynamic-config"
    assert env["DYNAMIC_CONFIG_WEBHOOK_SERVICE"] == "dynamic-config-webhook"
    assert env["DYNAMIC_CONFIG_WEBHOOK_TLS_SECRET"] == "dynamic-config-webhook-tls"
    assert env["DYNAMIC_CONFIG_WEBHOOK_MWC"] == "dynamic-config"
    assert (
        "caBundle" not in one(docs, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]
    )


def test_own_cert_mode_serves_the_installers_secret_and_trusts_its_ca(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["own-cert"])

    assert not by_kind(docs, "Secret") and not by_kind(docs, "Certificate")
    template = _webhook(docs)["spec"]["template"]
    (tls,) = [v for v in template["spec"]["volumes"] if v["name"] == "tls"]
    assert tls == {"name": "tls", "secret": {"secretName": "installer-tls"}}
    webhook = _container(_webhook(docs), "webhook")
    assert _mounts(webhook)["tls"] == "/tls"
    env = env_of(webhook)
    assert (env["DYNAMIC_CONFIG_WEBHOOK_TLS_CERT"], env["DYNAMIC_CONFIG_WEBHOOK_TLS_KEY"]) == (
        "/tls/tls.crt",
        "/tls/tls.key",
    )
    assert "DYNAMIC_CONFIG_WEBHOOK_SELF_ROTATE" not in env
    assert template["spec"]["automountServiceAccountToken"] is False
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert base64.b64decode(mwc["webhooks"][0]["clientConfig"]["caBundle"]) == CA_PEM
    assert "cert-manager.io/inject-ca-from" not in mwc["metadata"].get("annotations", {})


def test_own_cert_takes_the_ca_as_pem_too(helm_bin: Path, tmp_path: Path) -> None:
    values = {"webhook": {"ownCert": {"enabled": True, "secretName": "installer-tls",
                                      "caBundle": CA_PEM.decode()}}}  # fmt: skip

    docs = _render(helm_bin, tmp_path, values=values)

    (hook,) = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == CA_BUNDLE


def test_own_cert_rolls_the_pods_on_a_new_ca(helm_bin: Path, tmp_path: Path) -> None:
    def checksum(ca_bundle: str) -> str:
        docs = _render(helm_bin, tmp_path, *TOGGLES["own-cert"][:2],
                       f"webhook.ownCert.caBundle={ca_bundle}")  # fmt: skip
        return str(_webhook(docs)["spec"]["template"]["metadata"]["annotations"]["checksum/tls"])

    assert checksum(CA_BUNDLE) != checksum(base64.b64encode(_ca_certificate()).decode())


def test_network_policy_admits_the_webhook_port_and_calls_nobody(
    helm_bin: Path, tmp_path: Path
) -> None:
    plain = one(_render(helm_bin, tmp_path, "networkPolicy.enabled=true"), "NetworkPolicy")
    rotating = one(
        _render(helm_bin, tmp_path, *TOGGLES["network-policy-selfrotate"]), "NetworkPolicy"
    )

    assert plain["spec"]["ingress"] == [
        {"ports": [{"port": 8443, "protocol": "TCP"}, {"port": 9091, "protocol": "TCP"}]}
    ]
    assert plain["spec"]["egress"] == []
    assert rotating["spec"]["egress"] == [
        {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    ]


def test_service_monitor_scrapes_the_metrics_port(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["service-monitor"])

    monitor = one(docs, "ServiceMonitor", "dynamic-config-webhook")
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "interval": "30s"}]
    service = one(docs, "Service", "dynamic-config-webhook")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {
        "https": 443,
        "metrics": 9091,
    }


def test_webhook_deployment_spreads_and_keeps_two_replicas_available(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path)

    deployment = _webhook(docs)
    assert deployment["spec"]["replicas"] == 2
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    pdb = one(docs, "PodDisruptionBudget", "dynamic-config-webhook")
    assert pdb["spec"]["minAvailable"] == 1
    webhook = _container(deployment, "webhook")
    assert {p["name"]: p["containerPort"] for p in webhook["ports"]} == {
        "https": 8443,
        "metrics": 9091,
    }
    assert webhook["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "https",
        "scheme": "HTTPS",
    }
    assert webhook["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = env_of(webhook)
    assert env["DYNAMIC_CONFIG_WEBHOOK_ADDR"] == "0.0.0.0:8443"
    assert env["DYNAMIC_CONFIG_WEBHOOK_METRICS_ADDR"] == "0.0.0.0:9091"
    assert env["DYNAMIC_CONFIG_AGENT_IMAGE"] == "ghcr.io/dynconf/dynconf-agent:v0.3.0"
    assert env["DYNAMIC_CONFIG_AGENT_CPU_REQUEST"] == "10m"
    assert env["DYNAMIC_CONFIG_AGENT_MEMORY_REQUEST"] == "32Mi"
    assert env["DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT"] == "64Mi"
    assert env["DYNAMIC_CONFIG_AGENT_METRICS_PORT"] == "9110"
    for unset in ("DYNAMIC_CONFIG_AGENT_CPU_LIMIT", "DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW"):
        assert unset not in env
    for name in ("POD_NAME", "POD_NAMESPACE", "NODE_NAME"):
        assert name in env


# ------------------------------------------------------------------------- installation


def test_string_settings_travel_as_environment_variables(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["string-installation"])

    env = env_of(_container(_webhook(docs), "webhook"))
    assert env["DYNAMIC_CONFIG_AGENT_SOURCE"] == "consul"
    assert env["DYNAMIC_CONFIG_AGENT_PATH"] == "/config/rendered.toml"
    assert env["DYNAMIC_CONFIG_AGENT_FILE_MODE"] == "0640"
    assert env["DYNAMIC_CONFIG_AGENT_WATCH_SECONDS"] == "30"
    assert env["DYNAMIC_CONFIG_AGENT_DEFAULTS_OVERRIDABLE"] == "false"
    assert env["DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS"] == (
        "consul: endpoint=http://consul.infra.svc:8500!, watch-seconds=10"
    )
    assert (
        env["DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW"] == "payments: HTTPS_PROXY, AWS_*; *: RUST_LOG"
    )
    assert env["DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY"] == "sandbox: git"
    assert env["DYNAMIC_CONFIG_AGENT_PULL_SECRET"] == "mirror-cred"
    assert "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE" not in env
    assert not by_kind(docs, "ConfigMap")


def test_map_settings_travel_as_the_mounted_installation_document(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, values=MAP_INSTALLATION)

    config_map = one(docs, "ConfigMap", "dynamic-config-webhook-installation")
    document = yaml.safe_load(config_map["data"]["installation.yaml"])
    assert document == {
        "storeDefaults": MAP_INSTALLATION["agent"]["defaults"]["perStore"],
        "sourceAllow": {"payments": ["vault", "s3"], "*": ["consul"]},
        "agentEnvAllow": {"payments": ["HTTPS_PROXY", "AWS_*"]},
    }
    deployment = _webhook(docs)
    webhook = _container(deployment, "webhook")
    env = env_of(webhook)
    assert env["DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"] == "/etc/dynamic-config/installation.yaml"
    assert env["DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY"] == "sandbox: git"
    for moved in ("DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS", "DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW"):
        assert moved not in env
    assert {"name": "installation", "mountPath": "/etc/dynamic-config", "readOnly": True} in (
        webhook["volumeMounts"]
    )
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "installation",
        "configMap": {"name": config_map["metadata"]["name"]},
    } in volumes
    assert "checksum/installation" in deployment["spec"]["template"]["metadata"]["annotations"]


def test_digest_wins_over_tag_and_empty_tag_is_the_app_version(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["digests"])

    webhook = _container(_webhook(docs), "webhook")
    assert webhook["image"] == "ghcr.io/dynconf/dynconf-webhook@sha256:" + "a" * 64
    assert env_of(webhook)["DYNAMIC_CONFIG_AGENT_IMAGE"] == (
        "ghcr.io/dynconf/dynconf-agent@sha256:" + "b" * 64
    )
    operator = _container(one(docs, "Deployment", "dynamic-config-operator"), "operator")
    assert operator["image"] == "ghcr.io/dynconf/dynconf-operator@sha256:" + "c" * 64
    node_agent = _container(one(docs, "DaemonSet", "dynamic-config-node-agent"), "node-agent")
    assert node_agent["image"] == "ghcr.io/dynconf/dynconf-node-agent@sha256:" + "d" * 64


def _images(docs: list[Manifest]) -> dict[str, str]:
    """Every image the render names: each container's, and the agent image the webhook injects."""
    images = {}
    for where, spec in pod_specs(docs):
        for container in spec.get("initContainers", []) + spec["containers"]:
            images[f"{where}/{container['name']}"] = container["image"]
    webhook = _container(_webhook(docs), "webhook")
    images["DYNAMIC_CONFIG_AGENT_IMAGE"] = env_of(webhook)["DYNAMIC_CONFIG_AGENT_IMAGE"]
    return images


def test_default_images_are_ours_at_the_app_version(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, "operator.enabled=true", "nodeAgent.enabled=true")

    tag = f"v{APP_VERSION}"
    assert _images(docs) == {
        "Deployment/dynamic-config-webhook/webhook": f"ghcr.io/dynconf/dynconf-webhook:{tag}",
        "DYNAMIC_CONFIG_AGENT_IMAGE": f"ghcr.io/dynconf/dynconf-agent:{tag}",
        "Deployment/dynamic-config-operator/operator": f"ghcr.io/dynconf/dynconf-operator:{tag}",
        "DaemonSet/dynamic-config-node-agent/node-agent": (
            f"ghcr.io/dynconf/dynconf-node-agent:{tag}"
        ),
        "DaemonSet/dynamic-config-node-agent/node-driver-registrar": (
            "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0"
        ),
    }


def test_the_webhooks_built_in_agent_image_is_the_charts_default(
    helm_bin: Path, tmp_path: Path
) -> None:
    # the image an installation without DYNAMIC_CONFIG_AGENT_IMAGE injects is this chart's own
    docs = _render(helm_bin, tmp_path)

    assert _images(docs)["DYNAMIC_CONFIG_AGENT_IMAGE"] == BUILTIN_IMAGE


def test_image_registry_replaces_the_registry_of_every_image(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["image-registry"])

    tag = f"v{APP_VERSION}"
    assert _images(docs) == {
        "Deployment/dynamic-config-webhook/webhook": (
            f"registry.example:5000/dynconf/dynconf-webhook:{tag}"
        ),
        "DYNAMIC_CONFIG_AGENT_IMAGE": f"registry.example:5000/dynconf/dynconf-agent:{tag}",
        "Deployment/dynamic-config-operator/operator": (
            f"registry.example:5000/dynconf/dynconf-operator:{tag}"
        ),
        "DaemonSet/dynamic-config-node-agent/node-agent": (
            f"registry.example:5000/dynconf/dynconf-node-agent:{tag}"
        ),
        "DaemonSet/dynamic-config-node-agent/node-driver-registrar": (
            "registry.example:5000/sig-storage/csi-node-driver-registrar:v2.13.0"
        ),
    }


def test_image_registry_keeps_each_images_path_digest_and_tag(
    helm_bin: Path, tmp_path: Path
) -> None:
    registry = "global.imageRegistry=mirror.example/proxy"
    docs = _render(helm_bin, tmp_path, *TOGGLES["digests"], registry, "agent.image=team/agent",
                   "nodeAgent.registrar.tag=v2.14.0")  # fmt: skip

    images = _images(docs)
    assert images["Deployment/dynamic-config-webhook/webhook"] == (
        "mirror.example/proxy/dynconf/dynconf-webhook@sha256:" + "a" * 64
    )
    # a repository without a registry of its own gets the registry in front
    assert (
        images["DYNAMIC_CONFIG_AGENT_IMAGE"] == "mirror.example/proxy/team/agent@sha256:" + "b" * 64
    )
    assert images["DaemonSet/dynamic-config-node-agent/node-driver-registrar"] == (
        "mirror.example/proxy/sig-storage/csi-node-driver-registrar:v2.14.0"
    )


# ----------------------------------------------------------------------- operator, RBAC


def test_operator_rbac_and_deployment(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, "operator.enabled=true")

    role = one(docs, "ClusterRole", "dynamic-config-operator")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r["verbs"] for r in role["rules"]}
    assert rules[(("dynamic-config.rs",), ("dynamicconfigrenders/status",))] == [
        "get",
        "update",
        "patch",
    ]
    assert rules[(("",), ("secrets",))] == ["get", "create", "update", "patch"]
    assert rules[(("coordination.k8s.io",), ("leases",))] == ["get", "create", "update"]
    binding = one(docs, "ClusterRoleBinding", "dynamic-config-operator")
    assert binding["subjects"][0]["name"] == "dynamic-config-operator"
    operator = _container(one(docs, "Deployment", "dynamic-config-operator"), "operator")
    assert operator["ports"] == [{"name": "metrics", "containerPort": 9090}]
    assert operator["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert operator["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = env_of(operator)
    assert env["DYNAMIC_CONFIG_OPERATOR_METRICS_ADDR"] == "0.0.0.0:9090"
    assert "POD_NAME" in env and "POD_NAMESPACE" in env
    assert not by_kind(docs, "PodDisruptionBudget")[1:], "the operator PDB needs replicas > 1"


def test_operator_pdb_only_when_replicated(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["operator-ha"])

    pdb = one(docs, "PodDisruptionBudget", "dynamic-config-operator")
    assert pdb["spec"]["minAvailable"] == 1
    assert one(docs, "Deployment", "dynamic-config-operator")["spec"]["replicas"] == 3


def test_agent_events_role_per_listed_namespace(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["agent-events"])
    group_docs = _render(
        helm_bin, tmp_path, "agent.events.enabled=true", "agent.events.namespaces={team-a}"
    )

    roles = by_kind(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["payments", "shop"]
    for role in roles:
        assert role["metadata"]["name"] == "dynamic-config-agent-events"
        assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    bindings = by_kind(docs, "RoleBinding")
    assert [b["subjects"] for b in bindings if b["metadata"]["namespace"] == "shop"] == [
        [{"kind": "ServiceAccount", "name": "billing", "namespace": "shop"}]
    ]
    (binding,) = by_kind(group_docs, "RoleBinding")
    assert binding["subjects"] == [
        {
            "kind": "Group",
            "apiGroup": "rbac.authorization.k8s.io",
            "name": "system:serviceaccounts:team-a",
        }
    ]
    assert env_of(_container(_webhook(docs), "webhook"))["DYNAMIC_CONFIG_WEBHOOK_ALLOW_EVENTS"] == (
        "true"
    )


def test_classes_grant_list_and_watch_on_both_class_kinds(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["classes"])

    role = one(docs, "ClusterRole", "dynamic-config-webhook-classes")
    assert role["rules"] == [
        {
            "apiGroups": ["dynamic-config.rs"],
            "resources": ["dynamicconfigclasses", "clusterdynamicconfigclasses"],
            "verbs": ["list", "watch"],
        }
    ]
    assert env_of(_container(_webhook(docs), "webhook"))["DYNAMIC_CONFIG_WEBHOOK_CLASSES"] == "true"


def test_explain_grants_the_proxy_path_to_the_webhook_service_only(
    helm_bin: Path, tmp_path: Path
) -> None:
    docs = _render(helm_bin, tmp_path, *TOGGLES["explain"])

    role = one(docs, "Role", "dynamic-config-webhook-explain")
    assert role["metadata"]["namespace"] == "dynamic-config"
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": [
                "https:dynamic-config-webhook:https",
                "https:dynamic-config-webhook:443",
            ],
            "verbs": ["create"],
        }
    ]
    binding = one(docs, "RoleBinding", "dynamic-config-webhook-explain")
    assert binding["roleRef"]["name"] == "dynamic-config-webhook-explain"
    assert binding["subjects"] == [
        {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}
    ]
    assert env_of(_container(_webhook(docs), "webhook"))["DYNAMIC_CONFIG_WEBHOOK_EXPLAIN"] == "true"


def test_explain_is_off_by_default_and_binds_nobody_unless_told(
    helm_bin: Path, tmp_path: Path
) -> None:
    default = _render(helm_bin, tmp_path)
    unbound = _render(helm_bin, tmp_path, "webhook.explain.enabled=true")

    assert not [d for d in default if d["metadata"]["name"].endswith("-explain")]
    assert "DYNAMIC_CONFIG_WEBHOOK_EXPLAIN" not in env_of(_container(_webhook(default), "webhook"))
    assert one(unbound, "Role", "dynamic-config-webhook-explain")
    assert not [d for d in unbound if d["kind"] == "RoleBinding"]


@pytest.mark.parametrize(
    "added", ["webhook.explain", "operator.restarts", "global", "webhook.ownCert"]
)
def test_a_release_upgraded_with_reuse_values_from_before_a_value_existed_renders(
    helm_bin: Path, tmp_path: Path, added: str
) -> None:
    # `helm upgrade --reuse-values` from a chart that did not have the value: the key is absent
    older = _render(helm_bin, tmp_path, "operator.enabled=true", f"{added}=null")

    env = {k for d in older if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]
           ["containers"] for k in env_of(c)}  # fmt: skip
    assert not {"DYNAMIC_CONFIG_WEBHOOK_EXPLAIN", "DYNAMIC_CONFIG_OPERATOR_RESTARTS"} & env


API_FEATURES: dict[str, tuple[tuple[str, ...], bool]] = {
    "default": ((), False),
    "cert-manager": (TOGGLES["cert-manager"], False),
    "selfrotate": (TOGGLES["selfrotate"], True),
    "classes": (TOGGLES["classes"], True),
    "classes-cert-manager": ((*TOGGLES["cert-manager"], *TOGGLES["classes"]), True),
    "classes-selfrotate": ((*TOGGLES["selfrotate"], *TOGGLES["classes"]), True),
    "explain": (TOGGLES["explain"], False),
}
"""Values → whether a feature of the webhook then calls the API server (needs a token)."""


@pytest.mark.parametrize("case", sorted(API_FEATURES))
def test_webhook_pod_holds_a_token_exactly_when_a_feature_calls_the_api(
    case: str, helm_bin: Path, tmp_path: Path
) -> None:
    sets, needs = API_FEATURES[case]
    docs = _render(helm_bin, tmp_path, *sets, "networkPolicy.enabled=true")
    pod = _webhook(docs)["spec"]["template"]["spec"]
    account = one(docs, "ServiceAccount", pod["serviceAccountName"])

    assert account["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is needs
    egress = one(docs, "NetworkPolicy")["spec"]["egress"]
    assert (egress != []) is needs


# ------------------------------------------------------------------------ failing renders


FAILING: dict[str, tuple[tuple[str, ...], str]] = {
    "both-tls-modes": (
        (
            "webhook.certManager.enabled=true",
            "webhook.certManager.issuerRef.name=ca",
            "webhook.selfRotate.enabled=true",
        ),
        "webhook.certManager and webhook.selfRotate are two answers to one question: "
        "enable at most one",
    ),
    "webhook-latest": (("webhook.tag=latest",), 'tag "latest" is not an identity'),
    "agent-latest": (("agent.tag=latest",), 'tag "latest" is not an identity'),
    "operator-latest": (
        ("operator.enabled=true", "operator.tag=latest"),
        'tag "latest" is not an identity — pin a version or a digest',
    ),
    "node-agent-latest": (
        ("nodeAgent.enabled=true", "nodeAgent.tag=latest"),
        'tag "latest" is not an identity',
    ),
    "node-agent-registration": (
        ("nodeAgent.enabled=true", "nodeAgent.registration=sidecar"),
        "'/nodeAgent/registration': value must be one of 'registrar', 'builtin'",
    ),
    "unknown-key": (("webhook.failurPolicy=Fail",), "failurPolicy"),
    "failure-policy": (("webhook.failurePolicy=Sometimes",), "failurePolicy"),
    "digest": (("agent.digest=sha256:abc",), "digest"),
    "quantity": (("agent.defaults.memoryLimit=lots",), "memoryLimit"),
    "file-mode": (("agent.defaults.fileMode=0999",), "fileMode"),
    "source": (("agent.defaults.source=got",), "source"),
    "mode": (("agent.defaults.mode=daemon",), "mode"),
    "path": (("agent.defaults.path=config/rendered.toml",), "path"),
    "timeout": (("webhook.timeoutSeconds=31",), "timeoutSeconds"),
    "replicas": (("webhook.replicas=0",), "replicas"),
    "issuer-kind": (("webhook.certManager.issuerRef.kind=Vault",), "kind"),
    "service-type": (("webhook.service.type=ExternalName",), "type"),
    "self-signed-days": (("webhook.selfSignedDays=0",), "selfSignedDays"),
    "reinvocation": (("webhook.reinvocationPolicy=Always",), "reinvocationPolicy"),
    "pull-policy": (("operator.imagePullPolicy=Sometimes",), "imagePullPolicy"),
    "registry-scheme": (
        ("global.imageRegistry=https://registry.example",),
        'global.imageRegistry is "https://registry.example", which is not a registry host: set '
        "it to host, host:port or host/path with no scheme and no trailing slash",
    ),
    "registry-trailing-slash": (
        ("global.imageRegistry=registry.example:5000/",),
        "global.imageRegistry is",
    ),
    "registry-space": (("global.imageRegistry=registry example",), "global.imageRegistry is"),
    "own-cert-no-secret": (
        ("webhook.ownCert.enabled=true", f"webhook.ownCert.caBundle={CA_BUNDLE}"),
        "webhook.ownCert.secretName is required: name the kubernetes.io/tls Secret",
    ),
    "own-cert-no-ca": (
        ("webhook.ownCert.enabled=true", "webhook.ownCert.secretName=installer-tls"),
        "webhook.ownCert.caBundle is required: set it to the PEM (or base64 of the PEM) of the CA",
    ),
    "own-cert-not-a-certificate": (
        (*TOGGLES["own-cert"][:2], "webhook.ownCert.caBundle=bm90IGEgY2VydGlmaWNhdGU="),
        "webhook.ownCert.caBundle is neither a PEM certificate nor the base64 of one",
    ),
    "own-cert-and-selfrotate": (
        (*TOGGLES["own-cert"], "webhook.selfRotate.enabled=true"),
        "webhook.ownCert brings its own certificate, so webhook.certManager and "
        "webhook.selfRotate must stay disabled",
    ),
    "own-cert-and-cert-manager": (
        (*TOGGLES["own-cert"], *TOGGLES["cert-manager"]),
        "webhook.ownCert brings its own certificate",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_refused_values_fail_the_render_with_their_sentence(
    case: str, helm_bin: Path, tmp_path: Path
) -> None:
    sets, sentence = FAILING[case]

    result = helm_template(helm_bin, tmp_path, *sets, check=False)

    assert result.returncode != 0, f"{case} rendered"
    assert sentence in result.stderr, result.stderr


# ------------------------------------------------------------------------------- NOTES


def _notes(helm_bin: Path, tmp_path: Path, namespace: str) -> str:
    """NOTES.txt as Helm renders it (through a copy of the chart that exposes it as a
    ConfigMap: `helm template` never prints NOTES, and `helm install` needs a cluster)."""
    copy = tmp_path / f"chart-{namespace}"
    shutil.copytree(CHART, copy)
    notes = (copy / "templates" / "NOTES.txt").read_text()
    (copy / "templates" / "NOTES.txt").unlink()
    (copy / "templates" / "zz-notes.yaml").write_text(
        '{{- define "test.notes" }}' + notes + "{{ end }}\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data: {notes: {{ include "test.notes" . | quote }}}\n'
    )
    result = subprocess.run(
        [str(helm_bin), "template", "dc", str(copy), "-n", namespace,
         "--show-only", "templates/zz-notes.yaml"],
        capture_output=True,
        text=True,
        env=tool_env(tmp_path),
        timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return str(yaml.safe_load(result.stdout)["data"]["notes"])


def test_notes_warn_when_installed_into_default(helm_bin: Path, tmp_path: Path) -> None:
    in_default = _notes(helm_bin, tmp_path, "default")
    dedicated = _notes(helm_bin, tmp_path, "dynamic-config")

    assert 'WARNING: this release lives in the "default" namespace' in in_default
    assert "WARNING" not in dedicated


def _webhook_memory(docs: list[Manifest]) -> tuple[str, str]:
    webhook = _container(one(docs, "Deployment", "dynamic-config-webhook"), "webhook")
    return webhook["resources"]["requests"]["memory"], webhook["resources"]["limits"]["memory"]


def test_webhook_keeps_the_contracts_memory_defaults(helm_bin: Path, tmp_path: Path) -> None:
    assert _webhook_memory(_render(helm_bin, tmp_path)) == ("32Mi", "64Mi")


@pytest.mark.parametrize(
    "mode", ["webhook.selfRotate.enabled=true", "webhook.classes.enabled=true"]
)
def test_webhook_with_a_kubernetes_client_gets_room_for_it(
    helm_bin: Path, tmp_path: Path, mode: str
) -> None:
    # measured on the node: about 100Mi with the client; 64Mi was OOMKilled at start
    assert _webhook_memory(_render(helm_bin, tmp_path, mode)) == ("64Mi", "192Mi")


def test_webhook_memory_of_the_users_own_is_used_as_given(helm_bin: Path, tmp_path: Path) -> None:
    docs = _render(helm_bin, tmp_path, "webhook.selfRotate.enabled=true",
                   "webhook.resources.limits.memory=100Mi")  # fmt: skip

    assert _webhook_memory(docs) == ("32Mi", "100Mi")


# ------------------------------------------------------------------------------ call budgets


def test_per_store_budgets_reach_the_operator_and_node_agent_from_per_store(
    helm_bin: Path, tmp_path: Path
) -> None:
    values = {
        "operator": {"enabled": True},
        "nodeAgent": {"enabled": True},
        "agent": {"defaults": {"perStore": {
            "vault": {"store-budget": "5!", "auth": "kubernetes"},
            "consul": {"store-budget": "10/20"},
            "s3": {"file-mode": "0640"},
        }}},
    }  # fmt: skip
    docs = documents(helm_template(helm_bin, tmp_path, values=values).stdout)
    budgets = []
    for kind in ("Deployment", "DaemonSet"):
        for workload in by_kind(docs, kind):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                env = env_of(container)
                if "DYNAMIC_CONFIG_OPERATOR_METRICS_ADDR" in env or "KUBE_NODE_NAME" in env:
                    budgets.append(env.get("DYNAMIC_CONFIG_STORE_BUDGETS"))
    assert budgets == ["consul=10/20, vault=5"] * 2  # the operator's and the node agent's


def test_no_per_store_budget_sets_no_budget_variable(helm_bin: Path, tmp_path: Path) -> None:
    values = {"operator": {"enabled": True}, "nodeAgent": {"enabled": True}}
    docs = documents(helm_template(helm_bin, tmp_path, values=values).stdout)
    for kind in ("Deployment", "DaemonSet"):
        for workload in by_kind(docs, kind):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                assert "DYNAMIC_CONFIG_STORE_BUDGETS" not in env_of(container)
