"""How big the four images are, and where their bytes go.

Run from the repo root after ``scripts/testenv install images``:
``uv run --no-sync python bench/image_sizes.py [--top 25] [--json OUT]``. Reads the OCI archives
the image builder wrote (``<run>/images/<name>.tar``, ``DYNCONF_TESTENV_RUN`` or ``.testenv``)
and prints, per image:

* the uncompressed size of the image and of each of its layers, and the ratio to its target
  (agent 200 MiB, the others 120 MiB each);
* whether a shell (``/bin/sh``, ``dash``, ``bash``) or a package manager (``apt``, ``dpkg``,
  ``pip``) is in it;
* the biggest directories: the standard library, each Python distribution (by its ``RECORD``),
  and the top system directories;
* for the agent, what each store's client costs: the bytes of the distributions only that
  store's dependency closure pulls in (shared ones are counted once, under ``shared``).

``--node`` adds a leg on the test node (``scripts/testenv start node``): for each image, the
seconds ``ctr images import`` takes to load its archive (the pull, on a node with no registry
between), and for the agent, the seconds from ``ctr run`` to its exit after rendering one
document from the embedded file store (container start, interpreter start, first render),
best of ``--runs``. ``--node-ref REF`` times the same render with an image containerd already
holds (an earlier build, to compare).
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from testenv_lib.common import Context  # noqa: E402

IMAGES = ("agent", "webhook", "operator", "node-agent")
MIB = 2**20
TARGETS = {"agent": 200 * MIB, "webhook": 120 * MIB, "operator": 120 * MIB,
           "node-agent": 120 * MIB}  # fmt: skip
"""The uncompressed size each image must stay under."""
SHELLS = ("usr/bin/sh", "usr/bin/dash", "usr/bin/bash", "bin/sh")
PACKAGE_MANAGERS = ("usr/bin/apt", "usr/bin/apt-get", "usr/bin/dpkg",
                    "opt/dynamic-config/venv/bin/pip")  # fmt: skip
SITE = re.compile(r"^opt/dynamic-config/venv/lib/python3\.\d+/site-packages/")
STDLIB = "usr/lib/python3.11/"


@dataclass
class Layer:
    digest: str
    size: int
    files: dict[str, int] = field(default_factory=dict)
    """Every regular file's path and size."""
    links: dict[str, str] = field(default_factory=dict)
    """Every symlink's path and target."""
    text: dict[str, bytes] = field(default_factory=dict)
    """The bytes of each distribution's ``METADATA`` and ``RECORD``."""


def read_layers(archive: Path) -> list[Layer]:
    """Every layer of the image in ``archive``, in order."""
    layers: list[Layer] = []
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> IO[bytes]:
            handle = tar.extractfile("blobs/sha256/" + digest.split(":", 1)[1])
            assert handle is not None
            return handle

        index = json.load(blob_of(tar, "index.json"))
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        for descriptor in manifest["layers"]:
            layer = Layer(descriptor["digest"], int(descriptor["size"]))
            with tarfile.open(fileobj=blob(descriptor["digest"]), mode="r|*") as inner:
                for member in inner:
                    name = member.name.removeprefix("./")
                    if member.issym():
                        layer.links[name] = member.linkname
                    elif member.isreg():
                        layer.files[name] = member.size
                        if SITE.match(name) and name.endswith((".dist-info/METADATA",
                                                               ".dist-info/RECORD")):  # fmt: skip
                            data = inner.extractfile(member)
                            assert data is not None
                            layer.text[name] = data.read()
            layers.append(layer)
    return layers


def blob_of(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    handle = tar.extractfile(name)
    assert handle is not None
    return handle


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Distribution:
    name: str
    requires: list[str]
    files: set[str]


def distributions(files: dict[str, int], text: dict[str, bytes]) -> dict[str, Distribution]:
    """Each installed distribution (normalised name): what it requires, which files are its."""
    out: dict[str, Distribution] = {}
    parser = email.parser.BytesHeaderParser()
    for path, data in text.items():
        if not path.endswith("/METADATA"):
            continue
        info = path.rsplit("/", 1)[0]
        site = info.rsplit("/", 1)[0]
        meta = parser.parsebytes(data)
        requires = [
            _norm(re.split(r"[\s\[<>=!~;(]", r.strip(), maxsplit=1)[0])
            for r in meta.get_all("Requires-Dist") or []
            if "extra ==" not in r
        ]
        owned = {f"{site}/{line.split(',')[0]}"
                 for line in text.get(info + "/RECORD", b"").decode().splitlines() if line}  # fmt: skip
        # bytecode is compiled after install, so RECORD does not name it: it is its source's
        # (in __pycache__, or in the source's place where the image keeps bytecode only)
        owned |= {p for p in files if p.endswith(".pyc") and _pyc_source(p) in owned}
        out[_norm(str(meta["Name"]))] = Distribution(
            str(meta["Name"]), requires, owned & files.keys()
        )
    return out


def _pyc_source(pyc: str) -> str:
    if "/__pycache__/" not in pyc:
        return pyc.removesuffix("c")
    directory, _, name = pyc.rpartition("/__pycache__/")
    return f"{directory}/{name.split('.', 1)[0]}.py"


def closure(dists: dict[str, Distribution], roots: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in dists:
            continue
        seen.add(name)
        todo += dists[name].requires
    return seen


def store_costs(files: dict[str, int], dists: dict[str, Distribution]) -> dict[str, int]:
    """Bytes each store's client closure adds beyond the engine and the other stores."""
    stores = sorted(n for n in dists if n.startswith("dynconf-store-"))
    base = closure(dists, [n for n in dists if n.startswith("dynconf") and n not in stores])

    def size(names: set[str]) -> int:
        return sum(files[f] for n in names for f in dists[n].files)

    per_store = {s: closure(dists, [s]) - base for s in stores}
    counted: dict[str, int] = defaultdict(int)
    for names in per_store.values():
        for name in names:
            counted[name] += 1
    out = {s.removeprefix("dynconf-store-"): size({n for n in names if counted[n] == 1})
           for s, names in per_store.items()}  # fmt: skip
    out["shared by several stores"] = size({n for n, c in counted.items() if c > 1})
    out["engine (core, k8s and their closure)"] = size(base)
    return out


def biggest(
    files: dict[str, int], dists: dict[str, Distribution], top: int
) -> list[tuple[str, int]]:
    """The heaviest parts: the stdlib, each distribution, and the other top directories."""
    groups: dict[str, int] = defaultdict(int)
    owner = {f: f"site-packages: {d.name}" for d in dists.values() for f in d.files}
    for path, size in files.items():
        if path in owner:
            key = owner[path]
        elif path.startswith(STDLIB):
            key = "stdlib: " + "/".join(path.split("/")[3:4])
        else:
            key = "/".join(path.split("/")[:3])
        groups[key] += size
    return sorted(groups.items(), key=lambda item: -item[1])[:top]


def measure(archive: Path, name: str, top: int) -> dict[str, object]:
    layers = read_layers(archive)
    files = {p: s for layer in layers for p, s in layer.files.items()}
    links = {p: t for layer in layers for p, t in layer.links.items()}
    text = {p: t for layer in layers for p, t in layer.text.items()}
    dists = distributions(files, text)
    total = sum(layer.size for layer in layers)
    present = files.keys() | links.keys()
    report: dict[str, object] = {
        "image": name,
        "bytes": total,
        "target": TARGETS[name],
        "ratio": round(total / TARGETS[name], 2),
        "layers": [{"digest": layer.digest[:19], "bytes": layer.size} for layer in layers],
        "shell": sorted(p for p in SHELLS if p in present),
        "package_manager": sorted(p for p in PACKAGE_MANAGERS if p in present),
        "pyc_bytes": sum(s for p, s in files.items() if p.endswith(".pyc")),
        "biggest": biggest(files, dists, top),
    }
    if name == "agent":
        report["store_client_bytes"] = store_costs(files, dists)
    return report


def show(report: dict[str, object]) -> None:
    size, target = int(report["bytes"]), int(report["target"])  # type: ignore[call-overload]
    verdict = "ok" if size <= target else "OVER"
    print(f"\n== {report['image']}: {size / MIB:.1f} MiB uncompressed, target "
          f"{target / MIB:.0f} MiB, ratio {report['ratio']} ({verdict})")  # fmt: skip
    for layer in report["layers"]:  # type: ignore[attr-defined]
        print(f"   layer {layer['digest']}  {layer['bytes'] / MIB:8.1f} MiB")
    print(f"   shell: {report['shell'] or 'none'}; package manager: "
          f"{report['package_manager'] or 'none'}; bytecode "
          f"{int(report['pyc_bytes']) / MIB:.1f} MiB")  # type: ignore[call-overload]  # fmt: skip
    for key, value in report["biggest"]:  # type: ignore[attr-defined]
        print(f"   {value / MIB:8.1f} MiB  {key}")
    if "store_client_bytes" in report:
        print("   store client closures (bytes only that store brings):")
        for key, value in report["store_client_bytes"].items():  # type: ignore[attr-defined]
            print(f"   {value / MIB:8.1f} MiB  {key}")


AGENT = "/opt/dynamic-config/venv/bin/dynamic-config-agent"


def node_leg(archives: dict[str, Path], refs: list[str], runs: int) -> dict[str, float]:
    """Seconds to import each archive into the node, and from ``ctr run`` to a first render."""
    sys.path.insert(0, str(REPO))
    from tests.fixtures.node import _published

    node = _published()
    if node is None:
        raise SystemExit("no test node is running: scripts/testenv start node")
    out: dict[str, float] = {}
    for name, archive in archives.items():
        ref = json.loads(archive.with_suffix(".json").read_text())["image"]
        subprocess.run(node.nsenter(str(node.ctr_path), "--address",
                                    "/run/containerd/containerd.sock", "-n", "k8s.io", "images",
                                    "rm", ref), capture_output=True, check=False)  # fmt: skip
        began = time.monotonic()
        node.ctr("images", "import", "--platform", "linux/amd64", str(archive))
        out[f"import {name}"] = round(time.monotonic() - began, 2)
        if name == "agent":
            refs = [ref, *refs]
    work = Path(tempfile.mkdtemp(prefix="image-sizes-", dir=Context().run))
    (work / "doc.json").write_text('{"greeting": "hello"}\n')
    work.chmod(0o777)
    for ref in refs:
        took = []
        for run in range(runs):
            (work / "out.toml").unlink(missing_ok=True)
            began = time.monotonic()
            node.ctr("run", "--rm", "--mount", f"type=bind,src={work},dst=/w,options=rbind:rw",
                     ref, f"image-sizes-{run}", AGENT, "--source", "file", "--key",
                     "/w/doc.json", "--out", "/w/out.toml")  # fmt: skip
            took.append(time.monotonic() - began)
            assert "hello" in (work / "out.toml").read_text(), "the agent rendered nothing"
        out[f"start to first render, first run, {ref}"] = round(took[0], 2)
        out[f"start to first render, best of {runs}, {ref}"] = round(min(took), 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--images", default=",".join(IMAGES))
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", type=Path, help="also write the reports here")
    parser.add_argument("--node", action="store_true", help="also time import and start")
    parser.add_argument("--node-ref", action="append", default=[], help="another agent image")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    run = Context().run
    reports = []
    for name in filter(None, args.images.split(",")):
        archive = run / "images" / f"{name}.tar"
        if not archive.is_file():
            print(f"{archive} is missing: run `scripts/testenv install images` first")
            return 2
        reports.append(measure(archive, name, args.top))
        show(reports[-1])
    if args.node:
        archives = {str(r["image"]): run / "images" / f"{r['image']}.tar" for r in reports}
        timings = node_leg(archives, args.node_ref, args.runs)
        print("\n== on the node (seconds)")
        for key, value in timings.items():
            print(f"   {value:7.2f}  {key}")
        reports.append({"node": timings})
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2) + "\n")
    from results import record

    record(
        "image_sizes",
        {f"{r['image']}.mib": round(int(r["bytes"]) / 2**20, 1) for r in reports if "bytes" in r},  # type: ignore[call-overload]
    )
    sized = [r for r in reports if "bytes" in r]
    return 0 if all(int(r["bytes"]) <= int(r["target"]) for r in sized) else 1  # type: ignore[call-overload]


if __name__ == "__main__":
    raise SystemExit(main())
