"""``scripts/testenv start registry``: crane's registry on loopback, on a disk store of its run.

Marked ``e2e``: crane is built with the node and the images (``DYNCONF_E2E=1``), for the release
leg (``tests/e2e/test_release.py``), which uses the registry through the ``oci_registry`` fixture.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.kube import REPO, TESTENV, _read_env

sys.path.insert(0, str(REPO / "scripts"))
from testenv_lib.common import process_alive
from testenv_lib.oci import ImageConfig, write_archive

pytestmark = pytest.mark.e2e


def _testenv(run: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TESTENV), *argv], capture_output=True, text=True,
                          env={**os.environ, "DYNCONF_TESTENV_RUN": str(run)}, timeout=120,
                          check=False)  # fmt: skip


def _tiny_layout(where: Path) -> tuple[Path, str]:
    """A one-file image as an OCI layout directory; (the directory, its manifest digest)."""
    rootfs = where / "rootfs"
    rootfs.mkdir()
    (rootfs / "hello").write_text("hello from the registry test\n")
    digest = write_archive(rootfs, where / "tiny.tar", "dynconf.local/tiny:1", ImageConfig())
    layout = where / "layout"
    with tarfile.open(where / "tiny.tar") as tar:
        tar.extractall(layout, filter="data")
    return layout, digest


def test_the_registry_serves_a_pushed_image_by_digest_and_stop_ends_it(
    crane_bin: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    started = _testenv(run, "start", "registry")
    assert started.returncode == 0, started.stderr
    address = _read_env(run / "published" / "registry.env")["DYNCONF_TEST_REGISTRY"]
    pid = int((run / "pids" / "registry.pid").read_text())
    try:
        layout, digest = _tiny_layout(tmp_path)
        pushed = subprocess.run([str(crane_bin), "push", str(layout), f"{address}/tiny:1"],
                                capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        request = urllib.request.Request(
            f"http://{address}/v2/tiny/manifests/{digest}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()

        assert pushed.stdout.strip() == f"{address}/tiny@{digest}"
        assert "sha256:" + hashlib.sha256(body).hexdigest() == digest
        assert json.loads(body)["layers"][0]["mediaType"].startswith("application/vnd.oci")
        assert any((run / "data" / "registry").iterdir()), "no blob reached the disk store"
    finally:
        stopped = _testenv(run, "stop")

    assert stopped.returncode == 0, stopped.stderr
    assert not process_alive(pid)
    assert not (run / "data" / "registry").exists()
