"""``scripts/release artifacts|bundle`` without a registry: the chart pinning and the refusals.

The registry, the signatures and the air-gap round trip run in ``tests/e2e/test_release.py``
(they need the images); here is what can be checked in seconds, the push of an image index
and its SBOM referrer included (a tiny image, into a real loopback registry: ``e2e``, because
crane is built with the node).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.fixtures.registry import OciRegistry
from tests.fixtures.release import REPO, release_argv

sys.path.insert(0, str(REPO / "scripts"))
from release_lib.artifacts import (
    SBOM_MEDIA_TYPE,
    VALUES_SECTION,
    ArtifactError,
    Published,
    Tools,
    image_index,
    pin_values,
    push_image,
    referrers,
)
from testenv_lib.oci import Artifact, ImageConfig, write_archive

VALUES = REPO / "charts" / "dynamic-config" / "values.yaml"
PINS = {
    section: (f"127.0.0.1:5000/dynamic-config-{name}", "sha256:" + f"{i:x}" * 64)
    for i, (name, section) in enumerate(VALUES_SECTION.items(), start=10)
}


def _release(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(release_argv(REPO, *argv),
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", **env})  # fmt: skip


def test_pinning_sets_each_image_and_digest_and_nothing_else() -> None:
    text = VALUES.read_text()

    pinned = pin_values(text, PINS)

    values = yaml.safe_load(pinned)
    for section, (repository, digest) in PINS.items():
        assert (values[section]["image"], values[section]["digest"]) == (repository, digest)
    changed = [
        (a, b) for a, b in zip(text.splitlines(), pinned.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 2 * len(PINS)
    assert yaml.safe_load(text)["webhook"]["agentEnvAllow"] == values["webhook"]["agentEnvAllow"]


def test_pinning_refuses_a_digest_that_is_not_sha256() -> None:
    with pytest.raises(ArtifactError, match=r"agent: 'sha256:abc' is not a sha256:<64 hex>"):
        pin_values(VALUES.read_text(), {"agent": ("r/agent", "sha256:abc")})


def test_pinning_refuses_a_section_without_a_digest_line() -> None:
    text = 'agent:\n  image: a\n  digest: ""\nnodeAgent:\n  image: b\n  tag: ""\n'

    with pytest.raises(ArtifactError, match=r"`nodeAgent:` has no `  digest:` line"):
        pin_values(text, {"nodeAgent": ("r/node", "sha256:" + "e" * 64)})


def test_every_image_section_of_the_chart_takes_a_digest() -> None:
    values = yaml.safe_load(VALUES.read_text())

    assert all(values[section]["digest"] == "" for section in VALUES_SECTION.values())


def test_artifacts_without_the_tools_says_how_to_install_them(tmp_path: Path) -> None:
    result = _release("artifacts", "--registry", "127.0.0.1:5000", "--key", "k",
                      env={"DYNCONF_TESTENV_CACHE": str(tmp_path)})  # fmt: skip

    assert result.returncode == 1
    assert re.search(r"no \w+ found; run `scripts/testenv install \w+`", result.stderr)
    assert "Traceback" not in result.stderr


def test_artifacts_without_the_images_says_how_to_build_them(tmp_path: Path) -> None:
    (tmp_path / "cosign.pub").write_text("")
    tools = dict.fromkeys(("CRANE", "COSIGN", "HELM"), "/bin/true")

    result = _release("artifacts", "--registry", "127.0.0.1:5000", "--key",
                      str(tmp_path / "cosign.key"), "--images", str(tmp_path / "none"),
                      env={**tools, "DYNCONF_TESTENV_CACHE": str(tmp_path)})  # fmt: skip

    assert result.returncode == 1
    assert "run `scripts/testenv install images` first" in result.stderr
    assert "Traceback" not in result.stderr


def test_bundle_of_a_missing_release_record_names_the_command_that_writes_one(
    tmp_path: Path,
) -> None:
    tools = dict.fromkeys(("CRANE", "COSIGN", "HELM"), "/bin/true")

    result = _release("bundle", "--release", str(tmp_path / "release.json"), "--out",
                      str(tmp_path / "b.tar"), env={**tools,
                                                    "DYNCONF_TESTENV_CACHE": str(tmp_path)})  # fmt: skip

    assert result.returncode == 1
    assert "`scripts/release artifacts` writes one" in result.stderr


MANIFEST = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": "sha256:" + "a" * 64, "size": 321}  # fmt: skip


def test_the_image_index_lists_the_manifest_for_linux_amd64_and_is_the_same_every_time() -> None:
    index = image_index(MANIFEST)

    document = json.loads(index)
    assert document["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert document["manifests"] == [{**MANIFEST, "platform": {"architecture": "amd64",
                                                               "os": "linux"}}]  # fmt: skip
    assert image_index(dict(MANIFEST)) == index


def test_the_release_record_keeps_each_images_manifest_and_sbom_referrer(tmp_path: Path) -> None:
    digest = "sha256:" + "b" * 64
    record = Published("127.0.0.1:5000", "0.3.0", "0.3.0", {"agent": digest}, digest, "c.tgz",
                       {"agent": {"linux/amd64": MANIFEST["digest"]}}, {"agent": digest})  # fmt: skip

    record.dump(tmp_path / "release.json")

    assert Published.load(tmp_path / "release.json") == record


def _tiny_archive(where: Path) -> tuple[Path, bytes]:
    """A one-file image archive with its SBOM artifact, as the image builder writes them."""
    rootfs = where / "rootfs"
    rootfs.mkdir()
    (rootfs / "hello").write_text("hello from the release test\n")
    sbom = json.dumps({"bomFormat": "CycloneDX", "components": []}).encode()
    archive = where / "tiny.tar"
    write_archive(rootfs, archive, "dynconf.local/tiny:1", ImageConfig(),
                  lambda digest: [Artifact(SBOM_MEDIA_TYPE, sbom)])  # fmt: skip
    return archive, sbom


@pytest.mark.e2e
def test_an_image_is_pushed_as_an_index_with_its_sbom_as_a_referrer_of_its_manifest(
    oci_registry: Callable[[], OciRegistry], crane_bin: Path, tmp_path: Path
) -> None:
    registry = oci_registry()
    archive, sbom = _tiny_archive(tmp_path)
    tools = Tools(crane_bin, Path("/bin/false"), Path("/bin/false"), tmp_path / "home")

    pushed = push_image(tools, archive, f"{registry.address}/tiny", "1")

    tagged = subprocess.run([str(crane_bin), "digest", f"{registry.address}/tiny:1"],
                            capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    assert tagged.stdout.strip() == pushed.index != pushed.manifest
    listed, via = referrers(registry.address, "tiny", pushed.manifest)
    assert via == "referrers tag"  # crane registry serve has no referrers API
    assert [(m["digest"], m.get("artifactType")) for m in listed] == [
        (pushed.sbom, SBOM_MEDIA_TYPE)
    ]
    blob = subprocess.run([str(crane_bin), "blob",
                           f"{registry.address}/tiny@sha256:{hashlib.sha256(sbom).hexdigest()}"],
                          capture_output=True, check=True, timeout=60)  # fmt: skip
    assert blob.stdout == sbom


@pytest.mark.e2e
def test_referrers_of_an_image_nothing_refers_to_are_none(
    oci_registry: Callable[[], OciRegistry], crane_bin: Path, tmp_path: Path
) -> None:
    registry = oci_registry()
    archive, _ = _tiny_archive(tmp_path)
    tools = Tools(crane_bin, Path("/bin/false"), Path("/bin/false"), tmp_path / "home")
    pushed = push_image(tools, archive, f"{registry.address}/tiny", "1")

    assert referrers(registry.address, "tiny", pushed.index) == ([], "referrers tag")
