"""``scripts/release PACKAGE VERSION`` in a temporary clone: the real repository is never tagged.

Each test clones the committed tree, so what is released is exactly what CI checks out.
"""

from __future__ import annotations

import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.release import clear_unreleased, git, note_unreleased, release_argv
from tests.fixtures.uv import Uv

DATE = "2026-12-24"

pytestmark = [pytest.mark.slow]


def _release(
    clone: Path, uv_bin: Uv, *argv: str, date: str = DATE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        release_argv(clone, *argv, "--date", date),
        cwd=clone,
        capture_output=True,
        text=True,
        env=uv_bin.env(),
        timeout=300,
    )


def _unreleased(changelog: str) -> str:
    """What a changelog holds under ``## [Unreleased]``, up to the next release's heading."""
    body = changelog.split("## [Unreleased]\n", 1)[1]
    return body[: body.index("\n## [")].strip("\n")


def test_a_release_bumps_moves_unreleased_builds_that_package_alone_and_tags(
    clone: Path, uv_bin: Uv
) -> None:
    package = clone / "packages" / "dynconf-store-redis"
    already = _unreleased((package / "CHANGELOG.md").read_text())  # the tree's own, if any
    note_unreleased(clone, "dynconf-store-redis", "### Fixed\n\n- A reconnect after a failover.")
    head = git(clone, "rev-parse", "HEAD")
    result = _release(clone, uv_bin, "dynconf-store-redis", "0.1.1")
    assert result.returncode == 0, result.stderr
    assert 'version = "0.1.1"' in (package / "pyproject.toml").read_text()
    changelog = (package / "CHANGELOG.md").read_text()
    moved = "### Fixed\n\n- A reconnect after a failover.\n\n" + (
        f"{already}\n\n" if already else ""
    )
    assert (
        f"## [Unreleased]\n\n## [0.1.1] - 2026-12-24\n\n{moved}## [0.1.0] - 2026-12-01\n"
        in changelog
    )
    lock = (clone / "uv.lock").read_text()
    assert 'name = "dynconf-store-redis"\nversion = "0.1.1"' in lock
    assert 'name = "dynconf-core"\nversion = "0.1.0"' in lock  # the core is not released with it
    dist = clone / "dist" / "dynconf-store-redis-0.1.1"
    assert sorted(p.name for p in dist.iterdir() if p.suffix) == [
        "dynconf_store_redis-0.1.1-py3-none-any.whl",
        "dynconf_store_redis-0.1.1.tar.gz",
    ]
    with zipfile.ZipFile(dist / "dynconf_store_redis-0.1.1-py3-none-any.whl") as wheel:
        tops = {name.split("/")[0] for name in wheel.namelist()}
        metadata = wheel.read("dynconf_store_redis-0.1.1.dist-info/METADATA").decode()
    assert tops == {"dynconf_store_redis", "dynconf_store_redis-0.1.1.dist-info"}
    assert "Requires-Dist: dynconf-core<0.2,>=0.1" in metadata
    with tarfile.open(dist / "dynconf_store_redis-0.1.1.tar.gz") as sdist:
        assert "dynconf_store_redis-0.1.1/CHANGELOG.md" in sdist.getnames()
    assert git(clone, "log", "-1", "--format=%s") == "Release dynconf-store-redis 0.1.1\n"
    assert git(clone, "rev-parse", "HEAD~1") == head
    tagged = git(clone, "rev-list", "-n", "1", "dynconf-store-redis-v0.1.1")
    assert tagged == git(clone, "rev-parse", "HEAD")
    assert git(clone, "status", "--porcelain", "--untracked-files=no") == ""


def test_releasing_the_version_a_package_has_tags_it_without_a_commit(
    clone: Path, uv_bin: Uv
) -> None:
    head = git(clone, "rev-parse", "HEAD")
    result = _release(clone, uv_bin, "dynconf-core", "0.1.0")
    assert result.returncode == 0, result.stderr
    assert git(clone, "rev-parse", "HEAD") == head
    assert git(clone, "rev-list", "-n", "1", "dynconf-core-v0.1.0") == head
    assert "release: tagged dynconf-core-v0.1.0\n" in result.stdout
    assert {p.name for p in (clone / "dist" / "dynconf-core-0.1.0").iterdir() if p.suffix} == {
        "dynconf_core-0.1.0-py3-none-any.whl",
        "dynconf_core-0.1.0.tar.gz",
    }


def test_a_core_release_bumps_its_version_literal_too(clone: Path, uv_bin: Uv) -> None:
    note_unreleased(clone, "dynconf-core", "### Added\n\n- Something small.")
    result = _release(clone, uv_bin, "dynconf-core", "0.1.1")
    assert result.returncode == 0, result.stderr
    init = (clone / "packages" / "dynconf-core" / "src" / "dynconf" / "__init__.py").read_text()
    assert '__version__ = "0.1.1"' in init


def test_a_version_without_a_changelog_entry_is_refused_and_nothing_changes(
    clone: Path, uv_bin: Uv
) -> None:
    clear_unreleased(clone, "dynconf-store-vault")
    head = git(clone, "rev-parse", "HEAD")
    result = _release(clone, uv_bin, "dynconf-store-vault", "0.2.0")
    assert result.returncode == 1
    assert result.stderr == (
        "release: packages/dynconf-store-vault/CHANGELOG.md has no `## [0.2.0]` entry and "
        "`## [Unreleased]` is empty; describe what 0.2.0 changes under `## [Unreleased]`, "
        "commit, and release again\n"
    )
    assert git(clone, "rev-parse", "HEAD") == head
    assert git(clone, "status", "--porcelain") == ""
    assert git(clone, "tag", "--list") == ""


def test_dry_run_prints_every_step_and_takes_none(clone: Path, uv_bin: Uv) -> None:
    note_unreleased(clone, "dynconf-store-etcd", "### Fixed\n\n- A watch resumed too late.")
    head = git(clone, "rev-parse", "HEAD")
    result = _release(clone, uv_bin, "dynconf-store-etcd", "0.1.1", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "release: would set the version of dynconf-store-etcd 0.1.0 -> 0.1.1 in "
        "packages/dynconf-store-etcd/pyproject.toml",
        "release: would update uv.lock (its entry for the package; uv lock --check)",
        "release: would move Unreleased into `## [0.1.1] - 2026-12-24` in "
        "packages/dynconf-store-etcd/CHANGELOG.md",
        "release: would build the sdist and wheel of dynconf-store-etcd alone into "
        "dist/dynconf-store-etcd-0.1.1/ (uv build --package dynconf-store-etcd --offline)",
        "release: would commit `Release dynconf-store-etcd 0.1.1`",
        "release: would tag dynconf-store-etcd-v0.1.1",
    ]
    assert git(clone, "rev-parse", "HEAD") == head
    assert git(clone, "status", "--porcelain") == ""
    assert git(clone, "tag", "--list") == ""
    assert not (clone / "dist").exists()


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (
            ("dynconf-store-nope", "0.1.1"),
            "no package is named `dynconf-store-nope`; use one of: dynconf-core",
        ),
        (
            ("dynconf-store-git", "v0.1.1"),
            "`v0.1.1` is not a release version; use MAJOR.MINOR.PATCH",
        ),
        (
            ("dynconf-store-git", "0.0.9"),
            "dynconf-store-git is at 0.1.0, above 0.0.9; a release never goes backwards",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_the_fix(
    clone: Path, uv_bin: Uv, argv: tuple[str, str], reason: str
) -> None:
    result = _release(clone, uv_bin, *argv)
    assert result.returncode == 1
    assert result.stderr.startswith(f"release: {reason}")
    assert git(clone, "tag", "--list") == ""


def test_an_existing_tag_is_refused(clone: Path, uv_bin: Uv) -> None:
    git(clone, "tag", "dynconf-store-s3-v0.1.0")
    result = _release(clone, uv_bin, "dynconf-store-s3", "0.1.0")
    assert result.returncode == 1
    assert result.stderr == (
        "release: the tag dynconf-store-s3-v0.1.0 exists already; release a newer version\n"
    )


def test_a_core_release_outside_the_ranges_the_stores_declare_is_refused(
    clone: Path, uv_bin: Uv
) -> None:
    note_unreleased(clone, "dynconf-core", "### Changed\n\n- A breaking change.")
    result = _release(clone, uv_bin, "dynconf-core", "0.2.0")
    assert result.returncode == 1
    assert result.stderr.startswith(
        "release: dynconf-k8s requires dynconf-core>=0.1,<0.2; dynconf-store-configserver "
        "requires dynconf-core>=0.1,<0.2; "
    )
    assert result.stderr.endswith(
        "which leaves out 0.2.0: widen those ranges (and release those packages) in the same "
        "change, or release dynconf-core within them\n"
    )
    assert git(clone, "tag", "--list") == ""


def test_registry_and_key_go_together(clone: Path, uv_bin: Uv) -> None:
    result = _release(clone, uv_bin, "dynconf-store-redis", "0.1.0", "--registry", "127.0.0.1:1")
    assert result.returncode == 2
    assert "--registry and --key go together" in result.stderr
    assert git(clone, "tag", "--list") == ""


def test_a_dry_run_with_a_registry_names_the_publish_before_the_tag(
    clone: Path, uv_bin: Uv
) -> None:
    result = _release(clone, uv_bin, "dynconf-store-redis", "0.1.0", "--dry-run",
                      "--registry", "127.0.0.1:5000", "--key", "cosign.key")  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-2:] == [
        "release: would publish dynconf-store-redis 0.1.0, the images and the chart to "
        "127.0.0.1:5000, signed",
        "release: would tag dynconf-store-redis-v0.1.0",
    ]
