"""``scripts/release wheels``: every package's sdist and wheel, checked, on a Python index.

Three steps, each taken only when the one before succeeded:

1. build: ``uv build --offline`` of every package (or the ``--package`` ones) into ``--dist``;
2. check: each package has one wheel and one sdist whose metadata carries its name, the version
   its ``pyproject.toml`` declares, ``Requires-Python``, a license and a readme; every gap of
   every file is named in one refusal, so a release is fixed in one pass;
3. publish (with ``--index-url``): ``uv publish`` to the index's legacy upload API.

Credentials come only from the environment uv reads (``UV_PUBLISH_TOKEN``, or
``UV_PUBLISH_USERNAME`` and ``UV_PUBLISH_PASSWORD``): never from the command line, never printed,
and scrubbed from any output of uv's that is shown. An upload URL carrying ``user:password@`` is
refused, and so is plain http to anything but loopback. uv sends no credential after a redirect
to another origin (it refuses the upload instead; ``tests/release/test_python_index.py``).

Publishing the same version again: an index refuses a file it holds (409, or PyPI's 400), so the
upload is told the index's simple API (``--check-url``) and ``uv publish --check-url`` asks it
first: a file the index holds with the same SHA-256 is skipped, one that differs is a failure
(the version must change), and a publish that stopped half-way finishes when run again.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Final

from . import REPO, ReleaseError, current_version, find_uv, packages

__all__ = [
    "CREDENTIAL_VARIABLES",
    "Distribution",
    "build",
    "check",
    "credentials",
    "main",
    "metadata_problems",
    "publish",
    "publish_argv",
]

CREDENTIAL_VARIABLES: Final = ("UV_PUBLISH_TOKEN", "UV_PUBLISH_USERNAME", "UV_PUBLISH_PASSWORD")
"""The environment a publish reads its credentials from: a token, or a username and password."""


@dataclass(frozen=True)
class Distribution:
    """One package's checked files."""

    package: str
    version: str
    wheel: Path
    sdist: Path


def normalize(name: str) -> str:
    """PEP 503's name normalization (``dynconf_store_consul`` -> ``dynconf-store-consul``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _file_project(filename: str) -> str:
    if filename.endswith(".whl"):
        return normalize(filename.split("-", 1)[0])
    return normalize(filename.removesuffix(".tar.gz").rsplit("-", 1)[0])


def build(repo: Path, uv: str, selected: Sequence[str], dist: Path) -> list[Path]:
    """Build the sdist and wheel of each of ``selected`` into a fresh ``dist``."""
    shutil.rmtree(dist, ignore_errors=True)
    every = sorted(selected) == sorted(packages(repo))
    runs = [["--all-packages"]] if every else [["--package", name] for name in selected]
    for which in runs:
        result = subprocess.run(
            [uv, "build", *which, "--offline", "--no-build-logs", "--sdist", "--wheel",
             "--out-dir", str(dist)],
            check=False, cwd=repo, capture_output=True, text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise ReleaseError(
                f"uv build {' '.join(which)} failed (exit {result.returncode}); nothing was "
                f"published:\n{result.stderr.strip()}"
            )
    return sorted(p for p in dist.iterdir() if p.name.endswith((".whl", ".tar.gz")))


def read_metadata(path: Path) -> Message:
    """The core metadata of a wheel (``*.dist-info/METADATA``) or an sdist (``PKG-INFO``)."""
    parser = email.parser.BytesParser(policy=email.policy.compat32)
    if path.name.endswith(".whl"):
        with zipfile.ZipFile(path) as wheel:
            names = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise ReleaseError(f"{path.name} has no single .dist-info/METADATA; rebuild it")
            return parser.parsebytes(wheel.read(names[0]))
    with tarfile.open(path) as sdist:
        member = next((m for m in sdist.getmembers() if re.fullmatch(r"[^/]+/PKG-INFO", m.name)),
                      None)  # fmt: skip
        handle = sdist.extractfile(member) if member is not None else None
        if handle is None:
            raise ReleaseError(f"{path.name} has no top-level PKG-INFO; rebuild it")
        return parser.parsebytes(handle.read())


def metadata_problems(path: Path, package: str, version: str, where: str) -> list[str]:
    """What ``path``'s metadata lacks for a release of ``package`` at ``version``, each with
    its fix (``where``: the package's ``pyproject.toml``, as the fix names it)."""
    metadata = read_metadata(path)
    problems = []
    name = metadata.get("Name")
    if name is None or normalize(str(name)) != normalize(package):
        problems.append(f"{path.name} is named {name!r}, not {package}; rebuild it from {where}")
    if str(metadata.get("Version")) != version:
        problems.append(f"{path.name} has version {metadata.get('Version')!r}, not {version} as "
                        f"{where} declares; rebuild it")  # fmt: skip
    if not str(metadata.get("Requires-Python") or "").strip():
        problems.append(f"{path.name} has no Requires-Python; declare `requires-python` in {where}")
    if not (metadata.get("License-Expression") or metadata.get("License")):
        problems.append(f"{path.name} declares no license; add `license = \"<SPDX expression>\"` "
                        f"to [project] in {where}")  # fmt: skip
    description = metadata.get_payload()
    if not (isinstance(description, str) and description.strip()) or not metadata.get(
        "Description-Content-Type"
    ):
        problems.append(f"{path.name} has no readme; add `readme = \"README.md\"` to [project] in "
                        f"{where} (and the file beside it)")  # fmt: skip
    return problems


def check(repo: Path, selected: Sequence[str], files: Sequence[Path]) -> list[Distribution]:
    """Each of ``selected``'s wheel and sdist, their metadata checked; one refusal naming every
    problem of every file when any has one."""
    known = packages(repo)
    problems: list[str] = []
    found: list[Distribution] = []
    for package in selected:
        root = known[package]
        version = current_version(root)
        where = f"{root.relative_to(repo)}/pyproject.toml"
        mine = [f for f in files if _file_project(f.name) == normalize(package)]
        wheels = [f for f in mine if f.name.endswith(".whl")]
        sdists = [f for f in mine if f.name.endswith(".tar.gz")]
        if len(wheels) != 1 or len(sdists) != 1:
            problems.append(f"{package} built {len(wheels)} wheels and {len(sdists)} sdists, not "
                            "one of each; remove stale files from the dist directory")  # fmt: skip
            continue
        for path in (*wheels, *sdists):
            problems.extend(metadata_problems(path, package, version, where))
        found.append(Distribution(package, version, wheels[0], sdists[0]))
    if problems:
        raise ReleaseError(
            f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in the built files, "
            "nothing was published:\n  " + "\n  ".join(problems)
        )
    return found


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _checked_url(url: str, option: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReleaseError(f"{option} must be an http(s) URL with a host, e.g. "
                           "https://upload.pypi.org/legacy/")  # fmt: skip
    if parts.username is not None or parts.password is not None:
        raise ReleaseError(
            f"{option} carries credentials; drop `user:password@` from it and set "
            "UV_PUBLISH_USERNAME and UV_PUBLISH_PASSWORD (or UV_PUBLISH_TOKEN)"
        )
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ReleaseError(f"{option} is plain http to {parts.hostname}, which would send the "
                           "credentials in the clear; use https")  # fmt: skip
    return url


def credentials(env: Mapping[str, str]) -> dict[str, str]:
    """The credential variables set in ``env``: a token, or a username and a password."""
    found = {name: env[name] for name in CREDENTIAL_VARIABLES if env.get(name)}
    token = "UV_PUBLISH_TOKEN" in found
    pair = {"UV_PUBLISH_USERNAME", "UV_PUBLISH_PASSWORD"} <= found.keys()
    if token == pair:
        raise ReleaseError(
            "publishing needs credentials in the environment: set UV_PUBLISH_TOKEN, or "
            "UV_PUBLISH_USERNAME and UV_PUBLISH_PASSWORD (one of the two, never on the command "
            "line)"
        )
    return found


def publish_argv(uv: str, files: Sequence[Path], index_url: str, check_url: str) -> list[str]:
    """The ``uv publish`` command line; credentials are never on it (uv reads the environment)."""
    return [uv, "publish", "--publish-url", index_url, "--check-url", check_url,
            "--trusted-publishing", "never", "--keyring-provider", "disabled",
            *(str(f) for f in files)]  # fmt: skip


def _scrubbed(text: str, secrets: Mapping[str, str]) -> str:
    for name, value in secrets.items():
        if name != "UV_PUBLISH_USERNAME":
            text = text.replace(value, f"<{name}>")
    return text


def publish(
    uv: str, files: Sequence[Path], index_url: str, check_url: str, env: Mapping[str, str]
) -> list[str]:
    """Upload ``files``; uv's report (one line per file: uploaded or skipped) on success."""
    index_url = _checked_url(index_url, "--index-url")
    check_url = _checked_url(check_url, "--check-url")
    secrets = credentials(env)
    child = {k: v for k, v in env.items() if k not in CREDENTIAL_VARIABLES} | secrets
    result = subprocess.run(publish_argv(uv, files, index_url, check_url), check=False,
                            env=child, capture_output=True, text=True)  # fmt: skip
    report = _scrubbed(f"{result.stdout}\n{result.stderr}", secrets).strip()
    if result.returncode != 0:
        raise ReleaseError(
            f"uv publish to {index_url} failed (exit {result.returncode}); a file the index "
            "holds with other bytes needs a new version, anything else can be published again "
            f"(what was uploaded is skipped):\n{report}"
        )
    return [line for line in report.splitlines() if line.startswith(("Uploading", "File "))]


def main(argv: Sequence[str], repo: Path = REPO) -> int:
    known = packages(repo)
    parser = argparse.ArgumentParser(
        prog="scripts/release wheels",
        description="Build the sdist and wheel of every package, check their metadata (name, "
        "version, Requires-Python, license, readme) and, with --index-url, publish them to a "
        "Python package index. Credentials only from UV_PUBLISH_TOKEN, or UV_PUBLISH_USERNAME "
        "and UV_PUBLISH_PASSWORD.",
    )
    parser.add_argument(
        "--index-url",
        help="the index's upload URL (the legacy API), e.g. https://upload.pypi.org/legacy/; "
        "without it, build and check only",
    )
    parser.add_argument(
        "--check-url",
        help="the index's simple API, e.g. https://pypi.org/simple/ (with --index-url): files "
        "it holds identically are skipped, differing ones fail",
    )
    parser.add_argument("--package", action="append", choices=sorted(known), metavar="PACKAGE",
                        help="only this package (repeatable; default: every one)")  # fmt: skip
    parser.add_argument(
        "--dist",
        type=Path,
        help="where the files are built (emptied first; default: dist/wheels)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps, take none")
    args = parser.parse_args(argv)
    if (args.index_url is None) != (args.check_url is None):
        parser.error("--index-url and --check-url go together: the check is what makes "
                     "publishing again safe")  # fmt: skip
    selected = args.package or list(known)
    dist = args.dist or repo / "dist" / "wheels"

    def say(line: str) -> None:
        sys.stdout.write(f"release: {line}\n")
        sys.stdout.flush()

    try:
        if args.index_url is not None:
            _checked_url(args.index_url, "--index-url")
            _checked_url(args.check_url, "--check-url")
            credentials(os.environ)
        prefix = "would " if args.dry_run else ""
        plural = "s" if len(selected) > 1 else ""
        say(f"{prefix}build the sdist and wheel of {len(selected)} package{plural} into "
            f"{dist} (uv build --offline)")  # fmt: skip
        say(f"{prefix}check each file's metadata: name, version, Requires-Python, license, readme")
        if args.index_url is not None:
            say(f"{prefix}publish them to {args.index_url} (uv publish; skipping files "
                f"{args.check_url} holds identically)")  # fmt: skip
        if args.dry_run:
            return 0
        files = build(repo, find_uv(), selected, dist)
        checked = check(repo, selected, files)
        for distribution in checked:
            say(f"checked {distribution.wheel.name} and {distribution.sdist.name}")
        if args.index_url is not None:
            for line in publish(find_uv(), [f for d in checked for f in (d.wheel, d.sdist)],
                                args.index_url, args.check_url, os.environ):  # fmt: skip
                say(line)
            say(f"published {len(checked)} packages to {args.index_url}")
    except ReleaseError as error:
        sys.stderr.write(f"release: {error}\n")
        return 1
    return 0
