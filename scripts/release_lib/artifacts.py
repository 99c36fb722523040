"""``scripts/release artifacts`` and ``scripts/release bundle``: the images and the chart, signed.

``artifacts --registry HOST:PORT --key cosign.key`` takes the four OCI archives that
``scripts/testenv install images`` built (``<run>/images/<name>.tar``, each with its CycloneDX
SBOM beside it) and, against a real OCI registry:

1. pushes each image with ``crane push --index`` as
   ``<registry>/dynconf-<name>:v<appVersion>``: an OCI image index listing the
   archive's manifest for ``linux/amd64`` (the manifest goes as it is, so its digest is the
   archive's, which the SBOM names); the index digest is what the
   chart pins, so a node of another platform would resolve its own manifest from the same
   reference once the builder makes one (docs/release.md, multi-arch). The archive's SBOM
   artifact (``subject``: that manifest) is pushed unchanged beside it by digest, an OCI 1.1
   referrer: crane updates the referrers tag (``sha256-<hex>``) where the registry has no
   referrers API (``crane registry serve`` has none), and :func:`referrers` lists it either way;
2. packages the chart with every image pinned: ``values.yaml``'s ``image`` becomes the
   registry's repository and ``digest`` the pushed digest, for the agent, the webhook, the
   operator and the node agent; ``helm package`` + ``helm push`` to ``oci://<registry>/charts``;
3. signs the four images and the chart with the key (``cosign sign --tlog-upload=false``: no
   transparency log, nothing leaves the machine);
4. attaches each SBOM as a signed in-toto attestation (``cosign attest --type cyclonedx``)
   rather than as a bare referrer (``cosign attach sbom``): the attestation is signed by the
   same key, so whoever verifies the image can also verify who vouched for its package list,
   and ``cosign save`` carries it into the air-gap bundle;
5. verifies every signature and attestation with the public key before it reports success,
   and writes ``release.json`` (every reference and digest) to ``--out``.

``bundle --release release.json --out FILE.tar`` writes the air-gap bundle of that release:
the chart's ``.tgz``, each image and the chart as an OCI layout holding its signature and
attestation (``cosign save``), the SBOMs, the public key, ``load.sh REGISTRY`` (pushes all of
it into another registry with ``cosign load`` and writes ``values-mirror.yaml`` for ``helm
install``) and ``verify.sh [REGISTRY]`` (checks every signature and attestation, in the
bundle's layouts or, given a registry, there).

The tools are the pinned ones ``scripts/testenv install crane cosign helm`` builds (or ``$CRANE``,
``$COSIGN``, ``$HELM``). A key with a passphrase takes it from ``COSIGN_PASSWORD``; the
passphrase is never printed. Standard library only, like the rest of ``scripts/release``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "IMAGES",
    "Published",
    "PushedImage",
    "Tools",
    "bundle",
    "default_images",
    "file_sha256",
    "main",
    "image_index",
    "pin_values",
    "publish",
    "publish_package",
    "referrers",
]

REPO: Final = Path(__file__).resolve().parents[2]
CHART: Final = REPO / "charts" / "dynamic-config"
IMAGES: Final = ("agent", "webhook", "operator", "node-agent")
VALUES_SECTION: Final = {
    "agent": "agent",
    "webhook": "webhook",
    "operator": "operator",
    "node-agent": "nodeAgent",
}
"""Each image's section in the chart's ``values.yaml`` (each has ``image`` and ``digest``)."""
SBOM_TYPE: Final = "cyclonedx"
SBOM_MEDIA_TYPE: Final = "application/vnd.cyclonedx+json"
"""The ``artifactType`` of each image's SBOM referrer (as ``testenv_lib/sbom.py`` writes it)."""
INDEX: Final = "application/vnd.oci.image.index.v1+json"
MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
PLATFORMS: Final = ({"architecture": "amd64", "os": "linux"},)
"""What the builder makes; an arm64 manifest would be a second entry (docs/release.md)."""
DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
TIMEOUT: Final = 900


def repository_name(name: str) -> str:
    """``dynconf-<name>``: an image's repository, below whichever registry holds the release."""
    return f"dynconf-{name}"


def image_repository(registry: str, name: str) -> str:
    return f"{registry}/{repository_name(name)}"


class ArtifactError(Exception):
    """A refusal or a failed step: one sentence with what failed and what to do."""


@dataclass(frozen=True)
class Tools:
    """The three programs a release runs, and a private home for their state."""

    crane: Path
    cosign: Path
    helm: Path
    home: Path
    """Helm's cache/config/data, cosign's TUF root and Docker config: never the user's own."""

    @classmethod
    def find(cls, home: Path) -> Tools:
        cache = Path(
            os.environ.get("DYNCONF_TESTENV_CACHE") or Path.home() / ".cache" / "dynconf-testenv"
        )
        found = {}
        for name in ("crane", "cosign", "helm"):
            candidates = [os.environ.get(name.upper()), str(cache / "bin" / name),
                          shutil.which(name)]  # fmt: skip
            path = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
            if path is None:
                raise ArtifactError(
                    f"no {name} found; run `scripts/testenv install {name}` (or set "
                    f"{name.upper()}=/path/to/{name})"
                )
            found[name] = Path(path)
        home.mkdir(parents=True, exist_ok=True)
        return cls(found["crane"], found["cosign"], found["helm"], home)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "helm" / "config"),
            "HELM_DATA_HOME": str(self.home / "helm" / "data"),
            "DOCKER_CONFIG": str(self.home / "docker"),
            "TUF_ROOT": str(self.home / "tuf"),
            "COSIGN_PASSWORD": os.environ.get("COSIGN_PASSWORD", ""),
        }

    def run(self, tool: Path, *argv: str, cwd: Path | None = None, stdout: bool = False) -> str:
        """``tool argv``: what it said (its stdout alone with ``stdout``), or an error with the
        tail of what it said."""
        try:
            result = subprocess.run(
                [str(tool), *argv], cwd=cwd, env=self.env(), capture_output=True, text=True,
                timeout=TIMEOUT, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except subprocess.TimeoutExpired as err:
            raise ArtifactError(f"{tool.name} {argv[0]} did not finish in {TIMEOUT} s") from err
        if result.returncode != 0:
            said = (result.stderr.strip() or result.stdout.strip())[-2000:]
            raise ArtifactError(f"{tool.name} {' '.join(argv[:2])} failed: {said}")
        return result.stdout if stdout else result.stdout + result.stderr


@dataclass(frozen=True)
class Published:
    """What ``artifacts`` put in the registry (written as ``release.json``)."""

    registry: str
    app_version: str
    chart_version: str
    images: dict[str, str]
    """Image name -> the digest of its image index (what the chart pins and the key signs)."""
    chart_digest: str
    chart_package: str
    """The packaged chart's file (pinned values), beside ``release.json``."""
    manifests: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    """Image name -> ``os/architecture`` -> the platform manifest's digest (the archive's)."""
    sboms: dict[str, str] = dataclasses.field(default_factory=dict)
    """Image name -> the digest of its SBOM referrer (``subject``: the amd64 manifest)."""

    def repository(self, name: str, registry: str | None = None) -> str:
        return image_repository(registry or self.registry, name)

    def image_ref(self, name: str, registry: str | None = None) -> str:
        return f"{self.repository(name, registry)}@{self.images[name]}"

    def chart_repository(self, registry: str | None = None) -> str:
        return f"{registry or self.registry}/charts/dynamic-config"

    def chart_ref(self, registry: str | None = None) -> str:
        return f"{self.chart_repository(registry)}@{self.chart_digest}"

    def refs(self, registry: str | None = None) -> list[str]:
        """Every signed reference: the four images, then the chart."""
        return [*(self.image_ref(n, registry) for n in IMAGES), self.chart_ref(registry)]

    def dump(self, path: Path) -> None:
        record = {"registry": self.registry, "appVersion": self.app_version,
                  "chart": {"version": self.chart_version, "digest": self.chart_digest,
                            "package": self.chart_package, "reference": self.chart_ref()},
                  "images": {n: {"digest": d, "reference": self.image_ref(n),
                                 "manifests": self.manifests.get(n, {}),
                                 "sbom": self.sboms.get(n, "")}
                             for n, d in self.images.items()}}  # fmt: skip
        path.write_text(json.dumps(record, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Published:
        try:
            record: dict[str, Any] = json.loads(path.read_text())
            return cls(
                registry=record["registry"],
                app_version=record["appVersion"],
                chart_version=record["chart"]["version"],
                images={n: v["digest"] for n, v in record["images"].items()},
                chart_digest=record["chart"]["digest"],
                chart_package=record["chart"]["package"],
                manifests={n: dict(v.get("manifests", {})) for n, v in record["images"].items()},
                sboms={n: v["sbom"] for n, v in record["images"].items() if v.get("sbom")},
            )
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ArtifactError(
                f"{path} is not a release record ({err}); `scripts/release artifacts` writes one"
            ) from err


# ---------------------------------------------------------------------------- the chart
def chart_versions(chart: Path = CHART) -> tuple[str, str]:
    """(version, appVersion) from ``Chart.yaml``."""
    text = (chart / "Chart.yaml").read_text()
    found = []
    for key in ("version", "appVersion"):
        match = re.search(rf'(?m)^{key}:\s*"?([^"\s]+)"?\s*$', text)
        if match is None:
            raise ArtifactError(f"{chart / 'Chart.yaml'} has no `{key}:` line")
        found.append(match[1])
    return found[0], found[1]


def pin_values(text: str, pins: Mapping[str, tuple[str, str]]) -> str:
    """``values.yaml`` with ``<section>.image`` and ``<section>.digest`` set for each pin.

    ``pins`` maps a top-level section (``agent``, ``nodeAgent``…) to (repository, digest). Only
    the section's own two-space-indented ``image:`` and ``digest:`` lines change, so comments
    and every other value stay as written; a section without both is a refusal.
    """
    out = text
    for section, (repository, digest) in pins.items():
        if not DIGEST.fullmatch(digest):
            raise ArtifactError(f"{section}: {digest!r} is not a sha256:<64 hex> digest")
        start = re.search(rf"(?m)^{re.escape(section)}:\s*$", out)
        if start is None:
            raise ArtifactError(f"values.yaml has no top-level `{section}:` section")
        following = re.search(r"(?m)^\S", out[start.end() :])
        end = start.end() + following.start() if following else len(out)
        body = out[start.end() : end]
        for key, value in (("image", repository), ("digest", digest)):
            body, count = re.subn(rf"(?m)^(  {key}:)[^\n]*$", rf"\g<1> {value}", body, count=1)
            if count != 1:
                raise ArtifactError(f"values.yaml's `{section}:` has no `  {key}:` line")
        out = out[: start.end()] + body + out[end:]
    return out


def package_chart(
    tools: Tools, published_images: Published, out: Path, chart: Path = CHART
) -> Path:
    """The chart with every image pinned to the registry by digest, packaged into ``out``."""
    with tempfile.TemporaryDirectory(prefix="chart-") as tmp:
        copy = Path(tmp) / chart.name
        shutil.copytree(chart, copy)
        pins = {VALUES_SECTION[n]: (published_images.repository(n), d)
                for n, d in published_images.images.items()}  # fmt: skip
        values = copy / "values.yaml"
        values.write_text(pin_values(values.read_text(), pins))
        tools.run(tools.helm, "package", str(copy), "--destination", str(out))
    version, _ = chart_versions(chart)
    package = out / f"{chart.name}-{version}.tgz"
    if not package.is_file():
        raise ArtifactError(f"helm package wrote no {package.name} in {out}")
    return package


def push_chart(tools: Tools, package: Path, registry: str) -> str:
    """``helm push`` to ``oci://<registry>/charts``; the chart manifest's digest."""
    said = tools.run(tools.helm, "push", str(package), f"oci://{registry}/charts",
                     *plain_http(registry))  # fmt: skip
    match = re.search(r"(?m)^Digest:\s*(sha256:[0-9a-f]{64})", said)
    if match is None:
        raise ArtifactError(f"helm push named no digest: {said.strip()[-500:]}")
    return match[1]


def plain_http(registry: str) -> list[str]:
    """``--plain-http`` for a loopback registry (the test's), nothing for a real one."""
    host = registry.split("/", 1)[0].rsplit(":", 1)[0]
    return ["--plain-http"] if host in ("127.0.0.1", "localhost", "[::1]") else []


# ---------------------------------------------------------------------------- the images
@dataclass(frozen=True)
class PushedImage:
    """One image in the registry: its index, the platform manifest in it, its SBOM referrer."""

    index: str
    manifest: str
    sbom: str


def image_index(manifest: Mapping[str, Any]) -> bytes:
    """The OCI image index over the platform manifests (one per entry of ``PLATFORMS``).

    Written here rather than by ``crane index append`` so that its bytes, and so the digest
    the chart pins, follow from the archive alone: the same build always pushes the same index.
    """
    entries = [{"mediaType": MANIFEST, "digest": manifest["digest"], "size": manifest["size"],
                "platform": dict(platform)} for platform in PLATFORMS]  # fmt: skip
    document = {"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _pushed(said: str) -> str:
    """The digest of ``<repository>@sha256:…``, the one line ``crane push`` prints on stdout."""
    found = re.findall(r"@(sha256:[0-9a-f]{64})", said)
    return found[-1] if found else "nothing"


def push_image(tools: Tools, archive: Path, repository: str, tag: str) -> PushedImage:
    """Push the archive's image as an index to ``repository:tag``, and its SBOM as a referrer.

    ``crane push`` reads an OCI layout directory; the archive is unpacked once and its
    ``index.json`` rewritten twice: first to the image index (``crane push --index`` pushes
    ``index.json`` itself as the index and each entry under it), then to the SBOM artifact
    alone, pushed by its own digest (a referrer has no tag; its ``subject`` finds it).
    """
    with tempfile.TemporaryDirectory(prefix="push-", dir=archive.parent) as tmp:
        layout = Path(tmp)
        with tarfile.open(archive) as tar:
            tar.extractall(layout, filter="data")
        listed = json.loads((layout / "index.json").read_text())["manifests"]
        manifest, artifacts = listed[0], listed[1:]
        index = image_index(manifest)
        (layout / "index.json").write_bytes(index)
        said = tools.run(tools.crane, "push", "--index", str(layout), f"{repository}:{tag}",
                         stdout=True)  # fmt: skip
        if _pushed(said) != _sha256(index):
            raise ArtifactError(
                f"the registry holds {repository}:{tag} as {_pushed(said)}, not the index of the "
                f"archive's {manifest['digest']} ({_sha256(index)}); is another image pushed "
                "under that tag?"
            )
        sboms = [a for a in artifacts if a.get("artifactType") == SBOM_MEDIA_TYPE]
        if len(sboms) != 1:
            raise ArtifactError(
                f"{archive} carries {len(sboms)} SBOM artifacts, not one; rebuild it with "
                "`scripts/testenv install images`"
            )
        sbom = sboms[0]
        (layout / "index.json").write_text(json.dumps({**json.loads(index), "manifests": [sbom]}))
        said = tools.run(tools.crane, "push", str(layout), f"{repository}@{sbom['digest']}",
                         stdout=True)  # fmt: skip
        if _pushed(said) != sbom["digest"]:
            raise ArtifactError(f"crane pushed the SBOM of {repository} as {_pushed(said)}, "
                                f"not {sbom['digest']}")  # fmt: skip
    return PushedImage(_sha256(index), str(manifest["digest"]), str(sbom["digest"]))


def referrers(registry: str, repository: str, digest: str) -> tuple[list[dict[str, Any]], str]:
    """The manifests whose ``subject`` is ``repository@digest``, and how they were found.

    The OCI 1.1 referrers API (``GET /v2/<repo>/referrers/<digest>``) first; where a registry
    does not serve it (a 404, as ``crane registry serve`` answers), the referrers tag schema:
    the index tagged ``sha256-<hex>`` that pushing clients keep. Returns the index's
    ``manifests`` and ``"referrers API"`` or ``"referrers tag"``. Anonymous reads over plain
    HTTP on loopback, HTTPS elsewhere (standard library only).
    """
    scheme = "http" if plain_http(registry) else "https"  # never file: or another scheme
    base = f"{scheme}://{registry}/v2/{repository}"

    def get(path: str) -> dict[str, Any] | None:
        request = urllib.request.Request(f"{base}/{path}", headers={"Accept": INDEX})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                document: dict[str, Any] = json.load(response)
                return document
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise ArtifactError(f"GET {base}/{path}: HTTP {err.code}") from err
        except (OSError, ValueError) as err:
            raise ArtifactError(f"GET {base}/{path} failed: {err}") from err

    listed = get(f"referrers/{digest}")
    if listed is not None:
        return list(listed.get("manifests", [])), "referrers API"
    tagged = get(f"manifests/{digest.replace(':', '-')}")
    return (list(tagged.get("manifests", [])) if tagged else []), "referrers tag"


# ---------------------------------------------------------------------------- signatures
def sign(tools: Tools, key: Path, reference: str) -> None:
    tools.run(tools.cosign, "sign", "--yes", "--key", str(key), "--tlog-upload=false", reference)


def attest_sbom(tools: Tools, key: Path, reference: str, sbom: Path) -> None:
    tools.run(tools.cosign, "attest", "--yes", "--key", str(key), "--tlog-upload=false",
              "--type", SBOM_TYPE, "--predicate", str(sbom), reference)  # fmt: skip


def verify(tools: Tools, public_key: Path, reference: str, *, attestation: bool) -> None:
    """The signature (and with ``attestation`` the SBOM attestation) of ``reference``."""
    tools.run(tools.cosign, "verify", "--key", str(public_key), "--insecure-ignore-tlog",
              reference)  # fmt: skip
    if attestation:
        tools.run(tools.cosign, "verify-attestation", "--key", str(public_key),
                  "--insecure-ignore-tlog", "--type", SBOM_TYPE, reference)  # fmt: skip


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _layer(files: Sequence[Path], out: Path) -> Path:
    """A tar of ``files`` (flat, sorted, owner 0, time 0): the same files give the same layer."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files, key=lambda p: p.name):
            info = tar.gettarinfo(str(path), arcname=path.name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o644
            with path.open("rb") as file:
                tar.addfile(info, file)
    return out


def publish_package(
    tools: Tools,
    registry: str,
    *,
    key: Path,
    public_key: Path,
    repository: str,
    tag: str,
    files: Sequence[Path],
    sbom: Path,
) -> str:
    """One released distribution as an OCI artifact, signed, its SBOM attested, verified.

    The wheel and sdist go in one layer on the empty base (``crane append --oci-empty-base``),
    so ``crane export`` gives back exactly the files that were built; the reference returned is
    ``<registry>/<repository>@sha256:…``, the digest the signature and the attestation name.
    """
    with tempfile.TemporaryDirectory(prefix="package-") as tmp:
        layer = _layer([*files, sbom], Path(tmp) / "layer.tar")
        said = tools.run(tools.crane, "append", "--oci-empty-base", "-f", str(layer), "-t",
                         f"{registry}/{repository}:{tag}", stdout=True)  # fmt: skip
    digest = _pushed(said)
    if not DIGEST.fullmatch(digest):
        raise ArtifactError(f"crane append named no digest for {repository}:{tag}: {said[-500:]}")
    reference = f"{registry}/{repository}@{digest}"
    sign(tools, key, reference)
    attest_sbom(tools, key, reference, sbom)
    verify(tools, public_key, reference, attestation=True)
    return reference


def public_key_of(key: Path) -> Path:
    public = key.with_suffix(".pub")
    if not public.is_file():
        raise ArtifactError(f"no public key beside {key} ({public}); pass --public-key")
    return public


def publish(
    tools: Tools,
    registry: str,
    *,
    key: Path,
    public_key: Path,
    images_dir: Path,
    out: Path,
    chart: Path = CHART,
    log: Any = None,
) -> Published:
    """Push, pin, package, sign, attest and verify (the module docstring's five steps)."""
    say = log or (lambda line: None)
    chart_version, app_version = chart_versions(chart)
    missing = [n for n in IMAGES if not (images_dir / f"{n}.tar").is_file()
               or not (images_dir / f"{n}.cdx.json").is_file()]  # fmt: skip
    if missing:
        raise ArtifactError(
            f"{images_dir} lacks the archive or SBOM of {', '.join(missing)}; run "
            "`scripts/testenv install images` first"
        )
    out.mkdir(parents=True, exist_ok=True)
    pushed = {}
    for name in IMAGES:
        repository = image_repository(registry, name)
        pushed[name] = push_image(tools, images_dir / f"{name}.tar", repository, f"v{app_version}")
        say(f"pushed {repository}:v{app_version}@{pushed[name].index} (an index: linux/amd64 "
            f"{pushed[name].manifest}; SBOM referrer {pushed[name].sbom})")  # fmt: skip
    digests = {name: image.index for name, image in pushed.items()}
    images_only = Published(registry, app_version, chart_version, digests, "", "")
    package = package_chart(tools, images_only, out, chart)
    chart_digest = push_chart(tools, package, registry)
    platform = "{os}/{architecture}".format(**PLATFORMS[0])
    published = Published(registry, app_version, chart_version, digests, chart_digest,
                          package.name, {n: {platform: i.manifest} for n, i in pushed.items()},
                          {n: i.sbom for n, i in pushed.items()})  # fmt: skip
    say(f"pushed {published.chart_ref()} (chart {chart_version}, images pinned by digest)")
    for name in IMAGES:
        sign(tools, key, published.image_ref(name))
        sbom = images_dir / f"{name}.cdx.json"
        shutil.copy2(sbom, out / sbom.name)
        attest_sbom(tools, key, published.image_ref(name), sbom)
    sign(tools, key, published.chart_ref())
    say("signed the four images and the chart; attached each SBOM as a cyclonedx attestation")
    for name in IMAGES:
        verify(tools, public_key, published.image_ref(name), attestation=True)
    verify(tools, public_key, published.chart_ref(), attestation=False)
    shutil.copy2(public_key, out / "cosign.pub")
    published.dump(out / "release.json")
    say(f"verified every signature with {public_key}; wrote {out / 'release.json'}")
    return published


# ---------------------------------------------------------------------------- the bundle
LOAD_SH: Final = """#!/bin/sh
# Push this bundle's images and chart, with their signatures and SBOM attestations, into
# REGISTRY (host[:port][/path]); then writes values-mirror.yaml for `helm install -f`.
# Needs cosign (COSIGN=/path/to/cosign, else cosign on PATH).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
registry=${1:?usage: load.sh REGISTRY}
cosign=${COSIGN:-cosign}
while read -r name repository tag digest; do
  "$cosign" load --dir "$here/layouts/$name" "$registry/$repository:$tag"
  echo "loaded $registry/$repository@$digest"
done < "$here/artifacts.txt"
{
  echo "# written by load.sh: the chart's images, from $registry, pinned by digest"
  while read -r name repository tag digest; do
    case $name in
      chart) continue ;;
      node-agent) section=nodeAgent ;;
      *) section=$name ;;
    esac
    printf '%s:\\n  image: %s\\n  digest: %s\\n' "$section" "$registry/$repository" "$digest"
  done < "$here/artifacts.txt"
} > "$here/values-mirror.yaml"
echo "helm install dynamic-config oci://$registry/charts/dynamic-config" \\
  "--version {chart_version} -f $here/values-mirror.yaml"
"""
VERIFY_SH: Final = """#!/bin/sh
# Check every signature (and each image's SBOM attestation) with this bundle's cosign.pub:
# in the bundle's own layouts, or, given REGISTRY, in that registry after load.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
registry=${1:-}
cosign=${COSIGN:-cosign}
while read -r name repository tag digest; do
  if [ -n "$registry" ]; then
    set -- "$registry/$repository@$digest"
  else
    set -- --local-image "$here/layouts/$name"
  fi
  "$cosign" verify --key "$here/cosign.pub" --insecure-ignore-tlog "$@" > /dev/null
  if [ "$name" != chart ]; then
    "$cosign" verify-attestation --key "$here/cosign.pub" --insecure-ignore-tlog \\
      --type cyclonedx "$@" > /dev/null
  fi
  echo "verified $repository@$digest"
done < "$here/artifacts.txt"
"""


def bundle(tools: Tools, record: Path, out: Path) -> Path:
    """The air-gap tarball of the release ``record`` describes (see the module docstring)."""
    published = Published.load(record)
    source = record.parent
    name = f"dynamic-config-{published.chart_version}-bundle"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bundle-", dir=out.parent) as tmp:
        root = Path(tmp) / name
        (root / "layouts").mkdir(parents=True)
        (root / "sboms").mkdir()
        lines = []
        for image in IMAGES:
            tools.run(tools.cosign, "save", "--dir", str(root / "layouts" / image),
                      published.image_ref(image))  # fmt: skip
            shutil.copy2(source / f"{image}.cdx.json", root / "sboms" / f"{image}.cdx.json")
            lines.append(f"{image} {repository_name(image)} v{published.app_version} "
                         f"{published.images[image]}")  # fmt: skip
        tools.run(tools.cosign, "save", "--dir", str(root / "layouts" / "chart"),
                  published.chart_ref())  # fmt: skip
        lines.append(f"chart charts/dynamic-config {published.chart_version} "
                     f"{published.chart_digest}")  # fmt: skip
        (root / "artifacts.txt").write_text("\n".join(lines) + "\n")
        shutil.copy2(source / published.chart_package, root / published.chart_package)
        shutil.copy2(source / "cosign.pub", root / "cosign.pub")
        shutil.copy2(record, root / "release.json")
        for script, text in (("load.sh", LOAD_SH), ("verify.sh", VERIFY_SH)):
            (root / script).write_text(text.replace("{chart_version}", published.chart_version))
            (root / script).chmod(0o755)
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as tar:
            tar.add(root, arcname=name)
        partial.rename(out)
    return out


# ---------------------------------------------------------------------------- the command
def default_images() -> Path:
    run = os.environ.get("DYNCONF_TESTENV_RUN")
    return (Path(run) if run else REPO / ".testenv") / "images"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/release",
        description="Publish the images and the chart to an OCI registry, signed, or write the "
        "air-gap bundle of such a release.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    publish_args = sub.add_parser("artifacts", help="push, pin, sign, attest and verify")
    publish_args.add_argument("--registry", required=True, help="host:port[/path] to push to")
    publish_args.add_argument("--key", required=True, type=Path, help="the cosign private key")
    publish_args.add_argument("--public-key", type=Path, help="default: the key's .pub twin")
    publish_args.add_argument("--images", type=Path, default=default_images(),
                              help="the built archives (default: <run>/images)")  # fmt: skip
    publish_args.add_argument("--out", type=Path, default=REPO / "dist" / "artifacts")
    bundle_args = sub.add_parser("bundle", help="write the air-gap tarball of a release")
    bundle_args.add_argument("--release", type=Path, default=REPO / "dist" / "artifacts" /
                             "release.json", help="the record `artifacts` wrote")  # fmt: skip
    bundle_args.add_argument("--out", type=Path, required=True, help="the tarball to write")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        sys.stdout.write(f"release: {line}\n")
        sys.stdout.flush()

    try:
        with tempfile.TemporaryDirectory(prefix="release-home-") as home:
            tools = Tools.find(Path(home))
            if args.command == "artifacts":
                public_key = args.public_key or public_key_of(args.key)
                publish(tools, args.registry, key=args.key, public_key=public_key,
                        images_dir=args.images, out=args.out, log=say)  # fmt: skip
            else:
                say(f"wrote {bundle(tools, args.release, args.out)}")
    except ArtifactError as error:
        sys.stderr.write(f"release: {error}\n")
        return 1
    return 0
