"""``scripts/testenv doctor`` and the resolvers it shares with the testenv: system tools found off
``PATH``, Go and Java found or bootstrapped (scripts/testenv_lib/doctor.py, common.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from testenv_lib import common  # noqa: E402
from testenv_lib.common import SYSTEM_TOOL_DIRS, system_tool  # noqa: E402
from testenv_lib.doctor import SYSTEM_TOOLS  # noqa: E402

TESTENV = REPO / "scripts" / "testenv"
DOCTOR_SECONDS = 5.0


def _path_without_sbin() -> str:
    sbin = {*SYSTEM_TOOL_DIRS, "/usr/local/sbin"}
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p not in sbin)


def _doctor(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "DYNCONF_TESTENV_RUN": str(tmp_path / "run"), **env}
    return subprocess.run(
        [sys.executable, str(TESTENV), "doctor"], env=full, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def _line(output: str, name: str) -> str:
    """The report line of check ``name`` (``  ok      ldconfig   /usr/sbin/ldconfig``)."""
    return next(line for line in output.splitlines() if line.split()[1:2] == [name])


def _sbin_only(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join(SYSTEM_TOOL_DIRS))
    on_path = shutil.which(name, path=_path_without_sbin())
    if found is None or on_path is not None:
        pytest.skip(f"{name} is not a sbin-only tool on this machine")
    return found


def _stub_go(directory: Path, version: str) -> Path:
    go = directory / "go"
    go.parent.mkdir(parents=True, exist_ok=True)
    go.write_text(f'#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo go{version}\n')
    go.chmod(0o755)
    return go


# ---------------------------------------------------------------------------- system_tool
def test_system_tool_finds_a_sbin_tool_when_path_leaves_sbin_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ldconfig = _sbin_only("ldconfig")
    monkeypatch.setenv("PATH", _path_without_sbin())
    assert system_tool("ldconfig") == ldconfig


def test_system_tool_prefers_the_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = tmp_path / "ldconfig"
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert system_tool("ldconfig") == str(stub)


def test_a_missing_system_tool_raises_naming_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(common.TestenvError, match="apt-get install openssl"):
        system_tool("openssl")


# ---------------------------------------------------------------------------- go and java
def test_a_go_older_than_the_builds_need_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYNCONF_TESTENV_TOOLCHAINS", "bootstrap")  # only the tools dir's Go
    monkeypatch.setenv("DYNCONF_TOOLS_DIR", str(tmp_path))
    go = _stub_go(common.bootstrapped_go().parent, "1.20.0")
    assert common.go_candidates() == [str(go)]
    assert common.find_go() is None


def test_a_go_as_new_as_the_builds_need_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DYNCONF_TESTENV_TOOLCHAINS", "bootstrap")
    monkeypatch.setenv("DYNCONF_TOOLS_DIR", str(tmp_path))
    minimum = ".".join(map(str, common.go_minimum()[0]))
    go = _stub_go(common.bootstrapped_go().parent, minimum)
    assert common.find_go() == str(go)


def test_the_go_minimum_is_the_newest_any_build_needs() -> None:
    from testenv_lib.tools import ALL_TOOLS

    minimum, why = common.go_minimum()
    assert minimum >= max(common.version_tuple(tool.go) for tool in ALL_TOOLS)
    gomod = (REPO / "scripts" / "k8s-build" / "go.mod").read_text()
    assert minimum >= common.version_tuple(gomod.split("\ngo ", 1)[1].split()[0])
    assert why


# ---------------------------------------------------------------------------- the doctor
def test_doctor_finds_system_tools_with_sbin_off_path(tmp_path: Path) -> None:
    ldconfig = _sbin_only("ldconfig")
    result = _doctor(tmp_path, PATH=_path_without_sbin())
    line = _line(result.stdout, "ldconfig")
    assert line.split()[0] == "ok", result.stdout
    assert ldconfig in line


def test_doctor_reports_a_missing_tool_and_exits_nonzero(tmp_path: Path) -> None:
    """Every system tool but openssl on a stub PATH; the machine's Go and Java hidden."""
    stub = tmp_path / "bin"
    stub.mkdir()
    for name in SYSTEM_TOOLS:
        found = shutil.which(name)
        if name != "openssl" and found:
            (stub / name).symlink_to(found)
    if shutil.which("openssl", path=os.pathsep.join(SYSTEM_TOOL_DIRS)):
        pytest.skip("openssl sits in a sbin directory here, where the doctor always looks")
    result = _doctor(
        tmp_path,
        PATH=str(stub),
        DYNCONF_TESTENV_TOOLCHAINS="bootstrap",
        DYNCONF_TOOLS_DIR=str(tmp_path / "tools"),
    )
    assert result.returncode == 2, result.stdout
    line = _line(result.stdout, "openssl")
    assert line.split()[0] == "MISSING"
    assert "fix: apt-get install openssl" in result.stdout
    assert "missing openssl" in result.stdout.splitlines()[-1]
    assert f"bootstrapped from PyPI ({common.GO_BOOTSTRAP})" in _line(result.stdout, "go")
    assert f"bootstrapped from PyPI ({common.JDK_BOOTSTRAP})" in _line(result.stdout, "java")


def test_doctor_answers_in_a_few_seconds(tmp_path: Path) -> None:
    began = time.monotonic()
    result = _doctor(tmp_path)
    took = time.monotonic() - began
    assert result.stdout.splitlines()[-1].startswith("doctor: "), result.stderr
    assert took < DOCTOR_SECONDS, f"doctor took {took:.1f} s"
