"""The project's four images, built here from Debian packages and the locked wheels, no registry.

``install images`` (or ``install images:agent``) reads ``docker/Dockerfile.<name>`` — the spec
users build with docker — and produces the same image as an OCI archive under
``<run>/images/<name>.tar``, which ``start node`` loads into the node's containerd:

- the base: ``python:3.11-slim`` is a Debian bookworm with Python 3.11, so the stand-in is
  bookworm's own ``python3.11``, ``ca-certificates`` and the slim base's run-time parts the
  workspace needs (``BASE_PACKAGES``) with their dependency closure (apt's solver on an empty
  system, ``Context.apt_closure``), unpacked with ``dpkg-deb -x`` into a usr-merged tree;
  maintainer scripts do not run, so what they would make is made here (the CA bundle,
  ``ld.so.cache``, ``/bin/sh``); the machine's own Python is not used, so the image
  does not depend on what happens to be installed on the build machine;
- the runtime stage's ``apt-get install`` packages (``git openssh-client``), resolved the same
  way;
- ``/opt/dynamic-config`` made by the build stage's own command, ``docker/agent-install.sh``
  (the workspace packages, third-party wheels pinned by ``uv.lock``, the plugin lock), run in
  a private mount namespace where ``/opt/dynamic-config`` is a bind mount of the staging
  directory, so the venv's paths and shebangs are the image's, and with bookworm's
  ``/usr/bin/python3.11`` (the image's interpreter) instead of the slim image's
  ``/usr/local/bin/python3.11``;
- ``ENV``, ``USER``, ``ENTRYPOINT`` and ``CMD`` of the final stage, evaluated over the base
  image's environment (``BASE_ENV``).

Beside each archive, ``<name>.cdx.json`` is its CycloneDX SBOM (``sbom.py``: every Python
distribution of the venv and every .deb unpacked), also attached inside the archive as an OCI
1.1 artifact whose ``subject`` is the image manifest.

The archives are keyed by a hash of everything that goes in (sources, lock, Dockerfiles), so an
unchanged checkout never rebuilds.  Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import sbom
from .common import DEBS_RECORD, Context, TestenvError, log
from .oci import Artifact, ImageConfig, read_config, write_archive

IMAGES = ("agent", "webhook", "operator", "node-agent")
REGISTRY = "ghcr.io/dynamic-config-rs"
BASE_PACKAGES = ["python3.11", "ca-certificates", "dash", "libstdc++6", "netbase"]
"""What ``python:3.11-slim`` gives every image: its Python, the CA bundle, and the parts of
``debian:bookworm-slim`` the workspace relies on at run time — ``/bin/sh`` (git runs
``core.sshCommand`` through it), the C++ runtime (grpc's extension, under the firestore client)
and ``/etc/services``/``/etc/protocols`` (the slim image installs ``netbase`` for them)."""
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}
"""What ``python:3.11-slim`` sets that the final stages build on (``$PATH``)."""
PYTHON = "/usr/bin/python3.11"
PRUNE = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian")
"""Documentation, as the slim image's dpkg excludes do."""


# ---------------------------------------------------------------------------- the Dockerfile
@dataclass(frozen=True)
class Stage:
    """The final stage of a Dockerfile, as far as an image's contents and config go."""

    apt_packages: list[str]
    env: list[str]
    user: str
    entrypoint: list[str] | None
    cmd: list[str] | None
    install_prefix: str
    """The prefix the build stage passes to ``agent-install.sh`` (``/opt/dynamic-config``)."""
    users: list[tuple[str, int, str, str]] = field(default_factory=list)
    """``useradd --uid N --user-group --home-dir H --shell S NAME`` of the final stage."""

    def config(self) -> ImageConfig:
        return ImageConfig(entrypoint=self.entrypoint, cmd=self.cmd, user=self.user, env=self.env)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)


def parse_dockerfile(path: Path) -> Stage:
    """Read what the image builder needs from ``path``'s build and final stages."""
    stages: list[list[tuple[str, str]]] = []
    for word, rest in _instructions(path.read_text()):
        if word == "FROM":
            stages.append([])
        elif stages:
            stages[-1].append((word, rest))
    if not stages:
        raise TestenvError(f"{path}: no FROM")
    prefix = ""
    for word, rest in (w for stage in stages[:-1] for w in stage):
        if word == "RUN" and "agent-install.sh" in rest:
            prefix = shlex.split(rest)[1]
    env = dict(BASE_ENV)
    packages: list[str] = []
    users: list[tuple[str, int, str, str]] = []
    user = ""
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    for word, rest in stages[-1]:
        if word == "RUN":
            for command in rest.split("&&"):
                args = shlex.split(command)
                if args[:2] == ["apt-get", "install"]:
                    packages += [a for a in args[2:] if not a.startswith("-")]
                elif args[:1] == ["useradd"]:
                    users.append(_useradd(path, args))
        elif word == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                env[key] = _expand(value, env)
        elif word == "USER":
            user = rest
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    if not prefix:
        raise TestenvError(f"{path}: no build stage runs docker/agent-install.sh")
    env_list = [f"{k}={v}" for k, v in env.items()]
    return Stage(packages, env_list, user, entrypoint, cmd, prefix, users)


def _useradd(path: Path, args: list[str]) -> tuple[str, int, str, str]:
    """(name, uid, home, shell) of one ``useradd`` with a user group, the form the files use."""
    takes_value = {"--uid", "--home-dir", "--shell"}
    options: dict[str, str] = {}
    flags: set[str] = set()
    rest = iter(args[1:-1])
    for word in rest:
        if word in takes_value:
            options[word] = next(rest, "")
        else:
            flags.add(word)
    if not options.get("--uid", "").isdigit() or "--user-group" not in flags:
        raise TestenvError(f"{path}: useradd needs --uid N and --user-group: {' '.join(args)}")
    home, shell = options.get("--home-dir", "/nonexistent"), options.get("--shell", "/bin/sh")
    return args[-1], int(options["--uid"]), home, shell


def dockerfile(ctx: Context, name: str) -> Path:
    return ctx.repo / "docker" / f"Dockerfile.{name}"


def image_name(ctx: Context, name: str) -> str:
    """``ghcr.io/dynamic-config-rs/dynamic-config-<name>:v<appVersion>``: the chart's default."""
    chart = (ctx.repo / "charts" / "dynamic-config" / "Chart.yaml").read_text()
    match = re.search(r'^appVersion:\s*"?([^"\s]+)"?', chart, re.MULTILINE)
    if not match:
        raise TestenvError("charts/dynamic-config/Chart.yaml has no appVersion")
    return f"{REGISTRY}/dynamic-config-{name}:v{match.group(1)}"


# ---------------------------------------------------------------------------- the parts
def _sources_hash(ctx: Context) -> str:
    """Everything that goes into ``/opt/dynamic-config`` or an image's config."""
    digest = hashlib.sha256()
    roots = [ctx.repo / "uv.lock", ctx.repo / "pyproject.toml", ctx.repo / "docker"]
    roots += sorted((ctx.repo / "packages").glob("*/pyproject.toml"))
    roots += sorted((ctx.repo / "packages").glob("*/src"))
    roots += [Path(__file__).with_name(module) for module in ("images.py", "oci.py", "sbom.py")]
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(ctx.repo)).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _debian_tree(ctx: Context, packages: list[str]) -> Path:
    """``packages`` and their closure, extracted (cached per resolved list).

    The tree must carry the record of the .debs it was unpacked from (the SBOM lists them);
    one extracted before that record existed is fetched again.
    """
    specs = ctx.apt_closure(packages)
    key = hashlib.sha256(" ".join(sorted(specs)).encode()).hexdigest()[:12]
    root = ctx.cache / "debs" / f"image-{key}"
    if not (root / DEBS_RECORD).is_file():
        (root / ".done").unlink(missing_ok=True)
    return ctx.apt_download(specs, dest=f"image-{key}")


def unpacked_debs(tree: Path) -> list[dict[str, str]]:
    """What ``apt_download`` recorded of each .deb it unpacked into ``tree``."""
    records: list[dict[str, str]] = json.loads((tree / DEBS_RECORD).read_text())
    return records


def _merge_usr(src: Path, rootfs: Path) -> None:
    """Copy an extracted package tree into a usr-merged root (``/bin`` -> ``usr/bin``, ...)."""
    for entry in sorted(src.iterdir()):
        if entry.name.startswith("."):
            continue
        merged = entry.name in ("bin", "sbin", "lib", "lib64")
        target = rootfs / ("usr/" + entry.name if merged else entry.name)
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, target, follow_symlinks=False)


def _finish_rootfs(rootfs: Path, users: list[tuple[str, int, str, str]]) -> None:
    """What the skipped maintainer scripts, the base image and ``useradd`` would have left."""
    for rel in PRUNE:
        shutil.rmtree(rootfs / rel, ignore_errors=True)
    etc = rootfs / "etc"
    etc.mkdir(exist_ok=True)
    passwd = [
        "root:x:0:0:root:/root:/bin/sh",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
    ]
    group = ["root:x:0:", "nogroup:x:65534:"]
    for name, uid, home, shell in users:
        passwd.append(f"{name}:x:{uid}:{uid}::{home}:{shell}")
        group.append(f"{name}:x:{uid}:")
    (etc / "passwd").write_text("\n".join(passwd) + "\n")
    (etc / "group").write_text("\n".join(group) + "\n")
    (etc / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    certs = sorted((rootfs / "usr/share/ca-certificates").rglob("*.crt"))
    (etc / "ssl" / "certs").mkdir(parents=True, exist_ok=True)
    (etc / "ssl" / "certs" / "ca-certificates.crt").write_text(
        "".join(p.read_text() for p in certs)
    )
    ssl_dir = rootfs / "usr/lib/ssl"
    ssl_dir.mkdir(parents=True, exist_ok=True)
    if not (ssl_dir / "cert.pem").exists():
        (ssl_dir / "cert.pem").symlink_to("/etc/ssl/certs/ca-certificates.crt")
    if not (rootfs / "usr/bin/sh").exists():
        (rootfs / "usr/bin/sh").symlink_to("dash")  # what dash's maintainer script links
    for sub in ("tmp", "proc", "sys", "dev", "root", "run", "var/tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "var/tmp").chmod(0o1777)
    subprocess.run(["ldconfig", "-r", str(rootfs)], check=True, capture_output=True)
    _compile_stdlib(rootfs)


def _compile_stdlib(rootfs: Path) -> None:
    """The standard library's bytecode, which Debian's ``py3compile`` postinst would have made.

    Without it every start of every Python process in the image compiles the modules it
    imports (the root is read-only and ``PYTHONDONTWRITEBYTECODE`` is set, so nothing is kept).
    ``unchecked-hash``: the layers carry mtime 0; ``-s``/``-p`` name the files by their path
    inside the image.
    """
    stdlib = rootfs / "usr" / "lib" / "python3.11"
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", "-f", "-j", "0", "--invalidation-mode",
         "unchecked-hash", "-s", str(rootfs), "-p", "/", "-x", r"/(test|idlelib|lib2to3)/",
         str(stdlib)],
        check=True, capture_output=True,
    )  # fmt: skip


def _base_rootfs(ctx: Context, staging: Path, stage: Stage) -> tuple[Path, list[dict[str, str]]]:
    """The root filesystem before ``/opt/dynamic-config``, and the .debs it was made from."""
    rootfs = staging / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    (rootfs / "usr").mkdir(parents=True)
    for sub in ("bin", "sbin", "lib", "lib64"):
        (rootfs / "usr" / sub).mkdir()
        (rootfs / sub).symlink_to(f"usr/{sub}")
    tree = _debian_tree(ctx, BASE_PACKAGES + stage.apt_packages)
    _merge_usr(tree, rootfs)
    _finish_rootfs(rootfs, stage.users)
    return rootfs, unpacked_debs(tree)


@contextlib.contextmanager
def _cache_lock(ctx: Context, key: str) -> Iterator[None]:
    """One builder at a time for ``key``: the cache is shared by every checkout on the machine."""
    locks = ctx.cache / "images" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / key).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _install_tree(ctx: Context, prefix: str, key: str) -> Path:
    """``docker/agent-install.sh PREFIX`` run as the build stage runs it, cached per ``key``.

    Checkouts at the same commit share ``key``: the tree is built under a lock, into a directory
    of its own, and renamed into place only when complete.
    """
    out = ctx.cache / "images" / "install" / key
    if (out / ".done").is_file():
        return out
    with _cache_lock(ctx, f"install-{key}"):
        if (out / ".done").is_file():
            return out
        shutil.rmtree(out, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)  # an empty cache has no install/ yet
        building = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=out.parent))
        building.chmod(0o755)  # it becomes the image's prefix, which its user must traverse
        try:
            took = _run_agent_install(ctx, prefix, building)
            (building / ".done").write_text(f"{took:.1f}\n")
            building.rename(out)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return out


def _run_agent_install(ctx: Context, prefix: str, out: Path) -> float:
    """Run ``docker/agent-install.sh`` with ``prefix`` bind-mounted onto ``out``; its seconds."""
    uv = shutil.which("uv") or str(Path.home() / ".cache" / "dynconf-tools" / "bin" / "uv")
    if not Path(uv).is_file():
        raise TestenvError("uv is needed to install the locked wheels (scripts/dev bootstraps it)")
    parent = str(Path(prefix).parent)
    script = (
        f"set -e; mount -t tmpfs tmpfs {shlex.quote(parent)}; mkdir -p {shlex.quote(prefix)}; "
        f"mount --bind {shlex.quote(str(out))} {shlex.quote(prefix)}; "
        f"exec {shlex.quote(str(ctx.repo / 'docker' / 'agent-install.sh'))} "
        f"{shlex.quote(prefix)} {PYTHON}"
    )
    env = {
        **os.environ,
        "PATH": f"{Path(uv).parent}:{os.environ.get('PATH', '')}",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_LINK_MODE": "copy",
    }
    env.pop("VIRTUAL_ENV", None)  # agent-install.sh makes its own venv
    started = time.monotonic()
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        cwd=ctx.repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise TestenvError(f"docker/agent-install.sh failed:\n{result.stderr[-3000:]}")
    took = time.monotonic() - started
    log(f"images: agent-install.sh into {prefix} in {took:.0f} s")
    return took


def build_image(ctx: Context, name: str) -> Path:
    """Build ``<run>/images/<name>.tar`` unless the one there was built from the same inputs."""
    out = ctx.run / "images" / f"{name}.tar"
    key = _sources_hash(ctx)
    stamp = out.with_suffix(".key")
    bom = sbom_path(out)
    if out.is_file() and bom.is_file() and stamp.is_file() and stamp.read_text().strip() == key:
        return out
    started = time.monotonic()
    stage = parse_dockerfile(dockerfile(ctx, name))
    # a staging tree per build: the cache is shared, and two checkouts may build at once
    (ctx.cache / "images" / "staging").mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=ctx.cache / "images" / "staging"))
    try:
        rootfs, debs = _base_rootfs(ctx, staging, stage)
        tree = _install_tree(ctx, stage.install_prefix, key)
        target = rootfs / stage.install_prefix.lstrip("/")
        shutil.copytree(tree, target, symlinks=True, ignore=shutil.ignore_patterns(".done"))
        site = next((target / "venv" / "lib").glob("python3*/site-packages"))
        document: dict[str, object] = {}

        def attach(digest: str) -> list[Artifact]:
            document.update(sbom.image_sbom(image_name(ctx, name), digest, site, debs))
            return [Artifact(sbom.MEDIA_TYPE, sbom.dumps(document))]

        write_archive(rootfs, out, image_name(ctx, name), stage.config(), attach)
        bom.write_bytes(sbom.dumps(document))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stamp.write_text(key + "\n")
    took, size = round(time.monotonic() - started, 1), out.stat().st_size
    components = json.loads(bom.read_text())["components"]
    info = {"image": image_name(ctx, name), "seconds": took, "bytes": size,
            "config": read_config(out), "sbom": bom.name,
            "sbom_components": {kind: sum(c["purl"].startswith(f"pkg:{kind}/") for c in components)
                                for kind in ("pypi", "deb")}}  # fmt: skip
    out.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
    log(f"images: {info['image']} in {took} s, {size / 2**20:.0f} MiB")
    return out


def sbom_path(archive: Path) -> Path:
    """``<name>.cdx.json`` beside ``<name>.tar``: the image's CycloneDX SBOM."""
    return archive.with_name(archive.stem + ".cdx.json")


def install_images(ctx: Context) -> None:
    """Every image named in ``DYNCONF_TESTENV_IMAGES`` (default: all four)."""
    wanted = os.environ.get("DYNCONF_TESTENV_IMAGES", ",".join(IMAGES)).split(",")
    for name in filter(None, (w.strip() for w in wanted)):
        if name not in IMAGES:
            raise TestenvError(f"unknown image {name!r}; known: {', '.join(IMAGES)}")
        build_image(ctx, name)


INSTALLERS: dict[str, Callable[[Context], None]] = {"images": install_images}
OPT_IN: list[str] = ["images"]
SLOW: dict[str, int] = {"images": 50}
