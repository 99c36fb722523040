"""Remove from an installed prefix what the images never use at run time.

    python3 docker/slim-venv.py PREFIX

Run in the build stage right after ``docker/agent-install.sh PREFIX``, with any Python 3.11:

- the installers (``pip``, ``setuptools``): nothing installs into a running image;
- test suites shipped inside distributions, and ``kubernetes.aio`` (the asyncio twin of the
  generated client, which nothing imports);
- botocore's models of every service but those the s3 store calls (``BOTOCORE_SERVICES``),
  and boto3's resource models, which the store does not use;
- debug information of the compiled extensions (``strip --strip-unneeded``, when ``strip``
  is installed);
- third-party sources: each module is kept as its bytecode only (``name.pyc`` beside where
  ``name.py`` was), so no start compiles anything and the image carries one copy of each
  module; the generated Kubernetes API and model classes without their docstrings (the API
  reference, two thirds of their bytes; ``DOCSTRING_FREE``). The workspace's own packages
  (``dynconf*``) keep their sources beside their bytecode, so their tracebacks show the lines.

Bytecode uses ``unchecked-hash`` invalidation: the layers' files carry mtime 0.
"""

from __future__ import annotations

import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

REMOVED_DISTRIBUTIONS = ("pip", "setuptools")
"""Distributions removed whole (their ``.dist-info`` goes too, so the SBOM does not list them)."""
REMOVED_TOP_LEVEL = ("pip", "setuptools", "pkg_resources", "_distutils_hack",
                     "distutils-precedence.pth")  # fmt: skip
BOTOCORE_SERVICES = ("s3", "sts", "sso", "sso-oidc")
"""The s3 store's calls (s3), and the credential providers it can take: web identity (IRSA)
and assume-role through sts, the SSO profile through sso and sso-oidc."""
TEST_DIRECTORIES = ("tests", "test")
DOCSTRING_FREE = ("kubernetes/client/api/", "kubernetes/client/models/")
"""Generated code with no asserts, whose docstrings nothing reads."""
OWN_PREFIX = "dynconf"
"""The workspace's packages, which keep their sources."""


def site_packages(prefix: Path) -> Path:
    return next((prefix / "venv" / "lib").glob("python3*/site-packages"))


def remove_installers(prefix: Path, site: Path) -> None:
    for name in REMOVED_TOP_LEVEL:
        path = site / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for name in REMOVED_DISTRIBUTIONS:
        for info in site.glob(f"{name}-*.dist-info"):
            shutil.rmtree(info)
    for script in (prefix / "venv" / "bin").glob("pip*"):
        script.unlink()


def remove_unused_parts(site: Path) -> None:
    for top in sorted(site.iterdir()):
        if not top.is_dir() or top.name.endswith(".dist-info") or top.name.startswith(OWN_PREFIX):
            continue
        for directory in sorted(top.rglob("*"), reverse=True):
            if directory.is_dir() and directory.name in TEST_DIRECTORIES:
                shutil.rmtree(directory)
    shutil.rmtree(site / "kubernetes" / "aio", ignore_errors=True)
    data = site / "botocore" / "data"
    if data.is_dir():
        for entry in data.iterdir():
            if entry.is_dir() and entry.name not in BOTOCORE_SERVICES:
                shutil.rmtree(entry)
    shutil.rmtree(site / "boto3" / "data", ignore_errors=True)


def strip_extensions(site: Path) -> None:
    strip = shutil.which("strip")
    if strip is None:
        return
    for library in sorted(site.rglob("*.so*")):
        if library.is_file() and not library.is_symlink():
            subprocess.run([strip, "--strip-unneeded", str(library)], check=True)


def sourceless_third_party(site: Path) -> None:
    """Every third-party module as ``name.pyc`` in its source's place, the source removed."""
    for top in sorted(site.iterdir()):
        if top.name.startswith(OWN_PREFIX) or top.name.endswith(".dist-info"):
            continue
        sources = [top] if top.suffix == ".py" else sorted(top.rglob("*.py"))
        for source in sources:
            relative = source.relative_to(site).as_posix()
            py_compile.compile(
                str(source),
                cfile=str(source.with_suffix(".pyc")),
                dfile=str(source),
                doraise=True,
                optimize=2 if relative.startswith(DOCSTRING_FREE) else -1,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            source.unlink()
        if top.is_dir():
            for cache in sorted(top.rglob("__pycache__")):
                shutil.rmtree(cache)
    shutil.rmtree(site / "__pycache__", ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    prefix = Path(argv[0])
    site = site_packages(prefix)
    remove_installers(prefix, site)
    remove_unused_parts(site)
    strip_extensions(site)
    sourceless_third_party(site)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
