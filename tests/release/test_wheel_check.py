"""The metadata check ``scripts/release wheels`` runs on every built file, and the publish command
line it runs, without building or publishing anything (``test_python_index.py`` does both)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from release_lib.wheels import metadata_problems, publish_argv  # noqa: E402


def test_the_publish_command_line_carries_no_credential() -> None:
    argv = publish_argv("uv", [Path("a.whl")], "https://x.example/legacy/", "https://x.example/s/")
    assert not {"-u", "-p", "-t", "--username", "--password", "--token"} & set(argv)


def _wheel(tmp_path: Path, metadata: str) -> Path:
    path = tmp_path / "dynconf_store_x-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("dynconf_store_x-0.1.0.dist-info/METADATA", metadata)
    return path


def test_the_check_names_each_missing_field_and_its_fix(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "Metadata-Version: 2.4\nName: dynconf-store-x\nVersion: 0.1.0\n\n")
    problems = metadata_problems(wheel, "dynconf-store-x", "0.1.0", "packages/x/pyproject.toml")
    assert [p.split(";")[0] for p in problems] == [
        f"{wheel.name} has no Requires-Python",
        f"{wheel.name} declares no license",
        f"{wheel.name} has no readme",
    ]
    assert all("packages/x/pyproject.toml" in p for p in problems)


def test_the_check_refuses_a_file_of_another_version_than_the_pyproject(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "Metadata-Version: 2.4\nName: dynconf-store-x\nVersion: 0.1.0\n"
                   "Requires-Python: >=3.11\nLicense-Expression: MIT\n"
                   "Description-Content-Type: text/markdown\n\n# x\n")  # fmt: skip
    assert metadata_problems(wheel, "dynconf-store-x", "0.1.0", "p") == []
    (problem,) = metadata_problems(wheel, "dynconf-store-x", "0.2.0", "p")
    assert "has version '0.1.0', not 0.2.0" in problem
