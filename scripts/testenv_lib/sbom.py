"""CycloneDX 1.5 SBOMs: of one built image (every Python distribution and Debian package in it),
and of one released package (its wheel and sdist, and what ``uv.lock`` pins beneath it).

The image builder (``images.py``) knows exactly what went in, so the SBOM is written from
that knowledge rather than by scanning the finished layer:

- the Python distributions are the ``*.dist-info`` directories of the image's venv (what
  ``docker/agent-install.sh`` installed from ``uv.lock`` plus the workspace members), each as
  ``pkg:pypi/<normalised name>@<version>``;
- the Debian packages are the ``.deb`` files the builder unpacked, as ``apt_download``
  recorded them (``.debs.json``: package, version, architecture, the file's SHA-256), each as
  ``pkg:deb/debian/<name>@<version>?arch=<arch>&distro=debian-12``.

The document names the image by its manifest digest, so it can sit beside the OCI archive and
also travel inside the layout as an artifact whose ``subject`` is that manifest.  Standard
library only: the format is a small JSON document and the builder must not need the network.
"""

from __future__ import annotations

import email.parser
import json
import re
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

MEDIA_TYPE = "application/vnd.cyclonedx+json"
SPEC_VERSION = "1.5"
DISTRO = "debian-12"
"""The images' base is bookworm (``images.BASES``)."""


def normalise(name: str) -> str:
    """A distribution name as PEP 503 and the pypi purl type spell it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def python_distributions(site_packages: Path) -> list[tuple[str, str]]:
    """``(name, version)`` of every distribution installed in ``site_packages``."""
    found = []
    parser = email.parser.HeaderParser()
    for info in sorted(site_packages.glob("*.dist-info")):
        metadata = parser.parsestr((info / "METADATA").read_text(encoding="utf-8"))
        found.append((str(metadata["Name"]), str(metadata["Version"])))
    return found


def _pypi(name: str, version: str) -> dict[str, Any]:
    purl = f"pkg:pypi/{normalise(name)}@{urllib.parse.quote(version, safe='')}"
    return {"type": "library", "bom-ref": purl, "name": name, "version": version, "purl": purl}


def _deb(deb: dict[str, str]) -> dict[str, Any]:
    name, version, arch = deb["package"], deb["version"], deb["architecture"]
    quoted = urllib.parse.quote(version, safe="")
    purl = f"pkg:deb/debian/{name}@{quoted}?arch={arch}&distro={DISTRO}"
    component: dict[str, Any] = {
        "type": "library",
        "bom-ref": purl,
        "name": name,
        "version": version,
        "purl": purl,
        "properties": [{"name": "dynconf:deb-file", "value": deb["file"]}],
    }
    if deb.get("sha256"):
        component["hashes"] = [{"alg": "SHA-256", "content": deb["sha256"]}]
    return component


def image_sbom(
    image: str, manifest_digest: str, site_packages: Path, debs: list[dict[str, str]]
) -> dict[str, Any]:
    """The CycloneDX document of ``image`` (``name:tag``) whose manifest is ``manifest_digest``.

    The serial number is derived from the digest, so the same image always gets the same
    document (the archives are deterministic; so is their SBOM).
    """
    repository, _, tag = image.rpartition(":")
    purl = f"pkg:oci/{repository.rsplit('/', 1)[-1]}@{urllib.parse.quote(manifest_digest)}"
    purl += f"?repository_url={urllib.parse.quote(repository, safe='')}&tag={tag}"
    components = [_pypi(n, v) for n, v in python_distributions(site_packages)]
    components += [_deb(d) for d in sorted(debs, key=lambda d: d["package"])]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, purl)}",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "scripts/testenv_lib"}]},
            "component": {
                "type": "container",
                "bom-ref": purl,
                "name": repository,
                "version": tag,
                "purl": purl,
                "hashes": [{"alg": "SHA-256", "content": manifest_digest.split(":", 1)[1]}],
            },
        },
        "components": components,
        "dependencies": [
            {"ref": purl, "dependsOn": [c["bom-ref"] for c in components]},
        ],
    }


def package_sbom(
    name: str, version: str, files: list[tuple[str, str]], locked: list[tuple[str, str]]
) -> dict[str, Any]:
    """The CycloneDX document of one released distribution: ``files`` are its built artifacts
    (file name, SHA-256), ``locked`` the ``(name, version)`` of every distribution ``uv.lock``
    pins beneath it, as the release's SBOM attestation carries them."""
    subject = _pypi(name, version)
    subject["hashes"] = [{"alg": "SHA-256", "content": digest} for _file, digest in files]
    subject["properties"] = [{"name": "dynconf:file", "value": file} for file, _digest in files]
    components = [_pypi(n, v) for n, v in sorted(locked, key=lambda item: normalise(item[0]))]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, subject['purl'])}",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "scripts/release"}]},
            "component": subject,
        },
        "components": components,
        "dependencies": [
            {"ref": subject["bom-ref"], "dependsOn": [c["bom-ref"] for c in components]}
        ],
    }


def dumps(document: dict[str, Any]) -> bytes:
    """The document's bytes, stable for the same content."""
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
