"""The SBOM a package's release attests: its files, and every distribution ``uv.lock`` pins
beneath it (its runtime closure, not the workspace's dev tools)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from release_lib import locked_closure  # noqa: E402
from testenv_lib.sbom import package_sbom  # noqa: E402


def _locked() -> dict[str, dict[str, object]]:
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    return {str(p["name"]): p for p in lock["package"]}


def test_a_stores_closure_holds_its_client_the_core_and_the_cores_own_dependencies() -> None:
    closure = dict(locked_closure(REPO, "dynconf-store-redis"))
    locked = _locked()
    assert closure["redis"] == locked["redis"]["version"]
    assert closure["dynconf-core"] == locked["dynconf-core"]["version"]
    for dependency in locked["dynconf-core"]["dependencies"]:  # type: ignore[attr-defined]
        assert dependency["name"] in closure, dependency
    assert "dynconf-store-redis" not in closure
    assert "pytest" not in closure and "boto3" not in closure  # dev tools, another store's client


def test_the_document_names_the_package_its_files_and_each_locked_distribution() -> None:
    document = package_sbom(
        "dynconf-store-redis", "0.1.1",
        [("dynconf_store_redis-0.1.1-py3-none-any.whl", "ab" * 32)],
        [("redis", "6.4.0"), ("Dynconf_Core", "0.1.0")],
    )  # fmt: skip
    subject = document["metadata"]["component"]
    assert subject["purl"] == "pkg:pypi/dynconf-store-redis@0.1.1"
    assert subject["hashes"] == [{"alg": "SHA-256", "content": "ab" * 32}]
    assert [c["purl"] for c in document["components"]] == [
        "pkg:pypi/dynconf-core@0.1.0",
        "pkg:pypi/redis@6.4.0",
    ]
    assert document["dependencies"][0]["dependsOn"] == [
        "pkg:pypi/dynconf-core@0.1.0",
        "pkg:pypi/redis@6.4.0",
    ]
