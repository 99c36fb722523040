"""The project's four images, built here from Debian packages and the locked wheels, no registry.

``install images`` (or ``install images:agent``) reads ``docker/Dockerfile.<name>`` — the spec
users build with docker — and produces the same image as an OCI archive under
``<run>/images/<name>.tar``, which ``start node`` loads into the node's containerd:

- the base (``BASES``): ``gcr.io/distroless/python3-debian12`` is bookworm's ``python3.11``
  with the C and C++ runtimes and the CA bundle and no shell or package manager, so the stand-in
  is exactly those bookworm packages (``DISTROLESS``; versions from apt's solver on an empty
  system, ``Context.apt_closure``), unpacked with ``dpkg-deb -x`` into a usr-merged tree;
  maintainer scripts do not run, so what they would make is made here (the CA bundle,
  ``ld.so.cache``, ``/bin/sh`` when dash is in); the machine's own Python is not used, so the
  image does not depend on what happens to be installed on the build machine.  A final stage
  ``FROM scratch`` that copies a stage's copy of the base to ``/`` gets that base, trimmed by
  ``docker/slim-runtime.py`` when that stage runs it;
- a root made by ``docker/package-root.sh DEST [--without ...] PACKAGE...`` in an earlier stage
  and copied in (the agent's git, ssh and dash): the packages' closure minus ``--without``,
  minus the paths that stage's ``rm`` removes; a final stage's own ``apt-get install`` (on a
  Debian base) is resolved the same way;
- ``/opt/dynamic-config`` made by the build stage's own commands, ``docker/agent-install.sh``
  (the workspace packages, third-party wheels pinned by ``uv.lock`` — every store's client or
  none — and the plugin lock) and ``docker/slim-venv.py``, run in a private mount namespace
  where ``/opt/dynamic-config`` is a bind mount of the staging directory, so the venv's paths
  and shebangs are the image's, with bookworm's ``/usr/bin/python3.11`` (the image's
  interpreter);
- ``ENV``, ``USER``, ``ENTRYPOINT`` and ``CMD`` of the final stage, evaluated over the base
  image's environment (none for ``scratch``).

Beside each archive, ``<name>.cdx.json`` is its CycloneDX SBOM (``sbom.py``: every Python
distribution of the venv and every .deb unpacked), also attached inside the archive as an OCI
1.1 artifact whose ``subject`` is the image manifest.  Files trimmed from a package or a
distribution keep it listed; a distribution removed whole (``pip``, ``setuptools``) or a
package left out (``--without``) is not.

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
from .common import DEBS_RECORD, Context, TestenvError, log, system_tool
from .oci import Artifact, ImageConfig, read_config, write_archive

IMAGES = ("agent", "webhook", "operator", "node-agent")
REGISTRY = "ghcr.io/dynconf"
PYTHON = "/usr/bin/python3.11"
PRUNE = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian",
         "usr/share/locale", "usr/share/bash-completion")  # fmt: skip
"""Documentation and translations, as the slim image's dpkg excludes and distroless do (the
images log in English; git's and ssh's messages are read by the store, not by people)."""


@dataclass(frozen=True)
class Base:
    """What a final stage's ``FROM`` image gives, as bookworm packages and image config."""

    packages: tuple[str, ...]
    env: dict[str, str]
    exact: bool
    """Only ``packages`` (a distroless image: no maintainer-script tools), rather than their
    dependency closure (a Debian image, where apt installed them)."""
    users: tuple[tuple[str, int, str, str], ...] = ()
    """The accounts the base lists beside root and nobody: (name, uid, home, shell)."""


SLIM = Base(
    ("python3.11", "ca-certificates", "dash", "libstdc++6", "netbase"),
    {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
    exact=False,
)
"""``python:3.11-slim``: its Python, the CA bundle, and the parts of ``debian:bookworm-slim``
the workspace relies on at run time — ``/bin/sh`` (git runs ``core.sshCommand`` through it),
the C++ runtime (grpc's extension, under the firestore client) and ``/etc/services``."""
DISTROLESS = Base(
    ("gcc-12-base", "libc6", "libgcc-s1", "libstdc++6", "libssl3", "ca-certificates",
     "netbase", "tzdata", "media-types", "zlib1g", "libbz2-1.0", "liblzma5", "libexpat1",
     "libffi8", "libsqlite3-0", "libuuid1", "libncursesw6", "libtinfo6", "libreadline8",
     "libdb5.3", "libcrypt1", "libnsl2", "libtirpc3", "libtirpc-common", "libgssapi-krb5-2",
     "libkrb5-3", "libk5crypto3", "libkrb5support0", "libkeyutils1", "libcom-err2",
     "libpython3.11-minimal", "libpython3.11-stdlib", "python3.11-minimal"),
    {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
     "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "LANG": "C.UTF-8"},
    exact=True,
    users=(("nonroot", 65532, "/home/nonroot", "/sbin/nologin"),),
)  # fmt: skip
"""``gcr.io/distroless/python3-debian12``: bookworm's Python 3.11 with the C and C++ runtimes,
the CA bundle, ``/etc/services`` and time zones, and no shell, no package manager."""
BASES = {"python:3.11-slim": SLIM, "gcr.io/distroless/python3-debian12": DISTROLESS}
"""The final stages' ``FROM`` images the builder can stand in for (tags such as ``:nonroot``
only set the default user, which every Dockerfile sets itself)."""


# ---------------------------------------------------------------------------- the Dockerfile
@dataclass(frozen=True)
class Stage:
    """The final stage of a Dockerfile, as far as an image's contents and config go."""

    base: Base
    apt_packages: list[str]
    env: list[str]
    user: str
    entrypoint: list[str] | None
    cmd: list[str] | None
    install_prefix: str
    """The prefix the build stage passes to ``agent-install.sh`` (``/opt/dynamic-config``)."""
    users: list[tuple[str, int, str, str]] = field(default_factory=list)
    """``useradd --uid N --user-group --home-dir H --shell S NAME`` of the final stage."""
    clients: str = "all"
    """``agent-install.sh``'s CLIENTS argument: every store's client library, or ``none``."""
    slim: bool = False
    """The build stage runs ``docker/slim-venv.py`` over the prefix."""
    slim_runtime: bool = False
    """The base root passes through ``docker/slim-runtime.py`` (trimmed, stdlib compiled)."""
    copied_root: tuple[str, ...] = ()
    """Packages of a ``docker/package-root.sh`` stage whose root the final stage copies."""
    copied_without: tuple[str, ...] = ()
    """The packages that stage leaves out of its root (``--without``)."""
    copied_removed: tuple[str, ...] = ()
    """Paths that stage removes from its root after copying (``rm -f``), root-relative."""

    def config(self) -> ImageConfig:
        return ImageConfig(entrypoint=self.entrypoint, cmd=self.cmd, user=self.user, env=self.env)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # a comment inside a continued instruction is dropped too, as docker does
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


def _commands(rest: str) -> list[list[str]]:
    """The commands of one ``RUN``: exec form as one command, shell form split at ``&&``."""
    if rest.startswith("["):
        return [list(json.loads(rest))]
    return [shlex.split(command) for command in rest.split("&&")]


def parse_dockerfile(path: Path) -> Stage:
    """Read what the image builder needs from ``path``'s build and final stages."""
    stages: list[tuple[str, str, list[tuple[str, str]]]] = []
    for word, rest in _instructions(path.read_text()):
        if word == "FROM":
            image, _, name = rest.partition(" AS ")
            stages.append((image.strip(), name.strip(), []))
        elif stages:
            stages[-1][2].append((word, rest))
    if not stages:
        raise TestenvError(f"{path}: no FROM")
    earlier = {name: [c for w, r in body if w == "RUN" for c in _commands(r)]
               for _image, name, body in stages[:-1]}  # fmt: skip
    prefix, clients, slim = "", "all", False
    for command in (c for commands in earlier.values() for c in commands):
        script = Path(command[0]).name if command else ""
        if script == "agent-install.sh":
            prefix = command[1]
            clients = command[3] if len(command) > 3 else "all"
        elif any(Path(word).name == "slim-venv.py" for word in command):
            slim = True
    image, _, final = stages[-1]
    images = {name: image for image, name, _body in stages[:-1]}
    bodies = {name: body for _image, name, body in stages[:-1]}
    base, slim_runtime = BASES.get(image) or BASES.get(image.rsplit(":", 1)[0]), False
    if image == "scratch":
        base, slim_runtime = _copied_base(final, images, bodies)
    if base is None:
        raise TestenvError(f"{path}: the final stage's base {image} is none of {', '.join(BASES)}")
    env = {} if image == "scratch" else dict(base.env)
    packages: list[str] = []
    users: list[tuple[str, int, str, str]] = []
    user = ""
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    copied: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ())
    for word, rest in final:
        if word == "RUN":
            for args in _commands(rest):
                if args[:2] == ["apt-get", "install"]:
                    packages += [a for a in args[2:] if not a.startswith("-")]
                elif args[:1] == ["useradd"]:
                    users.append(_useradd(path, args))
        elif word == "COPY" and rest.startswith("--from="):
            source, *_paths = shlex.split(rest.removeprefix("--from="))
            copied = _package_root(earlier.get(source, [])) or copied
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
    return Stage(base, packages, env_list, user, entrypoint, cmd, prefix, users, clients, slim,
                 slim_runtime, *copied)  # fmt: skip


def _copied_base(
    final: list[tuple[str, str]], images: dict[str, str], bodies: dict[str, list[tuple[str, str]]]
) -> tuple[Base | None, bool]:
    """For ``FROM scratch``: the base whose root an earlier stage copied (``COPY --from=BASE /
    DIR``) and the final stage copies to ``/``, and whether that stage ran slim-runtime.py."""
    for word, rest in final:
        if word != "COPY" or not rest.startswith("--from="):
            continue
        source, *paths = shlex.split(rest.removeprefix("--from="))
        if paths[-1:] != ["/"]:
            continue
        for inner, inner_rest in bodies.get(source, []):
            if inner != "COPY" or not inner_rest.startswith("--from="):
                continue
            origin, *inner_paths = shlex.split(inner_rest.removeprefix("--from="))
            image = images.get(origin, origin)
            base = BASES.get(image) or BASES.get(image.rsplit(":", 1)[0])
            if base is not None and inner_paths[:1] == ["/"] and inner_paths[1:] == paths[:1]:
                slim = any(Path(word).name == "slim-runtime.py"
                           for w, r in bodies[source] if w == "RUN"
                           for command in _commands(r) for word in command)  # fmt: skip
                return base, slim
    return None, False


def _package_root(
    commands: list[list[str]],
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
    """(packages, --without, removed paths) of a stage's ``docker/package-root.sh DEST``, or
    None for a stage that runs none (the build stage, whose prefix is copied as it is)."""
    packages: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    removed: list[str] = []
    dest = ""
    for command in commands:
        if command and Path(command[0]).name == "package-root.sh":
            args = iter(command[1:])
            dest = next(args, "")
            rest = list(args)
            if rest[:1] == ["--without"]:
                without = tuple(rest[1].split(","))
                rest = rest[2:]
            packages = tuple(rest)
        elif command[:1] == ["rm"] and dest:
            removed += [p.removeprefix(dest).lstrip("/") for p in command[1:]
                        if not p.startswith("-")]  # fmt: skip
    return (packages, without, tuple(removed)) if packages else None


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
    """``ghcr.io/dynconf/dynconf-<name>:v<appVersion>``: the chart's default."""
    chart = (ctx.repo / "charts" / "dynamic-config" / "Chart.yaml").read_text()
    match = re.search(r'^appVersion:\s*"?([^"\s]+)"?', chart, re.MULTILINE)
    if not match:
        raise TestenvError("charts/dynamic-config/Chart.yaml has no appVersion")
    return f"{REGISTRY}/dynconf-{name}:v{match.group(1)}"


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


def image_debs(ctx: Context, stage: Stage) -> list[str]:
    """``package=version`` of every .deb the image is made from: its base, the final stage's
    ``apt-get install`` with their closure, and a copied package root's closure minus what
    that root leaves out."""
    base = ctx.apt_closure(list(stage.base.packages + tuple(stage.apt_packages)))
    if stage.base.exact:
        base = [spec for spec in base if spec.split("=", 1)[0] in stage.base.packages]
    copied: list[str] = []
    if stage.copied_root:
        copied = [spec for spec in ctx.apt_closure(list(stage.copied_root))
                  if spec.split("=", 1)[0] not in stage.copied_without]  # fmt: skip
    return sorted(set(base) | set(copied))


def _debian_tree(ctx: Context, specs: list[str]) -> Path:
    """The .debs ``specs`` names, extracted (cached per list).

    The tree must carry the record of the .debs it was unpacked from (the SBOM lists them);
    one extracted before that record existed is fetched again.
    """
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


def _finish_rootfs(ctx: Context, rootfs: Path, stage: Stage) -> None:
    """What the skipped maintainer scripts, the base image and ``useradd`` would have left."""
    for rel in PRUNE + stage.copied_removed:
        path = rootfs / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    etc = rootfs / "etc"
    etc.mkdir(exist_ok=True)
    shell = "/bin/sh" if (rootfs / "usr/bin/dash").exists() else "/sbin/nologin"
    passwd = [
        f"root:x:0:0:root:/root:{shell}",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
    ]
    group = ["root:x:0:", "nogroup:x:65534:"]
    for name, uid, home, login in [*stage.base.users, *stage.users]:
        passwd.append(f"{name}:x:{uid}:{uid}::{home}:{login}")
        group.append(f"{name}:x:{uid}:")
        if home != "/nonexistent":
            (rootfs / home.lstrip("/")).mkdir(parents=True, exist_ok=True)
            os.chown(rootfs / home.lstrip("/"), uid, uid)
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
    if (rootfs / "usr/bin/dash").exists() and not (rootfs / "usr/bin/sh").exists():
        (rootfs / "usr/bin/sh").symlink_to("dash")  # what dash's maintainer script links
    for sub in ("tmp", "proc", "sys", "dev", "root", "run", "var/tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "var/tmp").chmod(0o1777)
    subprocess.run([system_tool("ldconfig"), "-r", str(rootfs)], check=True, capture_output=True)
    if stage.slim_runtime:
        _slim_runtime(ctx, rootfs)


def _slim_runtime(ctx: Context, rootfs: Path) -> None:
    """``docker/slim-runtime.py ROOT`` over the base's root, as the build stage runs it."""
    script = ctx.repo / "docker" / "slim-runtime.py"
    subprocess.run([PYTHON, str(script), str(rootfs)], check=True, capture_output=True)


def _base_rootfs(ctx: Context, staging: Path, stage: Stage) -> tuple[Path, list[dict[str, str]]]:
    """The root filesystem before ``/opt/dynamic-config``, and the .debs it was made from."""
    rootfs = staging / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    (rootfs / "usr").mkdir(parents=True)
    for sub in ("bin", "sbin", "lib", "lib64"):
        (rootfs / "usr" / sub).mkdir()
        (rootfs / sub).symlink_to(f"usr/{sub}")
    tree = _debian_tree(ctx, image_debs(ctx, stage))
    _merge_usr(tree, rootfs)
    _finish_rootfs(ctx, rootfs, stage)
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


def _install_tree(ctx: Context, stage: Stage, key: str) -> Path:
    """``docker/agent-install.sh PREFIX PYTHON CLIENTS`` (and ``docker/slim-venv.py PREFIX``)
    run as the build stage runs them, cached per ``key`` and variant.

    Checkouts at the same commit share ``key``: the tree is built under a lock, into a directory
    of its own, and renamed into place only when complete.
    """
    key = f"{key}-{stage.clients}" + ("-slim" if stage.slim else "")
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
            took = _run_agent_install(ctx, stage, building)
            (building / ".done").write_text(f"{took:.1f}\n")
            building.rename(out)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return out


def _run_agent_install(ctx: Context, stage: Stage, out: Path) -> float:
    """Run the build stage's steps with its prefix bind-mounted onto ``out``; their seconds."""
    prefix = stage.install_prefix
    uv = shutil.which("uv") or str(Path.home() / ".cache" / "dynconf-tools" / "bin" / "uv")
    if not Path(uv).is_file():
        raise TestenvError("uv is needed to install the locked wheels (scripts/dev bootstraps it)")
    parent = str(Path(prefix).parent)
    mount = shlex.quote(system_tool("mount"))
    script = (
        f"set -e; {mount} -t tmpfs tmpfs {shlex.quote(parent)}; mkdir -p {shlex.quote(prefix)}; "
        f"{mount} --bind {shlex.quote(str(out))} {shlex.quote(prefix)}; "
        f"{shlex.quote(str(ctx.repo / 'docker' / 'agent-install.sh'))} "
        f"{shlex.quote(prefix)} {PYTHON} {shlex.quote(stage.clients)}"
    )
    if stage.slim:
        script += f"; {PYTHON} {shlex.quote(str(ctx.repo / 'docker' / 'slim-venv.py'))} {prefix}"
    env = {
        **os.environ,
        "PATH": f"{Path(uv).parent}:{os.environ.get('PATH', '')}",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_LINK_MODE": "copy",
    }
    env.pop("VIRTUAL_ENV", None)  # agent-install.sh makes its own venv
    started = time.monotonic()
    result = subprocess.run(
        [system_tool("unshare"), "--mount", "--propagation", "private", "sh", "-c", script],
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
        tree = _install_tree(ctx, stage, key)
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
