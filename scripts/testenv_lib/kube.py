"""A real Kubernetes control plane on loopback, started the way controller-runtime's envtest does.

etcd + ``kube-apiserver`` (+ ``kube-controller-manager`` for garbage collection and namespace
deletion), all on free 127.0.0.1 ports, with:

- RBAC (and the Node authorizer) on, so tests see real ``403`` answers;
- a private CA, a serving certificate and an admin client certificate (``O=system:masters``)
  minted with ``openssl`` per run, and an admin kubeconfig;
- a service-account issuer and signing key, so the TokenRequest and TokenReview APIs work (the
  Vault, Consul and config-server tests log pods in with such tokens);
- the ``ServiceAccount`` admission plugin off, as in envtest, so a pod can be created in a fresh
  namespace without waiting for a controller to create its ``default`` ServiceAccount.

kube-apiserver is not packaged anywhere reachable from these machines, so ``install kube`` builds
it (and kube-controller-manager) from the Go module proxy through the wrapper module in
``scripts/k8s-build`` (its go.mod pins the version and explains why a wrapper is needed).  The
binaries are cached under ``<cache>/k8s/<version>/`` and never rebuilt; the Go module and build
caches live under ``<cache>/go`` so CI on the same machine reuses them.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .common import Context, TestenvError, go_binary, log, system_tool

BUILD_MODULE = Path(__file__).resolve().parents[1] / "k8s-build"
"""The wrapper Go module whose go.mod pins k8s.io/kubernetes (the one source of the version)."""

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager")

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
KCM_CONTROLLERS = (
    "garbagecollector,namespace,serviceaccount,deployment,replicaset,"
    "validatingadmissionpolicy-status-controller"
)
"""What tests need: ownerReference GC, namespace deletion, default SAs, Deployment pods, and
the ValidatingAdmissionPolicy type checking (``status.typeChecking``) the policy tests wait on."""

START_TIMEOUT = float(os.environ.get("DYNCONF_TESTENV_KUBE_START_TIMEOUT", "90"))


# ---------------------------------------------------------------------------- versions, paths
def k8s_version() -> str:
    """The Kubernetes release pinned in ``scripts/k8s-build/go.mod`` (``v1.35.4``)."""
    gomod = (BUILD_MODULE / "go.mod").read_text()
    match = re.search(r"^(?:require)?\s*k8s\.io/kubernetes\s+(v\S+)", gomod, re.MULTILINE)
    if not match:
        raise TestenvError(f"no k8s.io/kubernetes requirement in {BUILD_MODULE / 'go.mod'}")
    return match.group(1)


def kube_bin_dir(ctx: Context) -> Path:
    """Where the built binaries of the pinned version live."""
    return ctx.cache / "k8s" / k8s_version()


def go_env(ctx: Context) -> dict[str, str]:
    """Environment for every Go build: caches under the testenv cache, no CGO, trimmed paths.

    ``GOTOOLCHAIN=local`` stops the go command from fetching another toolchain by itself;
    ``-p`` (set by callers) keeps builds to the machine's two shared cores.
    """
    gopath = ctx.cache / "go"
    env = dict(os.environ)
    env.update(
        {
            "GOPATH": str(gopath),
            "GOMODCACHE": str(gopath / "mod"),
            "GOCACHE": str(gopath / "build"),
            "GOTOOLCHAIN": "local",
            "CGO_ENABLED": "0",
            "GOFLAGS": "-trimpath",
        }
    )
    return env


def go_parallelism() -> str:
    """Packages built at once; two cores are shared with whatever else runs."""
    return os.environ.get("DYNCONF_TESTENV_GO_P", "2")


def run_go(
    ctx: Context,
    args: list[str],
    *,
    cwd: Path,
    log_path: Path,
    extra_env: dict[str, str] | None = None,
) -> float:
    """Run one ``go`` command with its output in ``log_path``; returns seconds taken.

    Failure raises with the log's tail, so the real compiler error is what a reader sees.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log_path.open("w") as out:
        result = subprocess.run(
            [go_binary(), *args],
            cwd=cwd,
            env={**go_env(ctx), **(extra_env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    took = time.monotonic() - start
    if result.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
        raise TestenvError(
            f"go {' '.join(args[:2])} failed after {took:.0f} s ({log_path}):\n{tail}"
        )
    return took


# ---------------------------------------------------------------------------- install
def _version_ldflags(version: str) -> str:
    """Stamp the release into the binary so ``/version`` reports it, not ``v0.0.0-master``."""
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return " ".join(
        [
            "-s -w",
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    )


def build_kube_binary(ctx: Context, name: str) -> Path:
    """Build one binary of the pinned release into the cache (skipped when already there).

    Written to a temporary name and renamed, so an interrupted build never leaves a binary that
    looks finished.  Build time and size go to ``<bin dir>/<name>.build.json``.
    """
    version = k8s_version()
    out_dir = kube_bin_dir(ctx)
    target = out_dir / name
    if target.is_file():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f"{name}.tmp"
    log(f"building {name} {version} from the Go module proxy (several minutes on 2 cores)")
    took = run_go(
        ctx,
        [
            "build",
            "-p",
            go_parallelism(),
            "-ldflags",
            _version_ldflags(version),
            "-o",
            str(tmp),
            f"k8s.io/kubernetes/cmd/{name}",
        ],
        cwd=BUILD_MODULE,
        log_path=out_dir / f"{name}.build.log",
    )
    tmp.rename(target)
    size = target.stat().st_size
    info = {"version": version, "seconds": round(took, 1), "bytes": size}
    (out_dir / f"{name}.build.json").write_text(json.dumps(info) + "\n")
    log(f"built {name} in {took:.0f} s ({size / 2**20:.0f} MiB)")
    return target


def etcd_binary(ctx: Context) -> Path:
    """The etcd 3.5 server from Debian trixie: the very extract the etcd store server uses."""
    from .stores import ETCD_PACKAGES

    root = ctx.apt_download(ETCD_PACKAGES, dest="etcd")
    path = root / "usr" / "bin" / "etcd"
    if not path.is_file():
        raise TestenvError(f"{' '.join(ETCD_PACKAGES)} extracted into {root} but no usr/bin/etcd")
    return path


def with_controller_manager() -> bool:
    """kube-controller-manager is built and started unless a developer opts out to save time."""
    return os.environ.get("DYNCONF_TESTENV_KUBE_CONTROLLER_MANAGER", "1") != "0"


def install_kube(ctx: Context) -> None:
    """etcd, kube-apiserver and kube-controller-manager of the pinned release, into the cache."""
    etcd_binary(ctx)
    build_kube_binary(ctx, "kube-apiserver")
    if with_controller_manager():
        build_kube_binary(ctx, "kube-controller-manager")


# ---------------------------------------------------------------------------- certificates
def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        [system_tool("openssl"), *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise TestenvError(f"openssl {args[0]} failed: {result.stderr.strip()}")


def _ec_key(cwd: Path, name: str) -> None:
    """P-256 keys: each takes milliseconds, where RSA would add seconds to every start."""
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", f"{name}.key", cwd=cwd)  # fmt: skip


CERT_DAYS = 30
BACKDATE_SECONDS = 24 * 3600
"""Every certificate of the control plane starts a day before it is minted, as a real
cluster's were minted long before its workloads run: a client whose clock runs behind (the
clock-skew tests run ours ten minutes behind) must not find the API server's certificate not
yet valid only because the test environment made it a moment ago."""

_CA_CONFIG = """\
[ ca ]
default_ca = run_ca
[ run_ca ]
database = index.txt
new_certs_dir = issued
serial = serial
default_md = sha256
policy = any_name
unique_subject = no
email_in_dn = no
preserve = yes
[ any_name ]
organizationName = optional
commonName = supplied
"""
"""``openssl ca``'s settings for the run's CA: the one signer here that takes a start date."""

_KEY_IDS = "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n"
"""Key identifiers, which strict verifiers (Python 3.13's default) require."""


def _validity() -> tuple[str, str]:
    """``openssl ca``'s start and end dates: a day ago, and ``CERT_DAYS`` from now."""
    now = time.time()
    stamp = "%Y%m%d%H%M%SZ"
    return (
        time.strftime(stamp, time.gmtime(now - BACKDATE_SECONDS)),
        time.strftime(stamp, time.gmtime(now + CERT_DAYS * 86400)),
    )


def first_serial() -> str:
    """A random first serial for ``openssl ca``: sixteen hex digits, a positive 63-bit number.

    openssl reads the serial file as hex pairs and refuses an odd count of digits, which a
    plain ``:X`` of a random number gives whenever its top nibble is 0 (one start in 16)."""
    return f"{(int.from_bytes(os.urandom(8), 'big') >> 1) | (1 << 62):016X}"


def _sign(cwd: Path, name: str, extensions: str, *, selfsign: bool = False) -> None:
    """Sign ``<name>.csr`` into ``<name>.crt`` with the run's CA (itself, ``selfsign``)."""
    (cwd / "issued").mkdir(exist_ok=True)
    (cwd / "index.txt").touch()
    if not (cwd / "serial").exists():
        (cwd / "serial").write_text(first_serial() + "\n")
    (cwd / "ca.cnf").write_text(_CA_CONFIG)
    (cwd / f"{name}.ext").write_text(extensions + _KEY_IDS)
    start, end = _validity()
    signer = ["-selfsign"] if selfsign else ["-cert", "ca.crt"]
    _openssl("ca", "-batch", "-notext", "-config", "ca.cnf", *signer, "-keyfile", "ca.key",
             "-in", f"{name}.csr", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
             "-startdate", start, "-enddate", end, cwd=cwd)  # fmt: skip


def _issue(cwd: Path, name: str, subject: str, extensions: str) -> None:
    """Sign ``<name>.crt`` for ``<name>.key`` with the run's CA."""
    _ec_key(cwd, name)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=cwd)
    _sign(cwd, name, extensions)


def mint_certificates(
    certs: Path,
    *,
    extra_sans: tuple[str, ...] = (),
    extra_clients: Mapping[str, str] | None = None,
) -> None:
    """CA, apiserver serving cert, admin and controller-manager client certs, SA signing key.

    ``extra_sans`` (``IP:…``/``DNS:…``) are added to the serving certificate; ``extra_clients``
    maps more client certificate names to their subjects (the node's kubelet, the scheduler).
    """
    certs.mkdir(parents=True, exist_ok=True)
    _ec_key(certs, "ca")
    _openssl("req", "-new", "-key", "ca.key", "-subj", "/CN=dynconf-test-kube-ca",
             "-out", "ca.csr", cwd=certs)  # fmt: skip
    _sign(
        certs,
        "ca",
        "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n",
        selfsign=True,
    )
    client = (
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=clientAuth\n"
    )
    _issue(
        certs,
        "apiserver",
        "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc"
        + "".join(f",{san}" for san in extra_sans)
        + "\n",
    )
    _issue(certs, "admin", "/O=system:masters/CN=admin", client)
    _issue(certs, "controller-manager", "/CN=system:kube-controller-manager", client)
    for name, subject in (extra_clients or {}).items():
        _issue(certs, name, subject, client)
    _ec_key(certs, "sa")
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=certs)


def write_kubeconfig(path: Path, server: str, certs: Path, user: str, client: str) -> None:
    """A kubeconfig with a client certificate; JSON, which every YAML kubeconfig reader accepts."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dynconf-test",
                "cluster": {"server": server, "certificate-authority": str(certs / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(certs / f"{client}.crt"),
                    "client-key": str(certs / f"{client}.key"),
                },
            }
        ],
        "contexts": [
            {"name": "dynconf-test", "context": {"cluster": "dynconf-test", "user": user}}
        ],
        "current-context": "dynconf-test",
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2) + "\n")


def admin_ssl_context(certs: Path) -> ssl.SSLContext:
    """TLS context that trusts the run's CA and presents the admin client certificate."""
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(str(certs / "admin.crt"), str(certs / "admin.key"))
    return context


def admin_get(server: str, certs: Path, path: str, timeout: float = 30.0) -> bytes:
    """One authenticated GET against the test apiserver (stdlib: no venv exists yet)."""
    with urllib.request.urlopen(  # noqa: S310 - https URL built from our own published server
        server + path, timeout=timeout, context=admin_ssl_context(certs)
    ) as resp:
        body: bytes = resp.read()
        return body


# ---------------------------------------------------------------------------- start
def _require_binaries(ctx: Context, controller_manager: bool) -> tuple[Path, Path, Path | None]:
    bins = kube_bin_dir(ctx)
    apiserver = bins / "kube-apiserver"
    if not apiserver.is_file():
        raise TestenvError(
            f"{apiserver} is not built: run `scripts/testenv install kube` first "
            f"(builds {k8s_version()} from the Go module proxy; see its log under {bins})"
        )
    kcm: Path | None = bins / "kube-controller-manager"
    if not controller_manager or not (kcm and kcm.is_file()):
        kcm = None
    return etcd_binary(ctx), apiserver, kcm


@dataclass(frozen=True)
class Flavor:
    """What differs between the envtest-like ``kube`` control plane and the one a node joins.

    ``name`` prefixes the data directory and process names, so both can run side by side in one
    run directory; ``env_prefix`` keeps their published values apart.
    """

    name: str = "kube"
    env_prefix: str = "DYNCONF_TEST_KUBE"
    kubeconfig_key: str = "DYNCONF_TEST_KUBECONFIG"
    extra_sans: tuple[str, ...] = ()
    extra_clients: Mapping[str, str] = field(default_factory=dict)
    apiserver_flags: Callable[[Path], list[str]] = lambda data: [
        "--disable-admission-plugins=ServiceAccount"
    ]
    """Flags beyond the common ones; gets the data directory (certificates under ``certs``)."""
    controllers: str = KCM_CONTROLLERS
    kcm_flags: Callable[[Path], list[str]] = lambda data: []
    scheduler: bool = False
    schemas: bool = True
    """Generate kubeconform schemas from this apiserver (the ``kube`` control plane does)."""


def start_kube(ctx: Context) -> dict[str, str]:
    """``start kube``: the control plane, with kube-controller-manager unless opted out."""
    return start_control_plane(ctx, controller_manager=with_controller_manager())


def start_control_plane(
    ctx: Context, *, controller_manager: bool, flavor: Flavor | None = None
) -> dict[str, str]:
    """Start etcd + kube-apiserver (+ kube-controller-manager); returns how to reach them."""
    flavor = flavor or Flavor()
    began = time.monotonic()
    etcd, apiserver, kcm = _require_binaries(ctx, controller_manager)
    data = ctx.data_dir(flavor.name, fresh=True)
    certs = data / "certs"
    mint_certificates(certs, extra_sans=flavor.extra_sans, extra_clients=flavor.extra_clients)
    prefix = flavor.name

    etcd_client, etcd_peer = ctx.free_ports(2)
    (secure_port,) = ctx.free_ports(1)
    etcd_url = f"http://127.0.0.1:{etcd_client}"
    peer_url = f"http://127.0.0.1:{etcd_peer}"
    ctx.spawn(
        f"{prefix}-etcd",
        [
            str(etcd),
            "--name", "kube",
            "--data-dir", str(data / "etcd"),
            "--listen-client-urls", etcd_url,
            "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url,
            "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"kube={peer_url}",
            "--heartbeat-interval", "10",
            "--election-timeout", "100",
            "--unsafe-no-fsync",
            "--log-level", "warn",
        ],
    )  # fmt: skip
    ctx.wait_http(
        f"{etcd_url}/health",
        timeout=30,
        ok=lambda status, body: status == 200 and b'"true"' in body,
        proc=f"{prefix}-etcd",
    )

    server = f"https://127.0.0.1:{secure_port}"
    apiserver_proc = "kube-apiserver" if prefix == "kube" else f"{prefix}-apiserver"
    ctx.spawn(
        apiserver_proc,
        [
            str(apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={secure_port}",
            f"--tls-cert-file={certs / 'apiserver.crt'}",
            f"--tls-private-key-file={certs / 'apiserver.key'}",
            f"--client-ca-file={certs / 'ca.crt'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            *flavor.apiserver_flags(data),
            f"--service-account-issuer={server}",
            f"--service-account-key-file={certs / 'sa.pub'}",
            f"--service-account-signing-key-file={certs / 'sa.key'}",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            # `stop` signals etcd and the apiserver together; on exit the apiserver would
            # then retry deleting its endpoint lease and identity lease from a dead etcd
            # and outlive the stop timeout.  Nothing here uses either.
            "--endpoint-reconciler-type=none",
            "--feature-gates=APIServerIdentity=false",
        ],
    )
    ssl_context = admin_ssl_context(certs)
    deadline = time.monotonic() + START_TIMEOUT
    ctx.wait_http(
        f"{server}/readyz",
        timeout=START_TIMEOUT,
        proc=apiserver_proc,
        ssl_context=ssl_context,
    )
    # envtest waits for the bootstrap controller's `default` namespace: before it exists,
    # creating objects in `default` fails.
    ctx.wait_http(
        f"{server}/api/v1/namespaces/default",
        timeout=max(5.0, deadline - time.monotonic()),
        proc=apiserver_proc,
        ssl_context=ssl_context,
    )

    kubeconfig = data / "admin.kubeconfig"
    write_kubeconfig(kubeconfig, server, certs, "admin", "admin")
    if kcm is not None:
        kcm_config = data / "controller-manager.kubeconfig"
        write_kubeconfig(
            kcm_config, server, certs, "system:kube-controller-manager", "controller-manager"
        )
        (kcm_port,) = ctx.free_ports(1)
        ctx.spawn(
            f"{prefix}-controller-manager",
            [
                str(kcm),
                f"--kubeconfig={kcm_config}",
                f"--controllers={flavor.controllers}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={data / 'kcm-certs'}",
                "--concurrent-gc-syncs=5",
                # as in a real cluster: each controller acts as its own ServiceAccount with
                # its bootstrap role (system:kube-controller-manager itself may not delete)
                "--use-service-account-credentials=true",
                "--profiling=false",
                *flavor.kcm_flags(data),
            ],
        )
        ctx.wait_tcp(kcm_port, timeout=max(10.0, deadline - time.monotonic()),
                     proc=f"{prefix}-controller-manager")  # fmt: skip
    if flavor.scheduler:
        scheduler_config = data / "scheduler.kubeconfig"
        write_kubeconfig(scheduler_config, server, certs, "system:kube-scheduler", "scheduler")
        (scheduler_port,) = ctx.free_ports(1)
        ctx.spawn(
            f"{prefix}-scheduler",
            [
                str(build_kube_binary(ctx, "kube-scheduler")),
                f"--kubeconfig={scheduler_config}",
                f"--authentication-kubeconfig={scheduler_config}",
                f"--authorization-kubeconfig={scheduler_config}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={scheduler_port}",
                f"--cert-dir={data / 'scheduler-certs'}",
                "--profiling=false",
            ],
        )
        ctx.wait_tcp(scheduler_port, timeout=max(10.0, deadline - time.monotonic()),
                     proc=f"{prefix}-scheduler")  # fmt: skip

    version = json.loads(admin_get(server, certs, "/version"))["gitVersion"]
    env = flavor.env_prefix
    values = {
        flavor.kubeconfig_key: str(kubeconfig),
        f"{env}_APISERVER": server,
        f"{env}_CA": str(certs / "ca.crt"),
        f"{env}_CLIENT_CERT": str(certs / "admin.crt"),
        f"{env}_CLIENT_KEY": str(certs / "admin.key"),
        f"{env}_SA_ISSUER": server,
        f"{env}_SA_PUBLIC_KEY": str(certs / "sa.pub"),
        f"{env}_VERSION": str(version),
        f"{env}_ETCD": etcd_url,
        f"{env}_CONTROLLER_MANAGER": "1" if kcm is not None else "0",
    }
    if flavor.schemas:
        try:
            from .tools import ensure_schemas_from

            values[f"{env}_SCHEMAS"] = str(ensure_schemas_from(ctx, server, certs))
        except (OSError, ValueError, TestenvError) as err:
            # kubeconform tests then skip or fail on their own; the control plane itself is fine
            log(f"kube: could not generate kubeconform schemas: {err}")
    log(f"{prefix} control plane {version} ready at {server} in {time.monotonic() - began:.1f} s")
    return values


INSTALLERS: dict[str, Callable[[Context], None]] = {"kube": install_kube}
SLOW: dict[str, int] = {"kube": 10}
"""The control plane's Go builds: first in the background worker (most slow tests need them)."""
SERVERS: dict[str, Callable[[Context], dict[str, str]]] = {"kube": start_kube}
