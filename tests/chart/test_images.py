"""Every image the chart names has a Dockerfile in docker/, and the install steps those
Dockerfiles run produce working entrypoints (there is no Docker engine here, so the test runs
docker/agent-install.sh into a fresh prefix and starts each entrypoint from it)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chart.support import CHART, REPO
from tests.fixtures.uv import Uv

DOCKER = REPO / "docker"
COMPONENTS = ("agent", "webhook", "operator", "node-agent")
PROBES: dict[str, tuple[str, ...]] = {
    "agent": ("--help",),
    "webhook": ("validate", str(REPO / "examples" / "consul-anonymous.yaml")),
    "operator": ("--crds",),
    "node-agent": ("--help",),
}
"""A harmless invocation of each entrypoint that exits 0 when the program is whole."""


def _entrypoint(component: str) -> str:
    text = (DOCKER / f"Dockerfile.{component}").read_text()
    match = re.search(r'^ENTRYPOINT \["([^"]+)"', text, re.MULTILINE)
    assert match, f"Dockerfile.{component} has no exec-form ENTRYPOINT"
    return match.group(1)


def test_every_image_the_chart_names_has_a_dockerfile() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    images = [values["agent"]["image"], values["webhook"]["image"], values["operator"]["image"],
              values["nodeAgent"]["image"]]  # fmt: skip

    for image in images:
        component = image.rsplit("/", 1)[1].removeprefix("dynconf-")
        assert (DOCKER / f"Dockerfile.{component}").is_file(), image
        assert _entrypoint(component).endswith(f"/dynamic-config-{component}")


def test_nonroot_images_say_so() -> None:
    for component in ("agent", "webhook", "operator"):
        text = (DOCKER / f"Dockerfile.{component}").read_text()
        assert "USER 65532:65532" in text, component
        assert "docker/agent-install.sh /opt/dynamic-config" in text, component


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, uv_bin: Uv) -> Path:
    prefix = tmp_path_factory.mktemp("image") / "opt" / "dynamic-config"
    result = subprocess.run(
        [str(DOCKER / "agent-install.sh"), str(prefix)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=uv_bin.env(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return prefix


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("component", COMPONENTS)
def test_each_entrypoint_runs_from_a_fresh_install(
    component: str, installed: Path, tmp_path: Path
) -> None:
    binary = installed / "venv" / "bin" / f"dynamic-config-{component}"
    assert _entrypoint(component) == f"/opt/dynamic-config/venv/bin/dynamic-config-{component}"

    result = subprocess.run(
        [str(binary), *PROBES[component]],
        capture_output=True,
        text=True,
        env={
            "PATH": f"{installed / 'venv' / 'bin'}:/usr/bin:/bin",
            "DYNCONF_PLUGIN_LOCK": str(installed / "plugins.lock"),
            "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(tmp_path / "none.yaml"),
        },
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip(), "the entrypoint printed nothing"
