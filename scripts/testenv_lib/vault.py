"""HashiCorp Vault, built from the Go module proxy, for what the OpenBao dev server cannot do.

The suite's main Vault is OpenBao (``vault`` in ``stores``): OpenBao moved its ldap auth method
out to ``openbao-plugins``, which no registry here serves, so the vault store's ``ldap`` login is
tested against HashiCorp Vault, which has ldap auth built in.

Vault is not packaged anywhere reachable from these machines, so ``install vault-hashicorp``
builds the ``vault`` binary from the Go module proxy through the wrapper module in
``scripts/vault-build`` (its go.mod pins the version and explains why a wrapper is needed), with
the Go toolchain, caches and flags of ``kube``.  The binary is cached under
``<cache>/vault-hashicorp/<version>/`` and never rebuilt; ``vault.build.json`` beside it records
the build's seconds and bytes.

``start vault-hashicorp`` runs ``vault server -dev`` (in-memory, unsealed, KV v2 at ``secret/``)
on a free loopback port with a root token made for the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .common import Context, TestenvError, log
from .kube import go_parallelism, run_go

BUILD_MODULE = Path(__file__).resolve().parents[1] / "vault-build"
"""The wrapper Go module whose go.mod pins github.com/hashicorp/vault (the one source of the
version)."""

NAME = "vault-hashicorp"
PREFIX = "DYNCONF_TEST_VAULT_HASHICORP_"
START_TIMEOUT = 60.0


def vault_version() -> str:
    """The Vault release pinned in ``scripts/vault-build/go.mod`` (``v1.21.4``)."""
    gomod = (BUILD_MODULE / "go.mod").read_text()
    match = re.search(r"^(?:require)?\s*github\.com/hashicorp/vault\s+(v\S+)", gomod, re.MULTILINE)
    if not match:
        raise TestenvError(
            f"no github.com/hashicorp/vault requirement in {BUILD_MODULE / 'go.mod'}"
        )
    return match.group(1)


def vault_bin_dir(ctx: Context) -> Path:
    """Where the built binary of the pinned version lives."""
    return ctx.cache / NAME / vault_version()


def install_vault_hashicorp(ctx: Context) -> None:
    """Build ``vault`` of the pinned release into the cache (skipped when already there).

    One build at a time per cache: a second ``install`` (another checkout, a fixture) waits on
    the lock and then finds the binary.  Written to a temporary name and renamed, so an
    interrupted build never leaves a binary that looks finished.  Build time and size go to
    ``<bin dir>/vault.build.json``.
    """
    version = vault_version()
    out_dir = vault_bin_dir(ctx)
    target = out_dir / "vault"
    if target.is_file():
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "vault.build.lock").open("w") as lock:
        if not _try_lock(lock):
            log(f"another vault {version} build is running; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return
        tmp = out_dir / f"vault.tmp.{os.getpid()}"
        log(f"building vault {version} from the Go module proxy (many minutes on 2 cores)")
        try:
            took = run_go(
                ctx,
                [
                    "build",
                    "-p",
                    go_parallelism(),
                    "-ldflags",
                    "-s -w",  # the version comes from the module's embedded VERSION file
                    "-o",
                    str(tmp),
                    "github.com/hashicorp/vault",
                ],
                cwd=BUILD_MODULE,
                log_path=out_dir / "vault.build.log",
            )
            tmp.rename(target)
        finally:
            tmp.unlink(missing_ok=True)
    size = target.stat().st_size
    info = {"version": version, "seconds": round(took, 1), "bytes": size}
    (out_dir / "vault.build.json").write_text(json.dumps(info) + "\n")
    log(f"built vault in {took:.0f} s ({size / 2**20:.0f} MiB)")


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def start_vault_hashicorp(ctx: Context) -> dict[str, str]:
    """``vault server -dev`` with a per-run root token; KV v2 at ``secret/``."""
    binary = vault_bin_dir(ctx) / "vault"
    if not binary.is_file():
        raise TestenvError(
            f"{binary} is not built: run `scripts/testenv install {NAME}` first "
            f"(builds {vault_version()} from the Go module proxy; see its log beside it)"
        )
    port, _cluster = ctx.free_ports(2)  # the dev server's cluster listener takes port + 1
    token = "root-" + secrets.token_hex(8)
    data = ctx.data_dir(NAME, fresh=True)
    ctx.spawn(
        NAME,
        [
            str(binary),
            "server",
            "-dev",
            "-dev-no-store-token",
            f"-dev-listen-address=127.0.0.1:{port}",
            f"-dev-root-token-id={token}",
        ],
        env={"HOME": str(data), "VAULT_LOG_LEVEL": "warn"},
        cwd=data,
    )
    addr = f"http://127.0.0.1:{port}"
    ctx.wait_http(
        f"{addr}/v1/sys/health",
        START_TIMEOUT,
        ok=lambda status, body: status == 200 and b'"sealed":false' in body,
        proc=NAME,
    )
    # the dev server mounts KV v2 at secret/ just after it unseals
    ctx.wait_http(
        f"{addr}/v1/sys/mounts/secret",
        START_TIMEOUT,
        ok=lambda status, body: status == 200 and b'"version":"2"' in body,
        proc=NAME,
        headers={"X-Vault-Token": token},
    )
    return {f"{PREFIX}ADDR": addr, f"{PREFIX}TOKEN": token}


INSTALLERS: dict[str, Callable[[Context], None]] = {NAME: install_vault_hashicorp}
SLOW: dict[str, int] = {NAME: 90}
"""Last in the background worker: only the ldap auth tests need it."""
SERVERS: dict[str, Callable[[Context], dict[str, str]]] = {NAME: start_vault_hashicorp}
STORE_SERVERS: list[str] = [NAME]
"""Started by a bare ``scripts/testenv start`` along with the ``stores`` servers."""
