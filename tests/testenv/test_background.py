"""``scripts/testenv install --background``: the slow installs run in a worker, and whatever needs
one of them waits for exactly that one (scripts/testenv_lib/background.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from testenv_lib import background, load_registry, startable_now  # noqa: E402
from testenv_lib.common import Context  # noqa: E402

TESTENV = REPO / "scripts" / "testenv"


def _testenv(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DYNCONF_TESTENV_RUN": str(run)}
    return subprocess.run(
        [sys.executable, str(TESTENV), *args], env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context(run=tmp_path / "run")


def test_a_slow_component_goes_to_the_worker_and_wait_returns_when_it_is_done(
    tmp_path: Path, helm_bin: Path
) -> None:
    run = tmp_path / "run"
    queued = _testenv(run, "install", "--background", "helm", "kubeconform")
    assert queued.returncode == 0, queued.stderr
    assert "install kubeconform:" in queued.stderr  # quick: in the foreground
    assert (run / "background" / "order").read_text().split() == ["helm"]

    waited = _testenv(run, "wait", "helm")
    assert waited.returncode == 0, waited.stderr
    assert not (run / "background" / "pending" / "helm").exists()
    log = (run / "logs" / "background-install.log").read_text()
    assert "install helm:" in log
    assert "background install total:" in log
    _testenv(run, "stop")


def test_a_failed_background_install_is_reported_by_name(ctx: Context) -> None:
    background.queue(ctx, ["no-such-component"])
    problems = background.wait(ctx, ["no-such-component"])
    assert len(problems) == 1
    assert "install no-such-component failed in the background" in problems[0]
    assert background.pending(ctx) == []


def test_a_worker_that_ended_early_is_a_problem_not_a_hang(ctx: Context) -> None:
    (ctx.run / "background" / "pending").mkdir(parents=True)
    (ctx.run / "background" / "pending" / "kube").touch()
    (ctx.run / "background" / "order").write_text("kube\n")
    problems = background.wait(ctx, ["kube"])
    assert problems and "ended before kube was installed" in problems[0]


def test_a_name_never_queued_needs_no_wait(ctx: Context) -> None:
    assert background.wait(ctx, ["helm"]) == []


def test_a_bare_start_leaves_out_servers_still_building(ctx: Context) -> None:
    (ctx.run / "background" / "pending").mkdir(parents=True)
    (ctx.run / "background" / "pending" / "vault-hashicorp").touch()
    (ctx.run / "background" / "order").write_text("vault-hashicorp\n")
    names = startable_now(ctx, load_registry())
    assert "vault-hashicorp" not in names
    assert "consul" in names


def test_the_worker_builds_what_the_e2e_ladder_needs_before_the_tools_few_tests_use() -> None:
    order = load_registry().slow
    ladder = max(order.index(name) for name in ("kube", "helm", "node", "images"))
    assert all(order.index(name) > ladder for name in ("promtool", "vault-hashicorp"))


def test_the_release_tools_are_built_after_the_images_and_before_the_tools_few_tests_use() -> None:
    order = load_registry().slow

    images, crane, cosign = (order.index(name) for name in ("images", "crane", "cosign"))

    assert images < crane < cosign
    assert all(order.index(name) > cosign for name in ("kustomize", "promtool", "vault-hashicorp"))


@pytest.mark.parametrize(("value", "included"), [(None, True), ("1", True), ("0", False)])
def test_a_bare_install_builds_cosign_unless_the_release_leg_is_left_out(
    monkeypatch: pytest.MonkeyPatch, value: str | None, included: bool
) -> None:
    if value is None:
        monkeypatch.delenv("DYNCONF_RELEASE", raising=False)
    else:
        monkeypatch.setenv("DYNCONF_RELEASE", value)

    assert load_registry().ungated("cosign") is included
