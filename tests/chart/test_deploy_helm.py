"""``deploy/helm``, the path every command of the book installs from, is the chart itself.

It is a symlink to ``charts/dynamic-config`` (one chart, two spellings), so the real helm must
take it as a chart directory: lint it, render it exactly as the chart renders, and package it
under the chart's own name and version.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chart.support import CHART, REPO, helm_template, tool_env

pytestmark = pytest.mark.helm

DEPLOY_HELM = REPO / "deploy" / "helm"
MINTED = re.compile(r"[A-Za-z0-9+/=]{64,}")
"""The chart mints a fresh webhook CA (and checksums of it) on every render."""


def _helm(helm: Path, scratch: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args],
        capture_output=True,
        text=True,
        env=tool_env(scratch),
        timeout=120,
        check=False,
    )


def test_deploy_helm_resolves_to_the_chart() -> None:
    assert DEPLOY_HELM.is_symlink()
    assert DEPLOY_HELM.resolve() == CHART.resolve()
    assert not Path(str(DEPLOY_HELM.readlink())).is_absolute(), "a clone elsewhere must work"


def test_helm_lint_accepts_deploy_helm(helm_bin: Path, tmp_path: Path) -> None:
    result = _helm(helm_bin, tmp_path, "lint", str(DEPLOY_HELM))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_helm_template_of_deploy_helm_is_the_charts_own(helm_bin: Path, tmp_path: Path) -> None:
    through_link = _helm(
        helm_bin, tmp_path, "template", "dc", str(DEPLOY_HELM), "--namespace", "dynamic-config"
    )
    direct = helm_template(helm_bin, tmp_path)

    assert through_link.returncode == 0, through_link.stderr
    assert MINTED.sub("<minted>", through_link.stdout) == MINTED.sub("<minted>", direct.stdout)


def test_helm_package_of_deploy_helm_names_the_chart(helm_bin: Path, tmp_path: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())

    result = _helm(helm_bin, tmp_path, "package", str(DEPLOY_HELM), "-d", str(tmp_path))

    assert result.returncode == 0, result.stderr
    assert (tmp_path / f"{chart['name']}-{chart['version']}.tgz").is_file()
