"""``scripts/release wheels`` publishes every package to a real Python index, and a store package
installs from that index alone into a fresh venv and reads the real Consul.

The index is :mod:`tests.fixtures.package_index` on loopback (the legacy upload API behind basic
auth, the simple API pip reads). The release runs from a throwaway clone whose packages declare
a license and a readme: the check refuses files without them, so a package of the committed
tree that lacks either gets a placeholder in the clone. The third-party wheels the consul store needs are the
versions ``uv.lock`` pins, downloaded once into ``~/.cache/dynconf-tools/index-wheels`` (later
runs are offline) and served by the same index, so pip reaches nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.package_index import PackageIndex, serve_index
from tests.fixtures.release import git, note_unreleased, release_argv, release_clone
from tests.fixtures.servers import ConsulServer
from tests.fixtures.uv import Uv, bootstrap_dir

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from release_lib import current_version, packages  # noqa: E402
from release_lib.wheels import normalize  # noqa: E402

pytestmark = [pytest.mark.slow]

TEST_LICENSE = "LicenseRef-Loopback-Test"
CREDENTIALS = ("UV_PUBLISH_TOKEN", "UV_PUBLISH_USERNAME", "UV_PUBLISH_PASSWORD")

RECORDING_UV = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
exec "{uv}" "$@"
"""
"""A uv that writes its command line to a log first: what a credential on argv would leave."""


def _prepare(clone: Path) -> None:
    """Give every package of ``clone`` that lacks them a license and a readme (the committed
    tree's own, where it declares them), put the working tree's release scripts in it (the code
    under test, committed or not), and commit both."""
    shutil.copy2(REPO / "scripts" / "release", clone / "scripts" / "release")
    shutil.copytree(REPO / "scripts" / "release_lib", clone / "scripts" / "release_lib",
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for pyproject in sorted((clone / "packages").glob("*/pyproject.toml")):
        readme = pyproject.parent / "README.md"
        if not readme.exists():
            readme.write_text(f"# {pyproject.parent.name}\n\nA dynconf package.\n")
        project = tomllib.loads(text := pyproject.read_text())["project"]
        missing = {"readme": 'readme = "README.md"\n', "license": f'license = "{TEST_LICENSE}"\n'}
        added = "".join(line for key, line in missing.items() if key not in project)
        text = re.sub(r'(?m)^(requires-python = "[^"]+"\n)', rf"\g<1>{added}", text, count=1)
        pyproject.write_text(text)
    git(clone, "add", "--all")
    if git(clone, "status", "--porcelain"):
        git(clone, "commit", "--quiet", "-m", "declare a license and a readme")


@dataclass(frozen=True)
class Published:
    """The clone, its index, and the first ``scripts/release wheels`` run into it."""

    clone: Path
    index: PackageIndex
    env: dict[str, str]
    """The release's environment: uv, and the index's credentials in ``UV_PUBLISH_*``."""
    first: subprocess.CompletedProcess[str]
    argv_log: Path
    """Every uv command line the first run executed."""

    def release(self, *argv: str, env: dict[str, str] | None = None,
                index: PackageIndex | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """``scripts/release wheels --index-url … --check-url … argv`` in the clone."""
        target = index or self.index
        return subprocess.run(
            release_argv(self.clone, "wheels", "--index-url", target.upload_url,
                         "--check-url", target.simple_url, *argv),
            capture_output=True, text=True, timeout=300, cwd=self.clone,
            env=self.env if env is None else env,
        )  # fmt: skip

    def ours(self) -> list[str]:
        """The files of the index that are the workspace's own distributions."""
        names = {normalize(p) for p in packages(self.clone)}
        return [
            f for f in self.index.files() if normalize(re.split(r"-\d", f, maxsplit=1)[0]) in names
        ]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, uv_bin: Uv) -> Iterator[Published]:
    clone = release_clone(tmp_path_factory.mktemp("python-index") / "repo")
    _prepare(clone)
    argv_log = clone.parent / "uv-argv.log"
    recording = clone.parent / "uv"
    recording.write_text(RECORDING_UV.format(log=argv_log, uv=uv_bin.path))
    recording.chmod(0o755)
    with serve_index(clone.parent / "index") as index:
        env = {k: v for k, v in uv_bin.env().items() if k not in CREDENTIALS}
        env |= {"UV_PUBLISH_USERNAME": index.username, "UV_PUBLISH_PASSWORD": index.password}
        first = subprocess.run(
            release_argv(clone, "wheels", "--index-url", index.upload_url,
                         "--check-url", index.simple_url, "--dist", str(clone / "dist" / "first")),
            capture_output=True, text=True, timeout=300, cwd=clone, env={**env, "UV": str(recording)},
        )  # fmt: skip
        yield Published(clone, index, env, first, argv_log)


def test_every_package_is_published_as_one_wheel_and_one_sdist(published: Published) -> None:
    assert published.first.returncode == 0, published.first.stderr
    names = sorted(normalize(p).replace("-", "_") for p in packages(published.clone))
    expected = sorted(
        f"{n}-0.1.0{tail}" for n in names for tail in ("-py3-none-any.whl", ".tar.gz")
    )
    assert published.ours() == expected
    assert f"published {len(names)} packages" in published.first.stdout


def test_the_credentials_reach_the_index_only_as_basic_auth(published: Published) -> None:
    index = published.index
    basic = base64.b64encode(f"{index.username}:{index.password}".encode()).decode()
    first_uploads = [u for u in index.uploads if u.status == 200]
    assert first_uploads
    assert {u.authorization for u in first_uploads} == {f"Basic {basic}"}
    shown = published.first.stdout + published.first.stderr + published.argv_log.read_text()
    assert "publish --publish-url" in published.argv_log.read_text()
    assert index.password not in shown
    assert basic not in shown


def test_publishing_the_same_version_again_skips_the_identical_files(
    published: Published,
) -> None:
    before = published.ours()
    stored = len([u for u in published.index.uploads if u.status == 200])
    again = published.release("--dist", str(published.clone / "dist" / "again"))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already exists, skipping") == len(before)
    assert published.ours() == before
    assert len([u for u in published.index.uploads if u.status == 200]) == stored


def test_a_differing_file_of_a_published_version_fails_and_keeps_the_indexs_file(
    published: Published,
) -> None:
    readme = published.clone / "packages" / "dynconf-store-git" / "README.md"
    wheel = published.index.root / "dynconf_store_git-0.1.0-py3-none-any.whl"
    held = hashlib.sha256(wheel.read_bytes()).hexdigest()
    original = readme.read_text()
    readme.write_text(original + "\nA change published under the same version.\n")
    try:
        result = published.release("--package", "dynconf-store-git",
                                   "--dist", str(published.clone / "dist" / "differing"))  # fmt: skip
    finally:
        readme.write_text(original)
    assert result.returncode == 1
    assert "Local file and index file do not match for `dynconf_store_git-0.1.0" in result.stderr
    assert "uv publish to" in result.stderr
    assert "needs a new version" in result.stderr
    assert "dynconf_store_git-0.1.0" in result.stderr
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == held
    assert published.index.password not in result.stdout + result.stderr


def test_an_upload_redirected_to_another_origin_sends_it_no_credential(
    published: Published, tmp_path: Path
) -> None:
    with serve_index(tmp_path / "elsewhere") as elsewhere, \
            serve_index(tmp_path / "redirecting", password=published.index.password) as index:  # fmt: skip
        index.redirect_uploads_to = elsewhere.upload_url
        result = published.release("--package", "dynconf-store-git",
                                   "--dist", str(tmp_path / "dist"), index=index)  # fmt: skip
    assert result.returncode == 1
    assert "Redirected URL is not in the same realm" in result.stderr
    assert [u.status for u in index.uploads] == [307]
    assert elsewhere.uploads == []
    assert index.password not in result.stdout + result.stderr


def test_publishing_without_credentials_is_refused_before_anything_is_built(
    published: Published, tmp_path: Path
) -> None:
    env = {k: v for k, v in published.env.items() if k not in CREDENTIALS}
    result = published.release("--dist", str(tmp_path / "dist"), env=env)
    assert result.returncode == 1
    assert "set UV_PUBLISH_TOKEN, or UV_PUBLISH_USERNAME and UV_PUBLISH_PASSWORD" in result.stderr
    assert not (tmp_path / "dist").exists()


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        ("http://uploader:s3cr3t-in-url@127.0.0.1:9/", "carries credentials"),
        ("http://index.example.com/legacy/", "plain http to index.example.com"),
        ("ftp://index.example.com/", "must be an http(s) URL"),
    ],
)
def test_an_unsafe_upload_url_is_refused(published: Published, url: str, refusal: str) -> None:
    result = subprocess.run(
        release_argv(published.clone, "wheels", "--index-url", url,
                     "--check-url", "https://index.example.com/simple/", "--dry-run"),
        capture_output=True, text=True, timeout=60, env=published.env,
    )  # fmt: skip
    assert result.returncode == 1
    assert refusal in result.stderr
    assert "s3cr3t-in-url" not in result.stderr


def test_releasing_one_package_publishes_its_files_before_the_tag(
    tmp_path: Path, uv_bin: Uv
) -> None:
    clone = release_clone(tmp_path / "repo")
    _prepare(clone)
    note_unreleased(clone, "dynconf-store-git", "### Fixed\n\n- A change to release.")
    with serve_index(tmp_path / "index") as index:
        env = {k: v for k, v in uv_bin.env().items() if k not in CREDENTIALS}
        env |= {"UV_PUBLISH_USERNAME": index.username, "UV_PUBLISH_PASSWORD": index.password}
        argv = ("dynconf-store-git", "0.1.1", "--index-url", index.upload_url,
                "--check-url", index.simple_url)  # fmt: skip
        planned = subprocess.run(release_argv(clone, *argv, "--dry-run"), capture_output=True,
                                 text=True, timeout=60, cwd=clone, env=env)  # fmt: skip
        result = subprocess.run(release_argv(clone, *argv), capture_output=True, text=True,
                                timeout=300, cwd=clone, env=env)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert (
        f"would check the metadata of dynconf-store-git 0.1.1's files and publish them to {index.upload_url}"
        in planned.stdout
    )
    assert result.returncode == 0, result.stderr
    assert index.files() == [
        "dynconf_store_git-0.1.1-py3-none-any.whl",
        "dynconf_store_git-0.1.1.tar.gz",
    ]
    assert git(clone, "tag", "--list", "dynconf-store-git-v0.1.1").strip()


# ------------------------------------------------------------ the consul store from the index


def _clean_env() -> dict[str, str]:
    """The environment with nothing that points pip or Python elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_", "PYTHON")) and k != "VIRTUAL_ENV"}  # fmt: skip
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
                  "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip


def _locked_wheels(uv_bin: Uv, pip: list[str]) -> list[Path]:
    """The wheels of the third-party packages ``uv.lock`` pins beneath dynconf-store-consul,
    for this interpreter and platform, downloaded once into the tools cache."""
    exported = subprocess.run(
        [str(uv_bin.path), "export", "--package", "dynconf-store-consul", "--no-hashes",
         "--no-emit-workspace", "--no-dev", "--frozen", "--no-header", "--no-annotate"],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=uv_bin.env(), check=True,
    ).stdout  # fmt: skip
    requirements = sorted(line for line in exported.splitlines() if line and line[0].isalnum())
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}-{platform.machine()}"
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:16]
    cache = bootstrap_dir() / "index-wheels" / tag
    stamp = cache / f"complete-{digest}"
    if not stamp.exists():
        cache.mkdir(parents=True, exist_ok=True)
        listed = cache / f"requirements-{digest}.txt"
        listed.write_text("\n".join(requirements) + "\n")
        downloaded = subprocess.run(
            [*pip, "download", "--only-binary", ":all:", "--no-deps", "-d", str(cache),
             "-r", str(listed)],
            capture_output=True, text=True, timeout=300, env=_clean_env(),
        )  # fmt: skip
        assert downloaded.returncode == 0, f"pip download (needs PyPI once): {downloaded.stderr}"
        stamp.write_text("\n".join(requirements) + "\n")
    pinned = {
        (normalize(m[1]), m[2])
        for line in stamp.read_text().splitlines()
        if (m := re.match(r"([A-Za-z0-9_.-]+)==([^ ;]+)", line))
    }
    return [w for w in sorted(cache.glob("*.whl"))
            if (normalize(w.name.split("-")[0]), w.name.split("-")[1]) in pinned]  # fmt: skip


def test_the_consul_store_installs_alone_from_the_index_and_reads_consul(
    published: Published, uv_bin: Uv, consul_server: ConsulServer, tmp_path: Path
) -> None:
    assert published.first.returncode == 0, published.first.stderr
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120,
                   env=_clean_env())  # fmt: skip
    python = str(venv / "bin" / "python")
    for wheel in _locked_wheels(uv_bin, [python, "-m", "pip"]):
        published.index.add(wheel)
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--no-cache-dir", "--only-binary", ":all:",
         "--index-url", published.index.simple_url, "dynconf-store-consul"],
        capture_output=True, text=True, timeout=300, env=_clean_env(),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "Successfully installed" in installed.stdout

    key = f"release-smoke/{uuid.uuid4().hex}/config.json"
    document = {"db": {"host": "db.internal", "port": 5432}}
    urllib.request.urlopen(urllib.request.Request(
        f"{consul_server.url}/v1/kv/{key}", data=json.dumps(document).encode(), method="PUT"
    ), timeout=10).close()  # fmt: skip

    program = (
        "import json, sys, dynconf, dynconf_store_consul\n"
        "from dynconf import DynamicConfig\n"
        "from dynconf.remote import Consul\n"
        "config = DynamicConfig(None, 'db').remote(Consul(sys.argv[1], sys.argv[2]))\n"
        "config.init()\n"
        "print(json.dumps({'file': dynconf.__file__, 'db': dict(config.current())}))\n"
    )
    read = subprocess.run([python, "-c", program, consul_server.url, key], capture_output=True,
                          text=True, timeout=60, env=_clean_env(), cwd=tmp_path)  # fmt: skip
    assert read.returncode == 0, read.stderr
    answer = json.loads(read.stdout)
    assert answer["db"] == document["db"]
    assert answer["file"].startswith(str(venv))

    dynconf = str(venv / "bin" / "dynconf")
    version = subprocess.run([dynconf, "--version"], capture_output=True, text=True, timeout=60,
                             env=_clean_env())  # fmt: skip
    core = current_version(published.clone / "packages" / "dynconf-core")
    assert version.stdout.strip() == f"dynconf {core}", version.stderr
    out = tmp_path / "rendered.toml"
    rendered = subprocess.run(
        [dynconf, "render", "--source", "consul", "--endpoint", consul_server.url, "--key", key,
         "--out", str(out)],
        capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    assert 'host = "db.internal"' in out.read_text()
