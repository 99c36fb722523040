"""``scripts/release PACKAGE VERSION``: release one distribution of the workspace on its own.

A release is four steps, all checked before any is taken, so a refusal changes nothing:

1. the version: ``version`` in the package's ``pyproject.toml`` (and a ``__version__`` literal in
   its import package, when it has one) becomes VERSION, and ``uv.lock`` follows;
2. the changelog: ``CHANGELOG.md`` must have a ``## [VERSION]`` section; when it has none, the
   ``## [Unreleased]`` entries become it (dated today), and an empty Unreleased is a refusal;
3. the artifacts: an sdist and a wheel of that package alone (``uv build --package``, offline:
   the build backend comes from uv's cache) in ``dist/<package>-<version>/``;
4. the commit ``Release <package> <version>`` (when steps 1 and 2 changed a file) and the annotated
   tag ``<package>-v<version>``.

``--dry-run`` prints the steps and takes none. Standard library only, like ``scripts/testenv``.

With ``--registry HOST:PORT --key cosign.key`` the same command also publishes, before it tags:
the package's wheel and sdist as one OCI artifact ``<registry>/packages/<package>:<version>``
(signed, with a CycloneDX SBOM of the files and of everything ``uv.lock`` pins beneath the
package attached as a signed attestation), then the four images and the chart
(``artifacts.publish``: what ``scripts/release artifacts`` does), every signature verified. A
failed publish leaves the release untagged, so running the command again finishes it.

``scripts/release tag-first [--dry-run]`` tags the tree as the first release of every package:
``<package>-v<version>`` at HEAD for each distribution, at the version its ``pyproject.toml``
already carries (and its changelog already describes). Nothing is bumped or built; every check
runs before the first tag, so a refusal (a dirty tree, a tag that exists, a missing changelog
entry) creates none.

With ``--index-url URL --check-url URL`` the package's two files are checked (name, version,
Requires-Python, license, readme) and published to that Python package index before the tag, as
``scripts/release wheels`` publishes every package (``wheels.py``: credentials only from
``UV_PUBLISH_*``; a file the index already holds identically is skipped, a differing one fails).

``scripts/release artifacts …`` and ``scripts/release bundle …`` release the images and the chart
instead: pushed to an OCI registry by digest, signed, SBOMs attested, and the air-gap bundle
(``artifacts.py``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "ReleaseError",
    "changelog_with_entry",
    "main",
    "plan",
    "set_version",
    "tag_first",
]

REPO: Final = Path(__file__).resolve().parents[2]
VERSION_RE: Final = re.compile(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?")
PROJECT_VERSION: Final = re.compile(r'(?m)^(version\s*=\s*")([^"]+)(")')
INIT_VERSION: Final = re.compile(r'(?m)^(__version__\s*=\s*")([^"]+)(")')
UNRELEASED: Final = "## [Unreleased]"


class ReleaseError(Exception):
    """A refusal: one sentence saying what is wrong and what to do; nothing was changed."""


@dataclass
class Plan:
    """What a release of one package at one version will do."""

    package: str
    version: str
    root: Path
    current: str
    tag: str
    dist: Path
    edits: dict[Path, str] = field(default_factory=dict)
    """Files to rewrite, with their new text."""
    notes: list[str] = field(default_factory=list)
    """One line per step, for ``--dry-run`` and the log."""


def _key(version: str) -> tuple[int, ...]:
    """An ordering of our versions: release numbers, then a pre-release below its release."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:(a|b|rc)(\d+))?", version)
    if match is None:
        return (0,)
    major, minor, patch, phase, number = match.groups()
    rank = {"a": 0, "b": 1, "rc": 2, None: 3}[phase]
    return (int(major), int(minor), int(patch), rank, int(number or 0))


def _git(repo: Path, *argv: str, check: bool = True) -> str:
    result = subprocess.run(["git", *argv], check=False, cwd=repo, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ReleaseError(f"git {' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout


def find_uv() -> str:
    """``$UV``, else ``uv`` on PATH, else the one ``scripts/dev`` bootstraps."""
    tools = os.environ.get("DYNCONF_TOOLS_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dynconf-tools"
    )
    for candidate in (os.environ.get("UV"), shutil.which("uv"), f"{tools}/bin/uv"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise ReleaseError("no uv found: run `scripts/dev` once (it bootstraps uv) or set UV")


def packages(repo: Path) -> dict[str, Path]:
    """Every distribution of the workspace, by its name in ``pyproject.toml``."""
    found = {}
    for pyproject in sorted((repo / "packages").glob("*/pyproject.toml")):
        match = re.search(r'(?m)^name\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"))
        if match:
            found[match[1]] = pyproject.parent
    return found


def current_version(root: Path) -> str:
    match = PROJECT_VERSION.search((root / "pyproject.toml").read_text(encoding="utf-8"))
    if match is None:
        raise ReleaseError(f'{root / "pyproject.toml"} has no `version = "…"` line; add one')
    return match[2]


def set_version(root: Path, version: str) -> dict[Path, str]:
    """The files of one package that carry its version, rewritten to ``version``."""
    edits = {}
    pyproject = root / "pyproject.toml"
    edits[pyproject] = PROJECT_VERSION.sub(
        rf"\g<1>{version}\g<3>", pyproject.read_text(encoding="utf-8"), count=1
    )
    for init in sorted(root.glob("src/*/__init__.py")):
        text = init.read_text(encoding="utf-8")
        if INIT_VERSION.search(text):
            edits[init] = INIT_VERSION.sub(rf"\g<1>{version}\g<3>", text, count=1)
    return edits


def lock_with_version(lock: str, package: str, current: str, version: str) -> str:
    """``uv.lock`` with the workspace member's one ``version`` line moved to ``version``.

    Edited, not re-resolved: ``uv lock --offline`` would resolve the whole universal lock again,
    which needs every platform's metadata in uv's cache (a fresh machine has only its own), and
    a release must not change any other pin. ``uv lock --check`` then confirms the result.
    """
    name, old = re.escape(package), re.escape(current)
    entry = re.compile(rf'(\nname = "{name}"\nversion = "){old}("\nsource = {{ editable)')
    edited, count = entry.subn(rf"\g<1>{version}\g<2>", lock)
    if count != 1:
        raise ReleaseError(
            f"uv.lock has no workspace entry for {package} {current}; run `uv lock` and commit it"
        )
    return edited


def changelog_with_entry(text: str, version: str, date: str, *, where: str) -> str | None:
    """The changelog with a ``## [version]`` section: as it is (``None``), or with the
    Unreleased entries moved under a new dated heading; a refusal when there are none."""
    if re.search(rf"(?m)^## \[{re.escape(version)}\]", text):
        return None
    start = text.find(UNRELEASED)
    if start < 0:
        raise ReleaseError(
            f"{where} has neither `## [{version}]` nor `{UNRELEASED}`; add an Unreleased "
            "section describing the changes, then release again"
        )
    body_start = start + len(UNRELEASED)
    following = re.search(r"(?m)^## \[", text[body_start:])
    body_end = body_start + following.start() if following else len(text)
    body = text[body_start:body_end].strip("\n")
    if not body.strip():
        raise ReleaseError(
            f"{where} has no `## [{version}]` entry and `{UNRELEASED}` is empty; describe what "
            f"{version} changes under `{UNRELEASED}`, commit, and release again"
        )
    return (
        f"{text[:body_start]}\n\n## [{version}] - {date}\n\n{body}\n\n{text[body_end:].lstrip()}"
    ).rstrip() + "\n"


def _padded(version: str) -> tuple[int, ...]:
    return _key(".".join([*version.split("."), "0", "0"][:3]))


def _allows(spec: str, version: str) -> bool:
    """Whether a ``>=0.1,<0.2``-style specifier admits ``version`` (the forms we write)."""
    tests = {
        ">=": lambda a, b: a >= b,
        ">": lambda a, b: a > b,
        "<=": lambda a, b: a <= b,
        "<": lambda a, b: a < b,
        "==": lambda a, b: a == b,
    }
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = re.fullmatch(r"(>=|<=|==|>|<)\s*([\d.]+)", clause)
        if match and not tests[match[1]](_key(version), _padded(match[2])):
            return False
    return True


def core_range_refusals(repo: Path, package: str, version: str) -> list[str]:
    """The workspace packages whose declared range of ``package`` leaves ``version`` out."""
    found = []
    dependency = re.compile(rf'"{re.escape(package)}(?:\[[^\]]*\])?([^";]*)"')
    for name, root in packages(repo).items():
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
        for spec in sorted({m[1].strip() for m in dependency.finditer(text)}):
            if name != package and not _allows(spec, version):
                found.append(f"{name} requires {package}{spec}")
    return found


def plan(repo: Path, package: str, version: str, *, date: str) -> Plan:
    """Check everything a release needs and say what it will change; change nothing."""
    known = packages(repo)
    if package not in known:
        raise ReleaseError(f"no package is named `{package}`; use one of: {', '.join(known)}")
    if not VERSION_RE.fullmatch(version):
        raise ReleaseError(
            f"`{version}` is not a release version; use MAJOR.MINOR.PATCH (optionally a1, b1, rc1)"
        )
    root = known[package]
    current = current_version(root)
    if _key(version) < _key(current):
        raise ReleaseError(
            f"{package} is at {current}, above {version}; a release never goes backwards"
        )
    tag = f"{package}-v{version}"
    if _git(repo, "tag", "--list", tag).strip():
        raise ReleaseError(f"the tag {tag} exists already; release a newer version")
    if _git(repo, "status", "--porcelain", "--untracked-files=no").strip():
        raise ReleaseError("the work tree has uncommitted changes; commit or drop them first")
    release = Plan(package, version, root, current, tag, repo / "dist" / f"{package}-{version}")
    rel = root.relative_to(repo)
    outside = core_range_refusals(repo, package, version)
    if outside:
        raise ReleaseError(
            f"{'; '.join(outside)}, which leaves out {version}: widen those ranges (and "
            f"release those packages) in the same change, or release {package} within them"
        )
    if version != current:
        release.edits.update(set_version(root, version))
        files = ", ".join(str(p.relative_to(repo)) for p in release.edits)
        release.notes.append(f"set the version of {package} {current} -> {version} in {files}")
        lock = repo / "uv.lock"
        release.edits[lock] = lock_with_version(
            lock.read_text(encoding="utf-8"), package, current, version
        )
        release.notes.append("update uv.lock (its entry for the package; uv lock --check)")
    else:
        release.notes.append(f"keep the version {version} ({rel}/pyproject.toml has it)")
    changelog = root / "CHANGELOG.md"
    if not changelog.is_file():
        raise ReleaseError(f"{rel}/CHANGELOG.md is missing; write one (Keep a Changelog)")
    moved = changelog_with_entry(
        changelog.read_text(encoding="utf-8"), version, date, where=f"{rel}/CHANGELOG.md"
    )
    if moved is None:
        release.notes.append(f"use the entry for {version} in {rel}/CHANGELOG.md")
    else:
        release.edits[changelog] = moved
        release.notes.append(
            f"move Unreleased into `## [{version}] - {date}` in {rel}/CHANGELOG.md"
        )
    release.notes.append(
        f"build the sdist and wheel of {package} alone into {release.dist.relative_to(repo)}/ "
        f"(uv build --package {package} --offline)"
    )
    if release.edits:
        release.notes.append(f"commit `Release {package} {version}`")
    release.notes.append(f"tag {tag}")
    return release


def execute(repo: Path, release: Plan, uv: str, *, tag: bool = True) -> list[Path]:
    """Take the planned steps; a failed build puts the files back and tags nothing.

    ``tag=False`` stops before the tag (:func:`tag_release`), for a release that publishes first.
    """
    originals = {path: path.read_text(encoding="utf-8") for path in release.edits}
    try:
        for path, text in release.edits.items():
            path.write_text(text, encoding="utf-8")
        if release.version != release.current:
            _uv(repo, uv, "lock", "--check", "--offline", "--quiet")
        shutil.rmtree(release.dist, ignore_errors=True)
        _uv(repo, uv, "build", "--package", release.package, "--offline", "--no-build-logs",
            "--sdist", "--wheel", "--out-dir", str(release.dist))  # fmt: skip
    except BaseException:
        for path, text in originals.items():
            path.write_text(text, encoding="utf-8")
        raise
    if release.edits:
        changed = [str(p.relative_to(repo)) for p in release.edits]
        _git(repo, "add", "--", *changed)
        _git(repo, "commit", "--quiet", "-m", f"Release {release.package} {release.version}")
    if tag:
        tag_release(repo, release)
    return sorted(p for p in release.dist.iterdir() if p.name.endswith((".whl", ".tar.gz")))


def tag_release(repo: Path, release: Plan) -> None:
    _git(repo, "tag", "-a", release.tag, "-m", f"{release.package} {release.version}")


def locked_closure(repo: Path, package: str) -> list[tuple[str, str]]:
    """``(name, version)`` of every distribution ``uv.lock`` pins beneath ``package``: its
    runtime dependencies, theirs, and so on (workspace members included, at their own version;
    markers are not evaluated, so a platform's alternative is listed too)."""
    lock = tomllib.loads((repo / "uv.lock").read_text(encoding="utf-8"))
    by_name: dict[str, list[dict[str, object]]] = {}
    for entry in lock.get("package", []):
        by_name.setdefault(str(entry["name"]), []).append(entry)
    if package not in by_name:
        raise ReleaseError(f"uv.lock has no package {package}; run `uv lock`")
    seen: dict[tuple[str, str], None] = {}
    pending = [(package, None)]
    while pending:
        name, version = pending.pop()
        candidates = [e for e in by_name.get(name, []) if version in (None, e.get("version"))]
        for entry in candidates:
            key = (str(entry["name"]), str(entry["version"]))
            if key in seen:
                continue
            seen[key] = None
            for dependency in entry.get("dependencies", []):  # type: ignore[attr-defined]
                pending.append((str(dependency["name"]), dependency.get("version")))
    return [key for key in seen if key[0] != package]


def _uv(repo: Path, uv: str, *argv: str) -> None:
    result = subprocess.run([uv, *argv], check=False, cwd=repo, capture_output=True, text=True)
    if result.returncode != 0:
        raise ReleaseError(
            f"uv {argv[0]} failed (exit {result.returncode}); nothing was committed or tagged:\n"
            f"{result.stderr.strip()}"
        )


def first_tags(repo: Path) -> dict[str, str]:
    """``<package>-v<version>`` -> the package, for every distribution at its current version.

    A refusal when the tree is dirty, when any of those tags exists, or when a package's
    changelog has no entry for the version being tagged.
    """
    if _git(repo, "status", "--porcelain", "--untracked-files=no").strip():
        raise ReleaseError("the work tree has uncommitted changes; commit or drop them first")
    tags: dict[str, str] = {}
    missing = []
    for package, root in packages(repo).items():
        version = current_version(root)
        changelog = root / "CHANGELOG.md"
        text = changelog.read_text(encoding="utf-8") if changelog.is_file() else ""
        if not re.search(rf"(?m)^## \[{re.escape(version)}\]", text):
            missing.append(f"{root.relative_to(repo)}/CHANGELOG.md has no `## [{version}]`")
        tags[f"{package}-v{version}"] = package
    if missing:
        raise ReleaseError(f"{'; '.join(missing)}: describe each first release, then tag")
    existing = sorted(t for t in tags if _git(repo, "tag", "--list", t).strip())
    if existing:
        raise ReleaseError(
            f"the tag{'s' if len(existing) > 1 else ''} {', '.join(existing)} exist"
            f"{'' if len(existing) > 1 else 's'} already; the first release was tagged, so "
            "release each package on with `scripts/release PACKAGE VERSION`"
        )
    return tags


def tag_first(repo: Path, *, dry_run: bool = False) -> list[str]:
    """Tag HEAD as the first release of every package (see the module docstring)."""
    tags = first_tags(repo)
    if not dry_run:
        for tag, package in tags.items():
            version = tag.removeprefix(f"{package}-v")
            _git(repo, "tag", "-a", tag, "-m", f"{package} {version}, the first release")
    return list(tags)


def _tag_first_main(argv: Sequence[str], repo: Path) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/release tag-first",
        description="Tag HEAD as the first release of every package: <package>-v<version>.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the tags, create none")
    args = parser.parse_args(argv)
    try:
        tags = tag_first(repo, dry_run=args.dry_run)
    except ReleaseError as error:
        sys.stderr.write(f"release: {error}\n")
        return 1
    head = _git(repo, "rev-parse", "--short", "HEAD").strip()
    for tag in tags:
        sys.stdout.write(f"release: {'would tag' if args.dry_run else 'tagged'} {tag} at {head}\n")
    return 0


ARTIFACT_COMMANDS: Final = ("artifacts", "bundle")
"""``scripts/release artifacts|bundle …``: the images and the chart (``artifacts.py``)."""
PYTHON_COMMANDS: Final = ("wheels",)
"""``scripts/release wheels …``: every package on a Python package index (``wheels.py``)."""

COMMANDS: Final = {
    "tag-first": "tag HEAD as the first release of every package: <package>-v<version>",
    "artifacts": "publish the images and the chart to an OCI registry, signed and verified",
    "bundle": "write the air-gap tarball of a release that `artifacts` published",
    "wheels": "build, check and publish every package's sdist and wheel to a Python index",
}
"""Every command besides releasing one package, with the line ``--help`` shows for it."""
SUBCOMMANDS_HELP: Final = "commands (each takes --help):\n" + "".join(
    f"  {name:<11} {summary}\n" for name, summary in COMMANDS.items()
)


def _version_text(repo: Path) -> str:
    """``scripts/release <the workspace's version>``, or ``unknown`` when it has none."""
    try:
        return f"scripts/release {current_version(repo)}"
    except (OSError, ReleaseError):
        return "scripts/release unknown"


def main(argv: Sequence[str] | None = None, repo: Path = REPO) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in ARTIFACT_COMMANDS:
        from .artifacts import main as artifacts_main

        return artifacts_main(argv)
    if argv[:1] and argv[0] in PYTHON_COMMANDS:
        from .wheels import main as wheels_main

        return wheels_main(argv[1:], repo)
    if argv[:1] == ["tag-first"]:
        return _tag_first_main(argv[1:], repo)
    parser = argparse.ArgumentParser(
        prog="scripts/release",
        usage=f"%(prog)s PACKAGE VERSION [options]\n       %(prog)s {{{','.join(COMMANDS)}}} ...",
        description="Release one package: bump its version, check its changelog, build its\n"
        "sdist and wheel, tag <package>-v<version>.",
        epilog=SUBCOMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version_text(repo))
    parser.add_argument("package", help="the distribution name, e.g. dynconf-store-redis")
    parser.add_argument("version", help="the version to release, e.g. 0.1.1")
    parser.add_argument("--dry-run", action="store_true", help="print the steps, take none")
    parser.add_argument("--registry", help="also publish, signed, to this OCI registry "
                        "(host:port[/path]): the package, the images, the chart")  # fmt: skip
    parser.add_argument("--key", type=Path, help="the cosign private key (with --registry)")
    parser.add_argument("--public-key", type=Path, help="default: the key's .pub twin")
    parser.add_argument("--images", type=Path, help="the built image archives "
                        "(default: <run>/images, as `scripts/release artifacts`)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=REPO / "dist" / "artifacts",
                        help="where release.json and the SBOMs go (with --registry)")  # fmt: skip
    parser.add_argument("--index-url", help="also publish the sdist and wheel to this Python "
                        "index's upload URL (as `scripts/release wheels`)")  # fmt: skip
    parser.add_argument("--check-url", help="that index's simple API (with --index-url)")
    parser.add_argument(
        "--date",
        default=datetime.datetime.now(datetime.UTC).date().isoformat(),
        help="the date of a changelog entry moved from Unreleased (default: today, UTC)",
    )
    args = parser.parse_args(argv)
    if (args.registry is None) != (args.key is None):
        parser.error("--registry and --key go together: the published release is signed")
    if (args.index_url is None) != (args.check_url is None):
        parser.error("--index-url and --check-url go together: the check is what makes "
                     "publishing again safe")  # fmt: skip
    from .artifacts import ArtifactError

    try:
        release = plan(repo, args.package, args.version, date=args.date)
        if args.registry is not None:
            release.notes.insert(-1, f"publish {args.package} {args.version}, the images and the "
                                 f"chart to {args.registry}, signed")  # fmt: skip
        if args.index_url is not None:
            from . import wheels

            wheels.credentials(os.environ)
            release.notes.insert(-1, f"check the metadata of {args.package} {args.version}'s "
                                 f"files and publish them to {args.index_url}")  # fmt: skip
        prefix = "would " if args.dry_run else ""
        for note in release.notes:
            sys.stdout.write(f"release: {prefix}{note}\n")
        if args.dry_run:
            return 0
        publishes = args.registry is not None or args.index_url is not None
        artifacts = execute(repo, release, find_uv(), tag=not publishes)
        for artifact in artifacts:
            sys.stdout.write(f"release: built {artifact.relative_to(repo)}\n")
        if args.index_url is not None:
            from . import wheels

            wheels.check(repo, [args.package], artifacts)
            for line in wheels.publish(find_uv(), artifacts, args.index_url, args.check_url,
                                       os.environ):  # fmt: skip
                sys.stdout.write(f"release: {line}\n")
        if args.registry is not None:
            _publish(repo, release, artifacts, args)
        if publishes:
            tag_release(repo, release)
    except (ReleaseError, ArtifactError) as error:
        sys.stderr.write(f"release: {error}\n")
        return 1
    sys.stdout.write(f"release: tagged {release.tag}\n")
    return 0


def _publish(repo: Path, release: Plan, files: list[Path], args: argparse.Namespace) -> None:
    """The package, then the images and the chart, into ``args.registry``, signed and verified."""
    import tempfile

    from testenv_lib import sbom

    from . import artifacts

    def say(line: str) -> None:
        sys.stdout.write(f"release: {line}\n")
        sys.stdout.flush()

    public_key = args.public_key or artifacts.public_key_of(args.key)
    document = sbom.package_sbom(
        release.package, release.version,
        [(f.name, artifacts.file_sha256(f)) for f in files],
        locked_closure(repo, release.package),
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    bom = args.out / f"{release.package}.cdx.json"
    bom.write_bytes(sbom.dumps(document))
    with tempfile.TemporaryDirectory(prefix="release-home-") as home:
        tools = artifacts.Tools.find(Path(home))
        reference = artifacts.publish_package(
            tools, args.registry, key=args.key, public_key=public_key,
            repository=f"packages/{release.package}", tag=release.version, files=files, sbom=bom,
        )  # fmt: skip
        say(f"published {reference} ({', '.join(f.name for f in files)}; signed, SBOM attested "
            f"with {len(document['components'])} locked packages beneath it)")  # fmt: skip
        artifacts.publish(tools, args.registry, key=args.key, public_key=public_key,
                          images_dir=args.images or artifacts.default_images(), out=args.out,
                          log=say)  # fmt: skip
