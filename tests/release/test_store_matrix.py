"""Each store, and dynconf-k8s, installed ALONE against the oldest and the newest core its range
allows, from built wheels, offline, into a fresh virtualenv.

The wheels are those ``uv build`` makes of every package; two more cores are built from a copy of
``packages/dynconf-core`` with a bumped version: the next patch, inside every declared range,
and the next minor, outside it. The oldest leg pins the range's lower bound; the newest leg lets
the resolver choose, so it must take the patch and leave the minor. Third-party dependencies come
from uv's cache at the versions ``uv.lock`` pins. The smoke in each venv: ``dynconf plugins
check`` loads the plugin, its source module (and so its client library) imports, and for the
stores whose servers are cheap (redis, etcd, consul) ``dynconf render`` fetches a document from
the real server.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.uv import Uv

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from release_lib import set_version  # noqa: E402

pytestmark = [pytest.mark.slow]

SMOKE = """
import importlib, importlib.metadata as metadata, json, sys
from dynconf.plugins import discover
registry = discover()
for module in sys.argv[1:]:
    importlib.import_module(module)
print(json.dumps({
    "core": metadata.version("dynconf-core"),
    "stores": sorted(registry.stores),
    "refused": [refusal.reason for refusal in registry.refused],
    "ours": sorted(
        {d.metadata["Name"] for d in metadata.distributions()
         if d.metadata["Name"].startswith("dynconf")}
    ),
}))
"""


@dataclass(frozen=True)
class Package:
    """A distribution that depends on dynconf-core, as its pyproject declares it."""

    name: str
    core_range: str
    """The ``dynconf-core`` specifier of its dependencies, e.g. ``>=0.1,<0.2``."""
    entry_point: str | None
    """Its ``dynconf`` entry point (None: not a plugin)."""
    modules: tuple[str, ...]
    """What the smoke imports: the plugin's source module, or the package's programs."""

    @property
    def wheel_stem(self) -> str:
        return self.name.replace("-", "_")


def _packages() -> list[Package]:
    found = []
    for pyproject in sorted((REPO / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        if project["name"] == "dynconf-core":
            continue
        core = next(d for d in project["dependencies"] if d.startswith("dynconf-core"))
        entry = next(iter(project.get("entry-points", {}).get("dynconf", {}).items()), None)
        if entry is None:
            found.append(Package(project["name"], core.removeprefix("dynconf-core"), None,
                                 ("dynconf_k8s.agent.main", "dynconf_k8s.webhook.main")))  # fmt: skip
            continue
        name, value = entry
        package = value.split(".")[0]
        found.append(Package(project["name"], core.removeprefix("dynconf-core"), name,
                             (value, f"{package}.source")))  # fmt: skip
    return found


PACKAGES = _packages()


def _bound(spec: str, op: str) -> str:
    match = re.search(rf"{re.escape(op)}\s*([\d.]+)", spec)
    assert match, f"dynconf-core{spec} has no {op} bound: a range must be closed"
    return match[1]


def _release_of(bound: str) -> str:
    parts = [*bound.split("."), "0", "0"][:3]
    return ".".join(parts)


def _run(*argv: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@dataclass(frozen=True)
class Wheels:
    here: Path
    """Every package's wheel, as the tree builds it."""
    cores: Path
    """The bumped cores: the next patch (in range) and the next minor (out of range)."""
    constraints: Path
    oldest: str
    newest: str
    outside: str
    seconds: float


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory, uv_bin: Uv) -> Wheels:
    started = time.monotonic()
    prefix = tmp_path_factory.mktemp("matrix")
    uv = str(uv_bin.path)
    here, cores = prefix / "wheels", prefix / "cores"
    constraints = prefix / "constraints.txt"
    _run(uv, "export", "--quiet", "--frozen", "--no-dev", "--no-emit-workspace", "--no-hashes",
         "--all-packages", "--all-extras", "--output-file", str(constraints))  # fmt: skip
    uv_bin.fetch(constraints, *BUILD_REQUIRES)
    _run(uv, "build", "--all-packages", "--wheel", "--offline", "--no-build-logs", "--quiet",
         "--out-dir", str(here))  # fmt: skip
    core_version = tomllib.loads((REPO / "packages/dynconf-core/pyproject.toml").read_text())[
        "project"
    ]["version"]
    ranges = {p.core_range for p in PACKAGES}
    oldest = max(_release_of(_bound(r, ">=")) for r in ranges)
    assert oldest == core_version, (
        f"the ranges start at {oldest} but the tree's core is {core_version}: every package's "
        "range must allow the core it is built with"
    )
    major, minor, patch = (int(x) for x in core_version.split("."))
    newest, outside = f"{major}.{minor}.{patch + 1}", f"{major}.{minor + 1}.0"
    for version in (newest, outside):
        copy = prefix / f"core-{version}"
        shutil.copytree(REPO / "packages" / "dynconf-core", copy,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))  # fmt: skip
        for path, text in set_version(copy, version).items():
            path.write_text(text)
        _run(uv, "build", "--wheel", "--offline", "--no-build-logs", "--quiet",
             "--out-dir", str(cores), str(copy))  # fmt: skip
    return Wheels(here, cores, constraints, oldest, newest, outside, time.monotonic() - started)


BUILD_REQUIRES = sorted(
    {
        requirement
        for pyproject in (REPO / "packages").glob("*/pyproject.toml")
        for requirement in tomllib.loads(pyproject.read_text())["build-system"]["requires"]
    }
)
"""The build backends the wheels need, resolved offline like everything else here."""

BOUNDS = ("oldest", "newest")
WORKERS = 4
"""Legs prepared at once: each is mostly waiting on uv and on interpreters starting."""


@dataclass
class Leg:
    """One package in one fresh venv at one end of its core range, and what the smoke saw."""

    package: Package
    bound: str
    venv: Path
    installed: dict[str, Any] = field(default_factory=dict)
    checked: subprocess.CompletedProcess[str] | None = None
    failure: str | None = None
    seconds: float = 0.0

    @property
    def bin(self) -> Path:
        return self.venv / "bin"


def _env(uv_bin: Uv) -> dict[str, str]:
    env = {k: v for k, v in uv_bin.env().items() if not k.startswith(("DYNCONF_", "DYNAMIC_"))}
    env.pop("VIRTUAL_ENV", None)
    return env


def _prepare(leg: Leg, wheels: Wheels, uv: str, env: dict[str, str]) -> Leg:
    """venv, install from the wheels offline, smoke; a failure is kept for the leg's test."""
    started = time.monotonic()
    python = str(leg.bin / "python")
    try:
        _run(uv, "venv", "--quiet", "--python", sys.executable, str(leg.venv), env=env)
        (wheel,) = wheels.here.glob(f"{leg.package.wheel_stem}-*.whl")
        version = wheel.name.split("-")[1]
        core = [f"dynconf-core=={wheels.oldest}"] if leg.bound == "oldest" else []
        _run(uv, "pip", "install", "--quiet", "--offline", "--python", python,
             "--find-links", str(wheels.here), "--find-links", str(wheels.cores),
             "--constraint", str(wheels.constraints), f"{leg.package.name}=={version}", *core,
             env=env)  # fmt: skip
        leg.installed = json.loads(_run(python, "-c", SMOKE, *leg.package.modules, env=env))
        leg.checked = subprocess.run([str(leg.bin / "dynconf"), "plugins", "check"],
                                     capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    except (AssertionError, subprocess.TimeoutExpired, ValueError) as error:
        leg.failure = str(error)
    leg.seconds = time.monotonic() - started
    return leg


@pytest.fixture(scope="module")
def legs(
    wheels: Wheels, uv_bin: Uv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Leg]]:
    """Every leg, prepared WORKERS at a time; the pool is joined before any test runs."""
    started = time.monotonic()
    root = tmp_path_factory.mktemp("legs")
    todo = [Leg(p, b, root / f"{p.name}-{b}") for p in PACKAGES for b in BOUNDS]
    env = _env(uv_bin)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = list(pool.map(lambda leg: _prepare(leg, wheels, str(uv_bin.path), env), todo))
    prepared = time.monotonic() - started
    yield {f"{leg.package.name}-{leg.bound}": leg for leg in done}
    sys.stdout.write(
        f"\nstore matrix: wheels {wheels.seconds:.1f}s, {len(done)} legs {prepared:.1f}s "
        f"({WORKERS} at a time; {sum(leg.seconds for leg in done):.1f}s of leg time), "
        f"total {wheels.seconds + prepared:.1f}s\n"
    )


def _seed(package: Package, request: pytest.FixtureRequest) -> tuple[str, str, str] | None:
    """A document on the real server for the cheap stores: (endpoint, key, expected text)."""
    key = f"matrix/{package.name}.json"
    if package.entry_point == "redis":
        server = request.getfixturevalue("redis_server")
        server.client.set(key, '{"leg": "redis"}')
        return server.url, key, 'leg = "redis"'
    if package.entry_point == "etcd":
        server = request.getfixturevalue("etcd_server")
        server.client.put(key, '{"leg": "etcd"}')
        return server.url, key, 'leg = "etcd"'
    if package.entry_point == "consul":
        server = request.getfixturevalue("consul_server")
        server.client.kv.put(key, '{"leg": "consul"}')
        return server.url, key, 'leg = "consul"'
    return None


@pytest.mark.parametrize("bound", BOUNDS)
@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_the_package_alone_works_with_each_end_of_its_core_range(
    package: Package,
    bound: str,
    wheels: Wheels,
    legs: dict[str, Leg],
    uv_bin: Uv,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    leg = legs[f"{package.name}-{bound}"]
    assert leg.failure is None, leg.failure
    expected = wheels.oldest if bound == "oldest" else wheels.newest
    assert leg.installed["core"] == expected  # the newest leg: the resolver left the minor out
    assert leg.installed["refused"] == []
    assert leg.installed["ours"] == sorted({"dynconf-core", package.name}), (
        "another package of ours came along"
    )
    assert leg.checked is not None
    assert leg.checked.returncode == 0, leg.checked.stderr
    plugins = ["builtin", *([package.entry_point] if package.entry_point else [])]
    assert leg.checked.stdout.startswith(f"{len(plugins)} plugins load: {', '.join(plugins)} ")

    seeded = _seed(package, request)
    if seeded is not None:
        endpoint, key, expected_text = seeded
        out = tmp_path / "rendered.toml"
        assert package.entry_point is not None
        _run(str(leg.bin / "dynconf"), "render", "--source", package.entry_point,
             "--endpoint", endpoint, "--key", key, "--out", str(out), env=_env(uv_bin))  # fmt: skip
        assert out.read_text().strip() == expected_text
