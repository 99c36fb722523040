"""The release leg: the images and the chart in a real OCI registry, signed, and installed from it.

``scripts/release artifacts`` pushes the four images built here (each an OCI image index
listing its linux/amd64 manifest, its SBOM an OCI 1.1 referrer of that manifest) and the chart
(every image pinned by index digest) to a loopback ``crane registry serve``, signs them with an
offline cosign key, attests each SBOM and verifies it all; the node then installs the chart from
``oci://127.0.0.1:<port>/charts/dynamic-config`` and its containerd pulls every image from that
registry by digest (``kube_node.expose(port, at="127.0.0.1")``: the reference is the same inside
the node as outside). ``scripts/release bundle`` writes the air-gap tarball, which is verified,
loaded into a second registry, verified there and installed from there.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.operator.types import CLASS_KIND, RENDER_KIND
from tests.e2e.conftest import InstallChart, Release
from tests.e2e.opnode_support import exec_in, wait_for
from tests.e2e.support import Injector, statuses, wait_ready
from tests.e2e.test_images import _purls, installed_pins
from tests.e2e.test_operator import _operator_support
from tests.fixtures.kube import REPO
from tests.fixtures.node import KubeNode, ProjectImage
from tests.fixtures.registry import OciRegistry
from tests.fixtures.release import git, note_unreleased, release_argv, release_clone
from tests.fixtures.uv import Uv
from tests.testenv.test_node import BUSYBOX

sys.path.insert(0, str(REPO / "scripts"))
from release_lib.artifacts import (
    IMAGES,
    SBOM_MEDIA_TYPE,
    VALUES_SECTION,
    Published,
    chart_versions,
    referrers,
)

pytestmark = pytest.mark.e2e

PASSWORD = "release-leg-passphrase"
"""The key is encrypted, as a real one is; the release reads it from ``COSIGN_PASSWORD``."""
LABEL = {"dynconf-e2e-release": "pulls"}
"""The only pods the leg's releases inject (their namespaces are not gated: no other test's)."""
CHART_VERSION, APP_VERSION = chart_versions()


@dataclass(frozen=True)
class Keys:
    private: Path
    public: Path


def _run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                            env={**os.environ, **(env or {})})  # fmt: skip
    assert result.returncode == 0, (
        f"{' '.join(argv[:3])} failed ({result.returncode}):\n{result.stderr[-4000:]}"
    )
    return result.stdout


def _tools_env(crane: Path, cosign: Path, helm: Path) -> dict[str, str]:
    return {"CRANE": str(crane), "COSIGN": str(cosign), "HELM": str(helm),
            "COSIGN_PASSWORD": PASSWORD}  # fmt: skip


def _publish(root: Path, argv: list[str], registry: OciRegistry, key: Keys, images: Path,
             out: Path, env: dict[str, str]) -> str:  # fmt: skip
    """``root``'s ``scripts/release argv`` pushing to ``registry``, signed with ``key``."""
    return _run(release_argv(root, *argv, "--registry", registry.address, "--key",
                             str(key.private), "--images", str(images), "--out", str(out)),
                env=env)  # fmt: skip


def _key_pair(cosign: Path, where: Path) -> Keys:
    _run([str(cosign), "generate-key-pair", "--output-key-prefix", str(where / "cosign")],
         env={"COSIGN_PASSWORD": PASSWORD})  # fmt: skip
    return Keys(where / "cosign.key", where / "cosign.pub")


@pytest.fixture(scope="module")
def signing_key(cosign_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return _key_pair(cosign_bin, tmp_path_factory.mktemp("cosign-key"))


@dataclass(frozen=True)
class Released:
    registry: OciRegistry
    out: Path
    record: Published
    took: float


@pytest.fixture(scope="module")
def released(
    oci_registry: Callable[[], OciRegistry],
    project_image: ProjectImage,
    signing_key: Keys,
    crane_bin: Path,
    cosign_bin: Path,
    helm_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Released:
    """``scripts/release artifacts`` run once against a fresh loopback registry."""
    archives = [project_image(name).archive for name in IMAGES]
    registry = oci_registry()
    out = tmp_path_factory.mktemp("artifacts")
    began = time.monotonic()
    said = _publish(REPO, ["artifacts"], registry, signing_key, archives[0].parent, out,
                    _tools_env(crane_bin, cosign_bin, helm_bin))  # fmt: skip
    took = time.monotonic() - began
    print(f"\nrelease: scripts/release artifacts in {took:.1f} s\n{said}")
    return Released(registry, out, Published.load(out / "release.json"), took)


def _helm(helm: Path, home: Path, *argv: str) -> str:
    env = {f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}
    return _run([str(helm), *argv], env=env, timeout=300)


def _verify(cosign: Path, public: Path, reference: str, *extra: str) -> list[dict[str, Any]]:
    """``cosign verify`` (the README's line); the verified payloads, one JSON document each."""
    out = _run([str(cosign), "verify", "--key", str(public), "--insecure-ignore-tlog", *extra,
                reference], timeout=120)  # fmt: skip
    documents: list[dict[str, Any]] = json.loads(out)
    return documents


# ---------------------------------------------------------------------------- the registry
def _built(project_image: ProjectImage, name: str) -> str:
    """The manifest digest of the image as built (the archive's ``index.json``)."""
    with tarfile.open(project_image(name).archive) as tar:
        index = tar.extractfile("index.json")
        assert index is not None
        return str(json.load(index)["manifests"][0]["digest"])


def _manifest(crane: Path, reference: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_run([str(crane), "manifest", reference], timeout=60))
    return document


def test_each_image_is_pushed_by_the_digest_its_archive_and_sbom_name(
    released: Released, project_image: ProjectImage, crane_bin: Path
) -> None:
    for name in IMAGES:
        built = _built(project_image, name)
        sbom = json.loads(project_image(name).archive.with_name(f"{name}.cdx.json").read_text())
        repository = released.record.repository(name)

        in_registry = _run([str(crane_bin), "digest", f"{repository}:v{APP_VERSION}"],
                           timeout=60).strip()  # fmt: skip
        platform = _run([str(crane_bin), "digest", "--platform", "linux/amd64",
                         f"{repository}@{in_registry}"], timeout=60).strip()  # fmt: skip

        assert released.record.images[name] == in_registry
        assert released.record.manifests[name] == {"linux/amd64": built} and platform == built
        assert sbom["metadata"]["component"]["hashes"][0]["content"] == built.split(":")[1]


def test_each_image_is_an_index_listing_its_linux_amd64_manifest(
    released: Released, project_image: ProjectImage, crane_bin: Path
) -> None:
    for name in IMAGES:
        index = _manifest(crane_bin, released.record.image_ref(name))

        assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
        assert [(m["digest"], m["platform"]) for m in index["manifests"]] == [
            (_built(project_image, name), {"architecture": "amd64", "os": "linux"})
        ]


def test_each_sbom_is_a_referrer_of_its_image_listed_by_the_registry(
    released: Released, project_image: ProjectImage, crane_bin: Path
) -> None:
    for name in IMAGES:
        built = _built(project_image, name)
        repository = f"dynconf-{name}"

        listed, via = referrers(released.registry.address, repository, built)

        # crane registry serve has no referrers API: the referrers tag is what clients keep
        assert via == "referrers tag"
        sboms = [m for m in listed if m.get("artifactType") == SBOM_MEDIA_TYPE]
        assert [m["digest"] for m in sboms] == [released.record.sboms[name]]
        artifact = _manifest(crane_bin, f"{released.record.repository(name)}@{sboms[0]['digest']}")
        assert artifact["subject"]["digest"] == built
        blob = _run([str(crane_bin), "blob",
                     f"{released.record.repository(name)}@{artifact['layers'][0]['digest']}"],
                    timeout=60)  # fmt: skip
        on_disk = project_image(name).archive.with_name(f"{name}.cdx.json").read_text()
        assert json.loads(blob) == json.loads(on_disk)


def test_the_released_chart_pins_every_image_to_the_registry_by_digest(
    released: Released, helm_bin: Path, tmp_path: Path
) -> None:
    chart = f"oci://{released.registry.address}/charts/dynamic-config"

    values = yaml.safe_load(_helm(helm_bin, tmp_path, "show", "values", chart, "--version",
                                  CHART_VERSION, "--plain-http"))  # fmt: skip

    for name, section in VALUES_SECTION.items():
        assert values[section]["image"] == f"{released.registry.address}/dynconf-{name}"
        assert values[section]["digest"] == released.record.images[name]


def test_every_image_and_the_chart_verify_with_the_release_key(
    released: Released, cosign_bin: Path, signing_key: Keys
) -> None:
    for reference in released.record.refs():
        payloads = _verify(cosign_bin, signing_key.public, reference)

        digest = reference.rsplit("@", 1)[1]
        assert [p["critical"]["image"]["docker-manifest-digest"] for p in payloads] == [digest]


def test_a_signature_does_not_verify_with_another_key(
    released: Released, cosign_bin: Path, tmp_path: Path
) -> None:
    other = _key_pair(cosign_bin, tmp_path)

    result = subprocess.run(
        [str(cosign_bin), "verify", "--key", str(other.public), "--insecure-ignore-tlog",
         released.record.image_ref("agent")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert result.returncode != 0
    assert "no matching signatures" in result.stderr


def test_each_sbom_attestation_is_signed_and_lists_every_locked_package(
    released: Released,
    cosign_bin: Path,
    signing_key: Keys,
    project_image: ProjectImage,
    uv_bin: Uv,
) -> None:
    for name in IMAGES:
        archive = project_image(name).archive
        reference = released.record.image_ref(name)
        out = _run([str(cosign_bin), "verify-attestation", "--key", str(signing_key.public),
                    "--insecure-ignore-tlog", "--type", "cyclonedx", reference], timeout=120)  # fmt: skip
        envelope = json.loads(out.splitlines()[0])
        statement = json.loads(base64.b64decode(envelope["payload"]))
        locked = installed_pins(name, archive, uv_bin)

        listed = _purls(statement["predicate"], "pypi")

        assert statement["predicateType"] == "https://cyclonedx.org/bom"
        assert statement["subject"][0]["digest"]["sha256"] == reference.split(":")[-1]
        missing = {n: v for n, v in locked.items() if listed.get(n) != v}
        assert not missing, f"{name}: the attested SBOM lacks {missing}"


# ---------------------------------------------------------------------------- installs
RELEASE_VALUES: dict[str, Any] = {
    "webhook": {
        "replicas": 1,
        "podDisruptionBudget": {"enabled": False},
        "objectSelector": {"matchLabels": LABEL},
    },
    "operator": {"enabled": True},
    "nodeAgent": {"enabled": True},
}
"""Every image of the chart runs: the webhook, the operator, the node agent and (injected) the
agent; the webhook selects only the leg's labelled pods."""


def _pulled(node: KubeNode, reference: str, timeout: float = 180) -> None:
    """Wait until the node's containerd holds ``reference`` (the kubelet pulled it)."""
    deadline = time.monotonic() + timeout
    while not node.has_image(reference):
        assert time.monotonic() < deadline, f"the node never pulled {reference}"
        time.sleep(1)


def _injected_pod(release: Release) -> str:
    """An annotated pod in a fresh namespace; the name of the namespace."""
    namespace = release.injecting_namespace()
    release.await_injection(namespace, LABEL)
    annotations = {"inject": "true", "source": "consul", "endpoint": "http://10.88.0.1:8500",
                   "key": "release.json", "path": "/config/release.json"}  # fmt: skip
    release.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "pulls-the-agent", "labels": LABEL,
                     "annotations": {f"dynamic-config.rs/{k}": v for k, v in annotations.items()}},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                                 "command": ["sleep", "3600"]}]},
    })  # fmt: skip
    return namespace


def _assert_installed_from(
    release: Release, node: KubeNode, record: Published, registry: str
) -> None:
    """Every container of the release names ``registry`` by digest, and the node pulled it."""
    pods = release.core.list_namespaced_pod(release.namespace).items
    images = {c.image for p in pods for c in p.spec.containers}
    wanted = {record.image_ref(n, registry) for n in ("webhook", "operator", "node-agent")}
    assert wanted <= images, f"the release runs {images}"
    _injected_pod(release)
    for reference in [*wanted, record.image_ref("agent", registry)]:
        _pulled(node, reference)


@pytest.fixture
def node_sees(kube_node: KubeNode) -> Iterator[Callable[[OciRegistry], str]]:
    """``node_sees(registry)``: the registry's loopback address, valid inside the node too."""
    with contextlib.ExitStack() as stack:

        def expose(registry: OciRegistry) -> str:
            return stack.enter_context(kube_node.expose(registry.port, at="127.0.0.1"))

        yield expose


def test_the_release_installs_from_the_registry_pulling_every_image_by_digest(
    released: Released,
    kube_node: KubeNode,
    install_chart: InstallChart,
    chart_release: Release,
    cosign_bin: Path,
    signing_key: Keys,
    node_sees: Callable[[OciRegistry], str],
) -> None:
    registry = node_sees(released.registry)
    chart = (f"oci://{registry}/charts/dynamic-config", "--version", CHART_VERSION, "--plain-http")
    _verify(cosign_bin, signing_key.public, released.record.chart_ref())  # before installing

    with install_chart("dynconf-registry", RELEASE_VALUES, chart=chart) as release:
        _assert_installed_from(release, kube_node, released.record, registry)


# ---------------------------------------------------------------------------- air gap
@pytest.fixture(scope="module")
def bundle(
    released: Released,
    crane_bin: Path,
    cosign_bin: Path,
    helm_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """``scripts/release bundle`` of the release, unpacked; the bundle's directory."""
    where = tmp_path_factory.mktemp("bundle")
    tarball = where / "dynamic-config-bundle.tar"
    began = time.monotonic()
    _run(release_argv(REPO, "bundle", "--release", str(released.out / "release.json"), "--out",
                      str(tarball)),
         env=_tools_env(crane_bin, cosign_bin, helm_bin))  # fmt: skip
    print(f"\nrelease: bundle written in {time.monotonic() - began:.1f} s, "
          f"{tarball.stat().st_size / 2**20:.0f} MiB")  # fmt: skip
    with tarfile.open(tarball) as tar:
        tar.extractall(where, filter="tar")
    return where / f"dynamic-config-{CHART_VERSION}-bundle"


def _head(path: Path) -> str:
    """The first bytes of a file, as text (enough to see a PEM header)."""
    if not path.is_file():
        return ""
    with path.open("rb") as handle:
        return handle.read(64).decode(errors="replace")


def test_the_bundle_holds_the_chart_images_signatures_sboms_and_scripts(bundle: Path) -> None:
    assert {p.name for p in (bundle / "layouts").iterdir()} == {*IMAGES, "chart"}
    assert {p.name for p in (bundle / "sboms").iterdir()} == {f"{n}.cdx.json" for n in IMAGES}
    assert (bundle / f"dynamic-config-{CHART_VERSION}.tgz").is_file()
    assert (bundle / "cosign.pub").is_file()
    assert not [p for p in bundle.rglob("*") if "PRIVATE KEY" in _head(p)], "a private key"
    assert all(os.access(bundle / s, os.X_OK) for s in ("load.sh", "verify.sh"))


def test_the_bundle_verifies_offline_before_it_is_loaded(bundle: Path, cosign_bin: Path) -> None:
    said = _run([str(bundle / "verify.sh")], env={"COSIGN": str(cosign_bin)})

    assert said.count("verified ") == len(IMAGES) + 1


def test_the_bundle_loads_into_a_second_registry_verifies_there_and_installs(
    released: Released,
    bundle: Path,
    oci_registry: Callable[[], OciRegistry],
    kube_node: KubeNode,
    install_chart: InstallChart,
    chart_release: Release,
    cosign_bin: Path,
    node_sees: Callable[[OciRegistry], str],
) -> None:
    second = oci_registry()
    env = {"COSIGN": str(cosign_bin)}

    _run([str(bundle / "load.sh"), second.address], env=env)
    said = _run([str(bundle / "verify.sh"), second.address], env=env)

    assert said.count("verified ") == len(IMAGES) + 1
    registry = node_sees(second)
    chart = (f"oci://{registry}/charts/dynamic-config", "--version", CHART_VERSION,
             "--plain-http", "-f", str(bundle / "values-mirror.yaml"))  # fmt: skip
    with install_chart("dynconf-airgap", RELEASE_VALUES, chart=chart) as release:
        _assert_installed_from(release, kube_node, released.record, registry)


# ---------------------------------------------------------------------------- one package
def test_one_command_releases_a_package_then_the_images_and_the_chart_signed(
    oci_registry: Callable[[], OciRegistry],
    project_image: ProjectImage,
    signing_key: Keys,
    crane_bin: Path,
    cosign_bin: Path,
    helm_bin: Path,
    uv_bin: Uv,
    tmp_path: Path,
) -> None:
    """``scripts/release PACKAGE VERSION --registry --key`` in a clone: the store's wheel and
    sdist as a signed OCI artifact with its SBOM attested, the images and the chart, then the tag."""
    archives = [project_image(name).archive for name in IMAGES]
    registry = oci_registry()
    clone = release_clone(tmp_path / "repo")
    note_unreleased(clone, "dynconf-store-redis", "### Fixed\n\n- A reconnect after a failover.")
    out = tmp_path / "out"
    began = time.monotonic()
    said = _publish(clone, ["dynconf-store-redis", "0.1.1"], registry, signing_key,
                    archives[0].parent, out,
                    {**uv_bin.env(), **_tools_env(crane_bin, cosign_bin, helm_bin)})  # fmt: skip
    took = time.monotonic() - began
    print(f"\nrelease: one package, the images and the chart in {took:.1f} s\n{said}")

    reference = f"{registry.address}/packages/dynconf-store-redis:0.1.1"
    [signed] = _verify(cosign_bin, signing_key.public, reference)
    envelope = json.loads(_run([str(cosign_bin), "verify-attestation", "--key",
                                str(signing_key.public), "--insecure-ignore-tlog", "--type",
                                "cyclonedx", reference], timeout=120).splitlines()[0])  # fmt: skip
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    listed = _purls(predicate, "pypi")
    layer = tmp_path / "package.tar"
    with layer.open("wb") as sink:
        subprocess.run([str(crane_bin), "export", reference, "-"], stdout=sink, check=True,
                       timeout=120)  # fmt: skip
    with tarfile.open(layer) as tar:
        shipped = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    dist = clone / "dist" / "dynconf-store-redis-0.1.1"
    built = {p.name: p.read_bytes() for p in dist.iterdir() if p.name.endswith((".whl", ".gz"))}

    assert signed["critical"]["image"]["docker-manifest-digest"].startswith("sha256:")
    assert predicate["metadata"]["component"]["purl"] == "pkg:pypi/dynconf-store-redis@0.1.1"
    assert {"redis", "dynconf-core", "pydantic"} <= set(listed), listed
    assert {n: shipped[n] for n in built} == built, "the artifact holds the files that were built"
    assert "dynconf-store-redis.cdx.json" in shipped
    record = Published.load(out / "release.json")
    assert record.chart_digest.startswith("sha256:") and set(record.images) == set(IMAGES)
    assert git(clone, "tag", "--list", "dynconf-store-redis-v0.1.1").strip()
    assert "release: tagged dynconf-store-redis-v0.1.1" in said


# ---------------------------------------------------------------------------- upgrade
UPGRADE_VALUES: dict[str, Any] = {
    "webhook": {
        "replicas": 1,
        "podDisruptionBudget": {"enabled": False},
        "objectSelector": {"matchLabels": LABEL},
    },
    "operator": {"enabled": True},
}


SERVED = "/config/served.json"


def _ca(release: Release) -> tuple[str, str]:
    """(the chart-minted Secret's ``ca.crt``, the webhook configuration's caBundle)."""
    secret = release.core.read_namespaced_secret(
        f"{release.fullname}-webhook-tls", release.namespace
    )
    admission = client.AdmissionregistrationV1Api(release.api_client)
    configuration = admission.read_mutating_webhook_configuration(release.fullname)
    return secret.data["ca.crt"], configuration.webhooks[0].client_config.ca_bundle


def _read(core: Any, namespace: str, pod: str) -> Any:
    return json.loads(exec_in(core, namespace, pod, "app", "cat", SERVED))


def test_upgrading_the_first_release_to_the_tree_keeps_pods_operator_and_ca(
    released: Released,
    kube_node: KubeNode,
    install_chart: InstallChart,
    chart_release: Release,
    node_image: ProjectImage,
    consul_server: Any,
    kube_node_client: object,
    node_sees: Callable[[OciRegistry], str],
) -> None:
    """The tree's images as released are the first release; the tree's chart upgrades it."""
    registry = node_sees(released.registry)
    chart = (f"oci://{registry}/charts/dynamic-config", "--version", CHART_VERSION, "--plain-http")
    kube = _operator_support().Kube(kube_node_client)
    tag = uuid.uuid4().hex[:8]
    key, rendered = f"e2e-upgrade/{tag}/app.json", f"e2e-upgrade/{tag}/render.json"
    with (
        kube_node.expose(consul_server.port) as endpoint,
        install_chart("dynconf-upgrade", UPGRADE_VALUES, chart=chart) as release,
    ):
        namespace = release.injecting_namespace()
        release.await_injection(namespace, LABEL)
        injector = Injector(release.core, namespace, endpoint, consul_server, tag)
        injector.put(key, {"generation": 1})
        injector.put(rendered, {"generation": 1})
        annotations = injector.annotations(key, path=SERVED)
        body = injector.pod("served", annotations, "exec sleep 3600", SERVED)
        body["metadata"]["labels"] = LABEL
        release.core.create_namespaced_pod(namespace, body)
        wait_ready(release.core, namespace, "served")
        kube.create(CLASS_KIND, namespace, "consul", {"source": "consul",
                                                      "endpoint": f"http://{endpoint}"})  # fmt: skip
        kube.create(RENDER_KIND, namespace, "app", {"class": "consul", "key": rendered,
                    "intervalSeconds": 1, "target": {"configMap": "app", "file": "app.json"}})  # fmt: skip
        kube.await_configmap(namespace, "app", lambda c: '"generation": 1' in str(c.get("data")))
        before = release.core.read_namespaced_pod("served", namespace)
        ca = _ca(release)
        for name in IMAGES:
            node_image(name)

        began = time.monotonic()
        release.upgrade({})
        upgraded = time.monotonic() - began

        images = {c.image for p in release.core.list_namespaced_pod(release.namespace).items
                  if p.metadata.deletion_timestamp is None for c in p.spec.containers}  # fmt: skip
        assert not any(i.startswith(registry) for i in images), f"still the release's: {images}"
        assert _ca(release) == ca
        pod = release.core.read_namespaced_pod("served", namespace)
        assert pod.metadata.uid == before.metadata.uid
        assert {n: s.restart_count for n, s in statuses(pod).items()} == dict.fromkeys(
            statuses(pod), 0
        )
        injector.put(key, {"generation": 2})
        injector.put(rendered, {"generation": 2})
        kube.await_configmap(namespace, "app", lambda c: '"generation": 2' in str(c.get("data")))
        wait_for(lambda: _read(release.core, namespace, "served") == {"generation": 2}, 60,
                 "the old pod's agent to render the change")  # fmt: skip
        admitted = release.await_injection(namespace, LABEL)
        print(f"\nrelease: upgrade to the tree's chart in {upgraded:.1f} s; a new pod is "
              f"injected {admitted:.1f} s after it returned")  # fmt: skip
