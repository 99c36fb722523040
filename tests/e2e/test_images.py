"""The images built here (``scripts/testenv install images``) are the images the Dockerfiles
describe: same user, entrypoint, command, environment and plugin lock, and they run.

The Dockerfiles stay the spec users build with docker; there is no Docker engine here, so the
builder (``scripts/testenv_lib/images.py``) follows them from Debian packages and the locked
wheels.  This test reads each Dockerfile on its own (not through the builder's parser) and
compares with the archive's image config and files.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.kube import REPO
from tests.fixtures.node import ProjectImage

sys.path.insert(0, str(REPO / "scripts"))
from testenv_lib.images import BASE_ENV
from testenv_lib.oci import read_config, read_file, unpack_layer

pytestmark = pytest.mark.e2e

IMAGES = ("agent", "webhook", "operator", "node-agent")


def final_stage(name: str) -> dict[str, Any]:
    """USER, ENTRYPOINT, CMD and ENV of the Dockerfile's last stage, ``$PATH`` over the base."""
    text = (REPO / "docker" / f"Dockerfile.{name}").read_text().replace("\\\n", " ")
    last = text.rsplit("\nFROM ", 1)[1]
    env = dict(BASE_ENV)
    out: dict[str, Any] = {"User": None, "Entrypoint": None, "Cmd": None}
    for line in last.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "USER":
            out["User"] = rest.strip()
        elif word in ("ENTRYPOINT", "CMD"):
            out[word.title()] = json.loads(rest)
        elif word == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", rest):
                env[key] = value.replace("$PATH", env["PATH"])
    out["Env"] = sorted(f"{k}={v}" for k, v in env.items())
    return out


@pytest.mark.parametrize("name", IMAGES)
def test_image_config_matches_the_dockerfile(name: str, project_image: ProjectImage) -> None:
    image = project_image(name)
    config = read_config(image.archive)

    got = {
        "User": config.get("User"),
        "Entrypoint": config.get("Entrypoint"),
        "Cmd": config.get("Cmd"),
        "Env": sorted(config.get("Env", [])),
    }

    assert got == final_stage(name)


@pytest.mark.parametrize("name", IMAGES)
def test_image_carries_the_plugin_lock_of_the_workspace(
    name: str, project_image: ProjectImage, tmp_path: Path
) -> None:
    image = project_image(name)
    lock_env = next(e for e in read_config(image.archive)["Env"] if e.startswith("DYNCONF_PLUGIN"))
    in_image = read_file(image.archive, lock_env.split("=", 1)[1])
    workspace = tmp_path / "plugins.lock"
    subprocess.run(
        [str(Path(sys.executable).parent / "dynconf"), "plugins", "lock", "--output", str(workspace)],
        check=True, capture_output=True, cwd=REPO,
    )  # fmt: skip

    assert json.loads(in_image) == json.loads(workspace.read_text())


@pytest.mark.parametrize("name", IMAGES)
def test_image_entrypoint_and_interpreter_are_in_the_archive(
    name: str, project_image: ProjectImage
) -> None:
    image = project_image(name)
    entrypoint = read_config(image.archive)["Entrypoint"][0]

    script = read_file(image.archive, entrypoint)

    assert script.startswith(b"#!/opt/dynamic-config/venv/bin/python")


IMPORT_EVERY_EXTENSION = """
import importlib, pathlib, sys
site = next(p for p in sys.path if p.endswith("site-packages"))
failed = []
for so in sorted(pathlib.Path(site).rglob("*.so")):
    parts = so.relative_to(site).with_suffix("").parts
    name = ".".join((*parts[:-1], parts[-1].split(".")[0]))
    try:
        importlib.import_module(name)
    except ImportError as error:
        if "libstdc" in str(error) or "cannot open shared object" in str(error):
            failed.append(f"{name}: {error}")
print("\\n".join(failed))
"""


@pytest.mark.parametrize("name", IMAGES)
def test_every_native_module_of_the_image_finds_its_shared_libraries(
    name: str, project_image: ProjectImage, tmp_path: Path
) -> None:
    """Each compiled extension in the venv loads in the image's own root (chroot)."""
    image = project_image(name)
    root = tmp_path / "root"
    unpack_layer(image.archive, root)

    result = subprocess.run(
        [shutil.which("chroot", path="/usr/sbin:/usr/bin:/sbin:/bin") or "chroot", str(root), "/opt/dynamic-config/venv/bin/python", "-c", IMPORT_EVERY_EXTENSION],
        capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == ""


def layer_names(archive: Path) -> set[str]:
    """Every path in the (single) layer of the image in ``archive``."""
    import tarfile

    with tarfile.open(archive) as tar:
        index = tar.extractfile("index.json")
        assert index is not None
        manifest = tar.extractfile(
            "blobs/sha256/" + json.load(index)["manifests"][0]["digest"].split(":", 1)[1]
        )
        assert manifest is not None
        layer = json.load(manifest)["layers"][0]["digest"].split(":", 1)[1]
        blob = tar.extractfile(f"blobs/sha256/{layer}")
        assert blob is not None
        with tarfile.open(fileobj=blob, mode="r|") as inner:
            return {member.name for member in inner}


def test_agent_image_has_the_slim_base_parts_the_stores_load(project_image: ProjectImage) -> None:
    """Found by leg 2: without ``/bin/sh`` git cannot run its ssh command ("unable to fork")
    and without libstdc++ grpc (the firestore client) does not import; ``python:3.11-slim``
    has both, so an image built here must too."""
    names = layer_names(project_image("agent").archive)

    assert {"usr/bin/sh", "usr/lib/x86_64-linux-gnu/libstdc++.so.6", "etc/services"} <= names


@pytest.mark.parametrize("name", ["agent", "operator"])
def test_image_user_is_listed_in_passwd(name: str, project_image: ProjectImage) -> None:
    """Found by leg 2: ssh exits "No user exists for uid 65532" for a user /etc/passwd lacks,
    so git over ssh failed in every agent; the images that run git list their user."""
    uid = str(final_stage(name)["User"]).split(":")[0]

    passwd = read_file(project_image(name).archive, "/etc/passwd").decode()

    assert uid in {line.split(":")[2] for line in passwd.splitlines() if line.count(":") >= 6}
