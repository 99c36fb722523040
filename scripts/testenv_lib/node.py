"""A real single-node cluster: a control plane on loopback and a kubelet node in a namespace.

``start node`` brings up, in about ten seconds warm:

- its own control plane on 127.0.0.1 (``kube.start_control_plane`` with the ``node`` flavor):
  etcd, kube-apiserver with the ``ServiceAccount`` admission plugin *on* (pods get projected
  tokens as on a real cluster) and a client certificate for kubelets, kube-controller-manager
  with the node-lifecycle, service-account, token and root-CA controllers (plus the workload
  controllers), and kube-scheduler.  It is separate from ``kube``, whose envtest-like apiserver
  keeps ServiceAccount admission off for the tests that rely on that;
- a private mount + network namespace (``unshare``; its holder process is ``node-ns``) in which
  containerd, runc, the CNI bridge, the kubelet and every pod live.  Inside it, and only there:
  ``/`` is made rshared again (kubelet mount propagation), ``/var`` and ``/run`` are overlaid
  with directories under the run's data dir, and ``/var/lib/{containerd,kubelet}`` bind-mounted
  from real ones (containerd's overlay snapshots cannot sit on an overlayfs), so containerd and
  the kubelet keep their standard paths (short enough for the Unix sockets under them, and what
  the chart's hostPaths name) and nothing reaches the machine's; the
  three global sysctls the kubelet would write are shadowed by read-only files holding the
  values it wants (so the machine's are never changed), and the CNI bridge ``cni0`` is
  pre-created with the node IP (the kubelet refuses a loopback node IP and there is no
  ``dummy`` device);
- three pipes across the namespace boundary (``netns_proxy.py``): the kubelet reaches the
  apiserver at ``https://10.88.0.1:6443`` inside the namespace; pods reach it at the
  ``kubernetes`` Service's ClusterIP (``10.0.0.1:443``, what the kubelet puts in every pod's
  ``KUBERNETES_SERVICE_HOST``/``_PORT``), an address the holder gives the namespace's ``lo``
  and a forward listens on; and the apiserver reaches the kubelet (logs, exec) and pods
  through its ``cluster`` egress selector, an HTTP CONNECT proxy on a Unix socket.  That one
  Service stands in for kube-proxy: no other ClusterIP is routed, and there is no cluster DNS
  (in-cluster clients read the environment variables; ``kubernetes.default.svc`` does not
  resolve).  Webhook and APIService Services need neither: ``--enable-aggregator-routing``
  makes the apiserver dial an endpoint's pod IP, which the endpoint controllers keep current.

Machine facts this works around (measured; see docs/testing.md): cgroups are v1 only, so the
kubelet needs ``failCgroupV1: false``; CAP_SYS_RESOURCE is withheld, so a negative
``oom_score_adj`` fails and the kubelet runs with ``oomScoreAdj: 0`` and containerd with
``restrict_oom_score_adj``.  cgroupfs is not namespaced, so the kubelet's cgroups go under a root
of this run's own (``cgroup_root``, created in every v1 hierarchy before the kubelet starts):
two checkouts' nodes can run at once, and ``stop`` removes exactly that tree.

Everything comes from Debian packages (runc, containerd, CNI plugins, busybox-static) and the
Go module proxy (kubelet, kube-scheduler, through ``scripts/k8s-build``); the pause and busybox
images are built here (``oci.py``), never pulled.  Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import kube
from .common import (
    SYSTEM_TOOL_DIRS,
    Context,
    TestenvError,
    go_binary,
    log,
    process_alive,
    stop_pids,
    system_tool,
)
from .oci import ImageConfig, write_archive

NODE_NAME = "dynconf-node"
NODE_IP = "10.88.0.1"
POD_SUBNET = "10.88.0.0/24"
APISERVER_PORT = 6443
"""Where the kubelet reaches the apiserver inside the namespace."""
KUBERNETES_SERVICE_IP = "10.0.0.1"
"""The ``kubernetes`` Service's ClusterIP: the first address of ``kube.SERVICE_CLUSTER_IP_RANGE``
(the apiserver's serving certificate names it).  Pods reach the apiserver here, port 443."""
KUBERNETES_SERVICE_PORT = 443

RUNTIME_PACKAGES = [
    "runc/bookworm",  # 1.1.5; trixie's needs glibc 2.38 (bookworm has 2.36)
    "containerd/bookworm",  # 1.6.20, CRI v1
    "containernetworking-plugins/bookworm",
    "busybox-static/bookworm",
]
PAUSE_IMAGE = "dynconf.local/pause:3.10.1"
BUSYBOX_IMAGE = "dynconf.local/busybox:1.35"
"""``dynconf.local/`` keeps any accidental pull away from a real registry name."""
HAND_LOADED = ("dynconf.local/*", "ghcr.io/dynconf/*")
"""The repositories of every image loaded into the node by hand (``ctr images import``): the
node's own and the project's images (``images.REGISTRY``); the kubelet never needs to pull them."""

SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
}
"""What the kubelet writes at start (machine-wide); shadowed inside the namespace instead."""

NODE_CONTROLLERS = ",".join(
    [
        "garbage-collector-controller",
        "namespace-controller",
        "serviceaccount-controller",
        "serviceaccount-token-controller",
        "root-ca-certificate-publisher-controller",
        "node-lifecycle-controller",
        "taint-eviction-controller",
        "pod-garbage-collector-controller",
        "deployment-controller",
        "replicaset-controller",
        "daemonset-controller",
        "statefulset-controller",
        "job-controller",
        "endpoints-controller",  # the apiserver resolves Services through Endpoints
        "endpointslice-controller",
        "ttl-controller",
        "validatingadmissionpolicy-status-controller",
    ]
)
"""Workloads schedule and run, pods get tokens and ``kube-root-ca.crt``, and the node's
``not-ready`` taint is lifted once the kubelet reports Ready."""

CGROUPFS = Path("/sys/fs/cgroup")
READY_TIMEOUT = float(os.environ.get("DYNCONF_TESTENV_NODE_READY_TIMEOUT", "90"))


# ---------------------------------------------------------------------------- install
def runtime_root(ctx: Context) -> Path:
    """The extracted runc + containerd + CNI plugins + busybox-static."""
    return ctx.apt_download(RUNTIME_PACKAGES, dest="node-runtime")


def images_dir(ctx: Context) -> Path:
    """The base images (pause, busybox): the same for every checkout, so in the cache."""
    return ctx.cache / "images"


def _build_pause(ctx: Context) -> Path:
    """The sandbox's PID 1, from ``pause.c`` in the pinned k8s.io/kubernetes module."""
    out = ctx.cache / "k8s" / kube.k8s_version() / "pause"
    if out.is_file():
        return out
    info = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"k8s.io/kubernetes@{kube.k8s_version()}"],
        cwd=kube.BUILD_MODULE,
        env=kube.go_env(ctx),
        capture_output=True,
        text=True,
        check=False,
    )
    if info.returncode != 0:
        raise TestenvError(f"go mod download k8s.io/kubernetes failed: {info.stderr.strip()}")
    source = Path(json.loads(info.stdout)["Dir"]) / "build" / "pause" / "linux" / "pause.c"
    tmp = out.with_suffix(".tmp")
    result = subprocess.run(
        [system_tool("gcc"), "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.10.1-dynconf",
         "-o", str(tmp), str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise TestenvError(
            f"gcc -static {source} failed (need gcc and libc6-dev):\n{result.stderr}"
        )
    subprocess.run([system_tool("strip"), str(tmp)], check=False)
    tmp.rename(out)
    return out


def _build_base_images(ctx: Context) -> None:
    """``pause`` (the sandbox image) and ``busybox`` (test pods' shell), as OCI archives."""
    out = images_dir(ctx)
    if (out / "pause.tar").is_file() and (out / "busybox.tar").is_file():
        return
    pause = _build_pause(ctx)
    busybox = runtime_root(ctx) / "bin" / "busybox"
    staging = ctx.cache / "images" / ".rootfs"
    shutil.rmtree(staging, ignore_errors=True)
    passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"  # noqa: S105
    group = "root:x:0:\nnogroup:x:65534:\n"
    pz = staging / "pause"
    (pz / "etc").mkdir(parents=True)
    shutil.copy2(pause, pz / "pause")
    (pz / "etc" / "passwd").write_text(passwd)
    (pz / "etc" / "group").write_text(group)
    write_archive(pz, out / "pause.tar", PAUSE_IMAGE,
                  ImageConfig(entrypoint=["/pause"], user="65535:65535"))  # fmt: skip
    bb = staging / "busybox"
    for sub in ("bin", "dev", "etc", "proc", "root", "sys", "tmp", "var"):
        (bb / sub).mkdir(parents=True)
    shutil.copy2(busybox, bb / "bin" / "busybox")
    applets = subprocess.run(
        [str(busybox), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    for applet in applets:
        if not (bb / "bin" / applet).exists():
            (bb / "bin" / applet).symlink_to("busybox")
    (bb / "tmp").chmod(0o1777)
    (bb / "etc" / "passwd").write_text(passwd)
    (bb / "etc" / "group").write_text(group)
    write_archive(bb, out / "busybox.tar", BUSYBOX_IMAGE, ImageConfig(cmd=["sh"]))
    shutil.rmtree(staging, ignore_errors=True)


def install_node(ctx: Context) -> None:
    """Everything ``start node`` needs, cached: the control plane, kubelet, runtime, images."""
    kube.install_kube(ctx)
    kube.build_kube_binary(ctx, "kubelet")
    kube.build_kube_binary(ctx, "kube-scheduler")
    root = runtime_root(ctx)
    for rel in ("usr/sbin/runc", "usr/bin/containerd", "usr/lib/cni/bridge", "bin/busybox"):
        if not (root / rel).is_file():
            raise TestenvError(f"{' '.join(RUNTIME_PACKAGES)} extracted into {root} but no {rel}")
    _build_base_images(ctx)


# ---------------------------------------------------------------------------- the namespace
HOLDER_SCRIPT = """#!/bin/sh
# Holds the node's private mount + network namespace; every node process joins it (nsenter).
set -eu
# ip and the other system tools may sit in sbin directories the caller's PATH leaves out
PATH="$PATH:{sbin_dirs}"
S={state}
mount --make-rshared /
for d in var run; do
  mkdir -p "$S/$d/upper" "$S/$d/work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$S/$d/upper,workdir=$S/$d/work" "/$d"
done
# containerd's snapshots are overlay mounts, which an overlayfs cannot hold: real directories
for d in containerd kubelet; do
  mkdir -p "$S/$d" "/var/lib/$d"
  mount --bind "$S/$d" "/var/lib/$d"
done
printf '127.0.0.1 localhost\\n{node_ip} {node_name}\\n' > "$S/hosts"
mount --bind "$S/hosts" /etc/hosts
printf 'nameserver 127.0.0.1\\n' > "$S/resolv.conf"
mount --bind "$S/resolv.conf" /etc/resolv.conf
mkdir -p "$S/sysctl"
for kv in {sysctls}; do
  k=${{kv%=*}}; v=${{kv#*=}}
  if [ "$(cat /proc/sys/$k)" != "$v" ]; then
    f="$S/sysctl/$(echo "$k" | tr / .)"; echo "$v" > "$f"; mount --bind -o ro "$f" "/proc/sys/$k"
  fi
done
ip link set lo up
# the kubernetes Service's ClusterIP, local to the namespace: pods reach it through cni0
ip addr add {service_ip}/32 dev lo
ip link add cni0 type bridge
ip addr add {node_ip}/24 dev cni0
ip link set cni0 up
echo $$ > "$S/holder.pid"
exec sleep infinity
"""


def _holder_pid(state: Path) -> int | None:
    try:
        pid = int((state / "holder.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if process_alive(pid) else None


def _start_namespace(ctx: Context, data: Path) -> int:
    state = data / "ns"
    state.mkdir(parents=True, exist_ok=True)
    script = state / "holder.sh"
    sysctls = " ".join(f"{k}={v}" for k, v in SYSCTLS.items())
    script.write_text(
        HOLDER_SCRIPT.format(
            state=state,
            node_ip=NODE_IP,
            node_name=NODE_NAME,
            sysctls=sysctls,
            service_ip=KUBERNETES_SERVICE_IP,
            sbin_dirs=":".join(SYSTEM_TOOL_DIRS),
        )
    )
    script.chmod(0o755)
    ctx.spawn("node-ns", [system_tool("unshare"), "--mount", "--net", "--propagation", "private",
                          "--fork", "/bin/sh", str(script)])  # fmt: skip
    deadline = time.monotonic() + 10
    while (pid := _holder_pid(state)) is None:
        ctx._check_alive("node-ns", "the node namespace")
        if time.monotonic() > deadline:
            raise TestenvError(f"the node namespace did not come up:\n{ctx.log_tail('node-ns')}")
        time.sleep(0.05)
    (state / "netns").write_text(os.readlink(f"/proc/{pid}/ns/net"))
    return pid


def nsenter(holder: int, argv: list[str]) -> list[str]:
    """``argv`` run inside the node's namespaces (nsenter execs it: same pid, same group)."""
    return [system_tool("nsenter"), "-t", str(holder), "-m", "-n", "--", *argv]


# ---------------------------------------------------------------------------- configs
def _containerd_config(data: Path, runtime: Path) -> str:
    return f"""version = 2
oom_score = 0
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # no CAP_SYS_RESOURCE: a negative oom_score_adj (pause -998, Guaranteed -997) fails in runc
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runtime / "usr" / "sbin" / "runc"}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{runtime / "usr" / "lib" / "cni"}"
    conf_dir = "{data / "cni" / "net.d"}"
"""


def _cni_config(data: Path) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "dynconf-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(data / "cni" / "ipam"),
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def _kubelet_config(data: Path, certs: Path, cgroup_root: str) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # 1.35 refuses cgroup v1 otherwise
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": True,
        "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "imageServiceEndpoint": "unix:///run/containerd/containerd.sock",
        # x509 only; nothing outside the namespace reaches port 10250 but the apiserver
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(certs / "ca.crt")},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "address": NODE_IP,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "oomScoreAdj": 0,  # -999 needs CAP_SYS_RESOURCE
        "protectKernelDefaults": False,  # the sysctls it wants are shadowed in the namespace
        "resolvConf": str(data / "kubelet" / "resolv.conf"),
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        # Absolute floors, not percentages: the node's disk is the machine's, shared with
        # every checkout and cache on it, so 5 % of a large shared disk (12 GiB of 252) tainted
        # the node with DiskPressure while gigabytes were free. 1 GiB still leaves room to
        # log and to unpack an image.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1Gi",
            "imagefs.available": "1Gi",
        },
        "imageGCHighThresholdPercent": 100,  # images are loaded by hand, never pulled back
        # Kubelet 1.35 re-checks pull credentials (KubeletEnsureSecretPulledImages, on by
        # default) per image ID: once it pulls an image from a registry, another name of the
        # same ID that was loaded by hand counts as not preloaded and is pulled again, which
        # fails offline (the release leg's upgrade: the registry's pull of a digest made the
        # hand-loaded ghcr.io tag of the same image unusable). The hand-loaded repositories
        # are declared pre-provisioned instead; every other image keeps the default checks.
        "imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
        "preloadedImagesVerificationAllowlist": list(HAND_LOADED),
        "maxPods": 110,
        "syncFrequency": "10s",
        "fileCheckFrequency": "5s",
        "nodeStatusReportFrequency": "10s",
    }


def _egress_config(uds: Path) -> dict[str, object]:
    return {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "HTTPConnect",
                    "transport": {"uds": {"udsName": str(uds)}},
                },
            }
        ],
    }


def node_flavor() -> kube.Flavor:
    """The control plane a node joins (see the module docstring)."""

    def apiserver_flags(data: Path) -> list[str]:
        certs = data / "certs"
        egress = data / "egress-selector.json"
        egress.write_text(json.dumps(_egress_config(data / "egress.sock"), indent=2) + "\n")
        return [
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={certs / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={certs / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--egress-selector-config-file={egress}",
            # no kube-proxy: a Service-backed webhook or APIService is dialled at an endpoint's
            # pod IP (through the cluster egress) instead of its ClusterIP
            "--enable-aggregator-routing=true",
        ]

    def kcm_flags(data: Path) -> list[str]:
        certs = data / "certs"
        return [
            f"--service-account-private-key-file={certs / 'sa.key'}",
            f"--root-ca-file={certs / 'ca.crt'}",
            "--node-monitor-period=1s",
        ]

    return kube.Flavor(
        name="node",
        env_prefix="DYNCONF_TEST_NODE",
        kubeconfig_key="DYNCONF_TEST_NODE_KUBECONFIG",
        extra_sans=(f"IP:{NODE_IP}",),
        extra_clients={
            "node": f"/O=system:nodes/CN=system:node:{NODE_NAME}",
            "apiserver-kubelet-client": "/O=system:masters/CN=kube-apiserver-kubelet-client",
            "scheduler": "/CN=system:kube-scheduler",
        },
        apiserver_flags=apiserver_flags,
        controllers=NODE_CONTROLLERS,
        kcm_flags=kcm_flags,
        scheduler=True,
        schemas=False,
    )


# ---------------------------------------------------------------------------- cgroups
def cgroup_root(ctx: Context) -> str:
    """This run directory's cgroup for the kubelet's pods (a name, the same in every hierarchy)."""
    return "dynconf-node-" + hashlib.sha256(str(ctx.run).encode()).hexdigest()[:10]


def _hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies (the cgroup2 mount holds only hugetlb here and is skipped)."""
    return sorted(p for p in CGROUPFS.iterdir() if p.is_dir() and p.name != "unified")


def _own_cgroups(ctx: Context) -> list[Path]:
    """Every hierarchy's copy of the root, the cgroup2 one included (the kubelet makes that)."""
    return sorted(p for p in CGROUPFS.glob(f"*/{cgroup_root(ctx)}") if p.is_dir())


def _make_cgroup_root(ctx: Context) -> None:
    """Create the root in each hierarchy; cpuset needs its cpus and mems before any child."""
    for hierarchy in _hierarchies():
        path = hierarchy / cgroup_root(ctx)
        path.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((hierarchy / knob).read_text())


def _remove_cgroups(ctx: Context) -> None:
    for root in _own_cgroups(ctx):  # depth first: a cgroup goes only once its children have
        for cgroup in sorted(
            (p for p in [root, *root.rglob("*")] if p.is_dir()), key=lambda p: -len(p.parts)
        ):
            with contextlib.suppress(OSError):  # still in use: reported by the caller
                cgroup.rmdir()


def _pod_pids(ctx: Context) -> list[int]:
    pids: set[int] = set()
    for root in _own_cgroups(ctx):
        for procs in root.rglob("cgroup.procs"):
            try:
                pids.update(int(line) for line in procs.read_text().split())
            except (OSError, ValueError):
                continue
    return sorted(pids)


# ---------------------------------------------------------------------------- start


def _node_status(server: str, certs: Path) -> dict[str, object] | None:
    try:
        node: dict[str, object] = json.loads(
            kube.admin_get(server, certs, f"/api/v1/nodes/{NODE_NAME}", timeout=5)
        )
    except (OSError, ValueError):
        return None
    return node


def _schedulable(node: dict[str, object] | None) -> bool:
    """Ready, and the lifecycle controller has lifted the ``not-ready`` taint."""
    if not node:
        return False
    status = node.get("status") or {}
    spec = node.get("spec") or {}
    if not isinstance(status, dict) or not isinstance(spec, dict):
        return False
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    blocked = any(t.get("effect") == "NoSchedule" for t in spec.get("taints") or [])
    return ready and not blocked


def _wait(
    what: str, check: Callable[[], bool], procs: list[str], ctx: Context, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for proc in procs:
            ctx._check_alive(proc, what)
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p} ---\n{ctx.log_tail(p, 15)}" for p in procs)
            raise TestenvError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")
        time.sleep(0.1)


def ctr_argv(ctx: Context, holder: int, *args: str) -> list[str]:
    """A ``ctr`` command against the node's containerd, in the CRI's ``k8s.io`` namespace."""
    ctr = runtime_root(ctx) / "usr" / "bin" / "ctr"
    return nsenter(holder, [str(ctr), "--address", "/run/containerd/containerd.sock",
                            "-n", "k8s.io", *args])  # fmt: skip


def import_images(ctx: Context, holder: int, archives: list[Path]) -> None:
    """Load OCI archives into the node's containerd (pods use ``imagePullPolicy: Never``)."""
    for archive in archives:
        result = subprocess.run(
            ctr_argv(ctx, holder, "images", "import", "--platform", "linux/amd64", str(archive)),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise TestenvError(f"ctr images import {archive} failed: {result.stderr.strip()}")


def start_node(ctx: Context) -> dict[str, str]:
    """``start node``: control plane, namespace, containerd, kubelet; waits until schedulable."""
    began = time.monotonic()
    if _pod_pids(ctx):
        raise TestenvError(
            f"processes still run in this run's cgroups ({cgroup_root(ctx)}): an earlier node "
            "was not stopped; `scripts/testenv stop node` stops it"
        )
    _remove_cgroups(ctx)
    _make_cgroup_root(ctx)
    runtime = runtime_root(ctx)
    kubelet = kube.build_kube_binary(ctx, "kubelet")
    values = kube.start_control_plane(ctx, controller_manager=True, flavor=node_flavor())
    data = ctx.run / "data" / "node"
    certs = data / "certs"
    server = values["DYNCONF_TEST_NODE_APISERVER"]
    plane_up = time.monotonic()

    holder = _start_namespace(ctx, data)
    here = Path(__file__).resolve().parent
    proxy = [sys.executable, str(here / "netns_proxy.py")]
    ctx.spawn(
        "node-egress", nsenter(holder, [*proxy, "connect", "--uds", str(data / "egress.sock")])
    )
    ctx.spawn("node-forward", [*proxy, "forward", "--listen-netns", f"/proc/{holder}/ns/net",
                               "--listen", f"{NODE_IP}:{APISERVER_PORT}",
                               "--to", server.removeprefix("https://")])  # fmt: skip
    ctx.spawn("node-service", [*proxy, "forward", "--listen-netns", f"/proc/{holder}/ns/net",
                               "--listen", f"{KUBERNETES_SERVICE_IP}:{KUBERNETES_SERVICE_PORT}",
                               "--to", server.removeprefix("https://")])  # fmt: skip

    for sub in ("containerd", "cni/net.d", "cni/ipam", "kubelet"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    (data / "containerd" / "config.toml").write_text(_containerd_config(data, runtime))
    (data / "cni" / "net.d" / "10-dynconf.conflist").write_text(json.dumps(_cni_config(data)))
    (data / "kubelet" / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    (data / "kubelet" / "config.json").write_text(
        json.dumps(_kubelet_config(data, certs, "/" + cgroup_root(ctx)))
    )
    kube.write_kubeconfig(data / "kubelet" / "kubeconfig", f"https://{NODE_IP}:{APISERVER_PORT}",
                          certs, f"system:node:{NODE_NAME}", "node")  # fmt: skip

    path = f"{runtime / 'usr' / 'bin'}:{runtime / 'usr' / 'sbin'}:/usr/sbin:/usr/bin:/sbin:/bin"
    ctx.spawn("node-containerd",
              nsenter(holder, [str(runtime / "usr" / "bin" / "containerd"),
                               "--config", str(data / "containerd" / "config.toml")]),
              env={"PATH": path})  # fmt: skip
    sock = data / "ns" / "run" / "upper" / "containerd" / "containerd.sock"
    _wait("containerd's socket", sock.exists, ["node-containerd"], ctx, 30)
    # the project's images (hundreds of MiB, 20 s to unpack) are loaded by the tests that use
    # them (tests/fixtures/node.py: node_image), so a start stays quick
    archives = sorted(images_dir(ctx).glob("*.tar"))
    import_images(ctx, holder, archives)
    runtime_up = time.monotonic()

    ctx.spawn("node-kubelet",
              nsenter(holder, [str(kubelet), f"--config={data / 'kubelet' / 'config.json'}",
                               f"--kubeconfig={data / 'kubelet' / 'kubeconfig'}",
                               f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
                               "--v=1"]),
              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})  # fmt: skip
    _wait(
        f"Node {NODE_NAME} Ready and untainted",
        lambda: _schedulable(_node_status(server, certs)),
        ["node-kubelet", "node-containerd", "node-controller-manager"],
        ctx,
        READY_TIMEOUT,
    )
    done = time.monotonic()
    log(
        f"node {NODE_NAME} schedulable in {done - began:.1f} s (control plane "
        f"{plane_up - began:.1f} s, namespace + containerd + {len(archives)} image(s) "
        f"{runtime_up - plane_up:.1f} s, kubelet {done - runtime_up:.1f} s)"
    )
    values.update(
        {
            "DYNCONF_TEST_NODE_NAME": NODE_NAME,
            "DYNCONF_TEST_NODE_IP": NODE_IP,
            "DYNCONF_TEST_NODE_HOLDER_PID": str(holder),
            "DYNCONF_TEST_NODE_CTR": str(runtime / "usr" / "bin" / "ctr"),
            "DYNCONF_TEST_NODE_IMAGES": ",".join(a.stem for a in archives),
        }
    )
    return values


# ---------------------------------------------------------------------------- stop
def _netns_pids(netns: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.readlink(proc / "ns" / "net") == netns:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _kill_all(pids: list[int], timeout: float) -> None:
    """SIGTERM, wait (zombie-aware), SIGKILL: for processes not started through ``spawn``."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(process_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def stop_node(ctx: Context) -> None:
    """Leave nothing behind: processes, the namespace (and with it every mount and link), cgroups.

    Order matters: the kubelet first (so nothing restarts what is being stopped), then the pods,
    containerd and its shims (they left containerd's process group), then the holder; the
    control plane and the pipes go with the generic ``stop`` that follows.
    """
    data = ctx.run / "data" / "node"
    for proc in ("node-kubelet", "node-containerd"):
        pid = ctx.pid_of(proc)
        if pid is not None:
            stop_pids({proc: pid}, timeout=10)
        if proc == "node-kubelet":
            # nothing is left to give them a graceful end, and a container's PID 1 (`sleep`)
            # ignores SIGTERM: a short wait, then SIGKILL
            _kill_all(_pod_pids(ctx), 0.5)
    netns_file = data / "ns" / "netns"
    holder = _holder_pid(data / "ns")
    if netns_file.is_file():
        netns = netns_file.read_text().strip()
        rest = [p for p in _netns_pids(netns) if p != holder]
        _kill_all(rest, 1)  # the shims outlive SIGTERM once their containers are gone
    pid = ctx.pid_of("node-ns")
    if pid is not None:
        stop_pids({"node-ns": pid}, timeout=5)
    if netns_file.is_file():
        deadline = time.monotonic() + 5
        while _netns_pids(netns) and time.monotonic() < deadline:
            time.sleep(0.05)
        netns_file.unlink()
    _remove_cgroups(ctx)
    if left := _own_cgroups(ctx):
        log(f"node: could not remove {', '.join(map(str, left))}")


INSTALLERS: dict[str, Callable[[Context], None]] = {"node": install_node}
SERVERS: dict[str, Callable[[Context], dict[str, str]]] = {"node": start_node}
STOPPERS: dict[str, Callable[[Context], None]] = {"node": stop_node}
OPT_IN: list[str] = ["node"]
SLOW: dict[str, int] = {"node": 40}
