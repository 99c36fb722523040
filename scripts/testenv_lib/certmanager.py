"""cert-manager, built from the Go module proxy, for the chart's cert-manager TLS mode on the node.

cert-manager publishes its packages as one module (``github.com/cert-manager/cert-manager``) but
not the modules of its commands, so ``install cert-manager`` builds the wrapper command in
``scripts/cert-manager-build`` (its go.mod pins the version; ``main.go`` runs the Certificate and
issuer controllers, the approver, the selfSigned and CA signers and CA injection into webhook
configurations) with the Go toolchain, caches and flags of ``kube``. Beside the binary go
cert-manager's own CRDs (``deploy/crds`` of the same module version), which a test applies
before it starts the controller.

The binary is linked as ``<cache>/bin/cert-manager`` and the CRDs are under
``<cache>/cert-manager/<version>-<source hash>/crds``; neither is rebuilt while present, and
``cert-manager.build.json`` records the build's seconds and bytes. The e2e leg runs the binary
as a process beside the control plane (the node's kubeconfig), the way cert-manager runs
outside a cluster during development.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from .common import Context, TestenvError, go_binary, log
from .kube import go_env, go_parallelism, run_go

BUILD_MODULE = Path(__file__).resolve().parents[1] / "cert-manager-build"
"""The wrapper Go module whose go.mod pins github.com/cert-manager/cert-manager."""
NAME = "cert-manager"
MODULE = "github.com/cert-manager/cert-manager"


def cert_manager_version() -> str:
    """The cert-manager release pinned in ``scripts/cert-manager-build/go.mod``."""
    gomod = (BUILD_MODULE / "go.mod").read_text()
    match = re.search(
        r"^(?:require)?\s*github\.com/cert-manager/cert-manager\s+(v\S+)", gomod, re.MULTILINE
    )
    if not match:
        raise TestenvError(f"no cert-manager requirement in {BUILD_MODULE / 'go.mod'}")
    return match.group(1)


def cert_manager_dir(ctx: Context) -> Path:
    """Where the built binary and the CRDs of the pinned version live: one directory per
    version and wrapper source, so an edit of ``main.go`` builds anew."""
    digest = hashlib.sha256()
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((BUILD_MODULE / name).read_bytes())
    return ctx.cache / NAME / f"{cert_manager_version()}-{digest.hexdigest()[:12]}"


def install_cert_manager(ctx: Context) -> None:
    """Build the controller and copy the CRDs of the pinned release (skipped when present).

    Written to temporary names and renamed, so an interrupted install never leaves a binary or
    a CRD directory that looks finished.
    """
    version = cert_manager_version()
    out_dir = cert_manager_dir(ctx)
    target = out_dir / NAME
    crds = out_dir / "crds"
    link = ctx.cache / "bin" / NAME
    if not crds.is_dir():
        _copy_crds(ctx, out_dir, crds)
    if not target.is_file():
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / f"{NAME}.tmp"
        log(f"building cert-manager {version} from the Go module proxy (minutes on 2 cores)")
        took = run_go(
            ctx,
            ["build", "-p", go_parallelism(), "-ldflags", "-s -w", "-o", str(tmp), "."],
            cwd=BUILD_MODULE,
            log_path=out_dir / f"{NAME}.build.log",
        )
        tmp.rename(target)
        size = target.stat().st_size
        info = {"version": version, "seconds": round(took, 1), "bytes": size}
        (out_dir / f"{NAME}.build.json").write_text(json.dumps(info) + "\n")
        log(f"built cert-manager in {took:.0f} s ({size / 2**20:.0f} MiB)")
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or link.resolve() != target.resolve():
        link.unlink(missing_ok=True)
        link.symlink_to(target)


def _copy_crds(ctx: Context, out_dir: Path, crds: Path) -> None:
    """cert-manager's CRDs from the module version the binary is built from."""
    found = subprocess.run(
        [go_binary(), "mod", "download", "-json", f"{MODULE}@{cert_manager_version()}"],
        cwd=BUILD_MODULE,
        env=go_env(ctx),
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise TestenvError(f"cannot find the cert-manager module: {found.stderr.strip()[-400:]}")
    source = Path(json.loads(found.stdout)["Dir"]) / "deploy" / "crds"
    files = sorted(source.glob("*.yaml"))
    if not files:
        raise TestenvError(f"no CRDs under {source}")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / "crds.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for path in files:
        shutil.copyfile(path, tmp / path.name)
    tmp.rename(crds)


INSTALLERS: dict[str, Callable[[Context], None]] = {NAME: install_cert_manager}
SLOW: dict[str, int] = {NAME: 58}
"""After the images and the release tools: only the e2e cert-manager leg needs it."""
