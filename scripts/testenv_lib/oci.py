"""OCI image archives from a root filesystem directory, with no registry and no daemon.

One layer, written deterministically (every mtime 0, every owner root, entries sorted), as an
``oci-layout`` tar that ``ctr images import`` loads; the image name is stored as both
``io.containerd.image.name`` and ``org.opencontainers.image.ref.name``.  The layer is left
uncompressed: the archive only ever travels from this disk into the node's containerd, and gzip
would cost the shared cores a minute for the larger images.

Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
"""OCI 1.1's empty descriptor: the config of an artifact that has none (the blob is ``{}``)."""


@dataclass(frozen=True)
class Artifact:
    """A blob that describes the image (an SBOM, a signature), stored as an OCI 1.1 artifact.

    It gets a manifest of its own whose ``subject`` is the image manifest, listed in
    ``index.json`` after the image (no name, no platform), the way an OCI layout carries
    referrers where there is no registry to ask.
    """

    artifact_type: str
    data: bytes


@dataclass(frozen=True)
class ImageConfig:
    """The runtime part of an OCI image config (what a Dockerfile's final stage sets)."""

    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    user: str = ""
    env: list[str] = field(default_factory=lambda: [DEFAULT_PATH])
    workdir: str = ""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"Env": list(self.env)}
        if self.entrypoint is not None:
            out["Entrypoint"] = list(self.entrypoint)
        if self.cmd is not None:
            out["Cmd"] = list(self.cmd)
        if self.user:
            out["User"] = self.user
        if self.workdir:
            out["WorkingDir"] = self.workdir
        return out


class _Hashing(io.RawIOBase):
    """A write-only file that hashes and counts what passes through to ``out``."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.out.write(view)
        self.sha.update(view)
        self.size += len(view)
        return len(view)


def _layer(rootfs: Path, out: IO[bytes]) -> tuple[str, int]:
    """Write ``rootfs`` as a tar to ``out``; returns (sha256 digest, size)."""
    sink = _Hashing(out)
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in dirnames + sorted(filenames):
                full = os.path.join(dirpath, name)
                info = tar.gettarinfo(full, arcname=os.path.relpath(full, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    with open(full, "rb") as handle:
                        tar.addfile(info, handle)
                else:
                    tar.addfile(info)
    return "sha256:" + sink.sha.hexdigest(), sink.size


def write_archive(
    rootfs: Path,
    out: Path,
    name: str,
    config: ImageConfig,
    artifacts: Callable[[str], list[Artifact]] | None = None,
) -> str:
    """Write ``rootfs`` as the one-layer image ``name`` to ``out``; returns the manifest digest.

    ``artifacts``, given that digest, returns what to attach to the image (its SBOM).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layer_path = Path(tmp) / "layer.tar"
        with layer_path.open("wb") as out_handle:
            layer_digest, layer_size = _layer(rootfs, out_handle)
        blobs: dict[str, bytes] = {}

        def put(data: bytes) -> str:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            blobs[digest] = data
            return digest

        image_config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": config.as_json(),
                "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
                "history": [{"created_by": "scripts/testenv_lib/oci.py"}],
            },
            sort_keys=True,
        ).encode()
        config_digest = put(image_config)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": config_digest,
                    "size": len(image_config),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": layer_digest,
                        "size": layer_size,
                    }
                ],
            },
            sort_keys=True,
        ).encode()
        manifest_digest = put(manifest)
        referrers = [
            _artifact_manifest(artifact, put, manifest_digest, len(manifest))
            for artifact in (artifacts(manifest_digest) if artifacts else [])
        ]
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": MANIFEST,
                    "digest": manifest_digest,
                    "size": len(manifest),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name,
                    },
                },
                *referrers,
            ],
        }
        partial = out.with_suffix(".partial")
        with tarfile.open(partial, "w") as archive:

            def add(path: str, data: bytes) -> None:
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(data))

            add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
            add("index.json", json.dumps(index, sort_keys=True).encode())
            for digest, data in blobs.items():
                add("blobs/sha256/" + digest.split(":", 1)[1], data)
            info = tarfile.TarInfo("blobs/sha256/" + layer_digest.split(":", 1)[1])
            info.size = layer_size
            info.mode = 0o644
            with layer_path.open("rb") as handle:
                archive.addfile(info, handle)
        partial.rename(out)
    return manifest_digest


def _artifact_manifest(
    artifact: Artifact, put: Callable[[bytes], str], subject: str, subject_size: int
) -> dict[str, Any]:
    """Store ``artifact`` and its manifest (``subject``: the image); its ``index.json`` entry."""
    blob = {"mediaType": artifact.artifact_type, "digest": put(artifact.data),
            "size": len(artifact.data)}  # fmt: skip
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "artifactType": artifact.artifact_type,
            "config": {"mediaType": EMPTY, "digest": put(b"{}"), "size": 2},
            "layers": [blob],
            "subject": {"mediaType": MANIFEST, "digest": subject, "size": subject_size},
        },
        sort_keys=True,
    ).encode()
    return {
        "mediaType": MANIFEST,
        "digest": put(manifest),
        "size": len(manifest),
        "artifactType": artifact.artifact_type,
    }


def read_artifact(archive: Path, artifact_type: str) -> bytes:
    """The blob of the artifact of ``artifact_type`` whose subject is the archive's image."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> bytes:
            path = "blobs/sha256/" + digest.split(":", 1)[1] if ":" in digest else digest
            member = tar.extractfile(path)
            assert member is not None
            return member.read()

        index = json.loads(blob("index.json"))
        image = index["manifests"][0]["digest"]
        for entry in index["manifests"][1:]:
            manifest = json.loads(blob(entry["digest"]))
            if manifest.get("artifactType") == artifact_type and (
                manifest.get("subject", {}).get("digest") == image
            ):
                return blob(manifest["layers"][0]["digest"])
    raise FileNotFoundError(f"no {artifact_type} artifact refers to the image in {archive}")


def read_config(archive: Path) -> dict[str, Any]:
    """The ``config`` section of the image in ``archive`` (for tests and reports)."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> Any:
            member = tar.extractfile("blobs/sha256/" + digest.split(":", 1)[1])
            assert member is not None
            return json.load(member)

        index_file = tar.extractfile("index.json")
        assert index_file is not None
        manifest = blob(json.load(index_file)["manifests"][0]["digest"])
        config: dict[str, Any] = blob(manifest["config"]["digest"])["config"]
        return config


@contextlib.contextmanager
def _layer_members(archive: Path) -> Iterator[tarfile.TarFile]:
    """The (single) layer of the image in ``archive``, open as a streaming tar."""
    with tarfile.open(archive) as tar:
        index_file = tar.extractfile("index.json")
        assert index_file is not None
        manifest_member = tar.extractfile(
            "blobs/sha256/" + json.load(index_file)["manifests"][0]["digest"].split(":", 1)[1]
        )
        assert manifest_member is not None
        layer_digest = json.load(manifest_member)["layers"][0]["digest"]
        layer = tar.extractfile("blobs/sha256/" + layer_digest.split(":", 1)[1])
        assert layer is not None
        with tarfile.open(fileobj=layer, mode="r|") as inner:
            yield inner


def read_file(archive: Path, path: str) -> bytes:
    """One file's bytes from the (single) layer of the image in ``archive``."""
    with _layer_members(archive) as inner:
        for member in inner:
            if member.name == path.lstrip("/"):
                data = inner.extractfile(member)
                assert data is not None
                return data.read()
    raise FileNotFoundError(f"{path} not in {archive}")


def unpack_layer(archive: Path, dest: Path) -> None:
    """Extract the image's layer into ``dest``: a root a test can ``chroot`` into."""
    with _layer_members(archive) as inner:
        inner.extractall(dest, filter="tar")


def copy_tree(src: Path, dst: Path) -> None:
    """Merge ``src`` into ``dst`` keeping symlinks (the layout Debian packages extract to)."""
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
