"""``scripts/release artifacts|bundle`` without a registry: the chart pinning and the refusals.

The registry, the signatures and the air-gap round trip run in ``tests/e2e/test_release.py``
(they need the images); here is what can be checked in seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from release_lib.artifacts import VALUES_SECTION, ArtifactError, pin_values  # noqa: E402

VALUES = REPO / "charts" / "dynamic-config" / "values.yaml"
PINS = {
    section: (f"127.0.0.1:5000/dynamic-config-{name}", "sha256:" + f"{i:x}" * 64)
    for i, (name, section) in enumerate(VALUES_SECTION.items(), start=10)
}


def _release(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "release"), *argv],
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
