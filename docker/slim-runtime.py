"""Trim a copy of the distroless Python root to what the images run, and compile its stdlib.

    python3.11 docker/slim-runtime.py ROOT

Run in the build stage over ``COPY --from=gcr.io/distroless/python3-debian12 / ROOT``, with the
same bookworm Python 3.11; the final stage is ``FROM scratch`` with ROOT copied in:

- glibc's ``gconv`` character-set modules: Python has its own codecs, and git's UTF-8 and
  ASCII are built into glibc;
- the parts of the standard library no program here imports (``UNUSED``: the test suite and
  its extension modules, ``pydoc``'s topics, the interactive and GUI modules, ``lib2to3``,
  ``ensurepip``);
- the standard library as bytecode only (``name.pyc`` where ``name.py`` was, ``unchecked-hash``
  as the layers' mtimes are 0): distroless ships sources without bytecode, so otherwise each
  start would compile what it imports, on a read-only root where nothing is kept.
"""

from __future__ import annotations

import py_compile
import shutil
import sys
from pathlib import Path

GCONV = "usr/lib/x86_64-linux-gnu/gconv"
STDLIB = "usr/lib/python3.11"
UNUSED = ("test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "pydoc_data",
          "turtle.py", "antigravity.py", "this.py", "__hello__.py", "__phello__")  # fmt: skip
UNUSED_EXTENSIONS = ("_test", "_ctypes_test", "_xxtestfuzz", "xxlimited", "_xxsubinterpreters")


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def trim(root: Path) -> None:
    remove(root / GCONV)
    stdlib = root / STDLIB
    for name in UNUSED:
        remove(stdlib / name)
    for extension in (stdlib / "lib-dynload").glob("*.so"):
        if extension.name.startswith(UNUSED_EXTENSIONS):
            extension.unlink()


def sourceless_stdlib(root: Path) -> None:
    stdlib = root / STDLIB
    for cache in sorted(stdlib.rglob("__pycache__")):
        shutil.rmtree(cache)
    for source in sorted(stdlib.rglob("*.py")):
        if source.is_symlink() or "site-packages" in source.parts:
            continue  # sitecustomize.py links into /etc; dist-packages are not ours to change
        py_compile.compile(
            str(source),
            cfile=str(source.with_suffix(".pyc")),
            dfile="/" + source.relative_to(root).as_posix(),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        source.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: slim-runtime.py ROOT", file=sys.stderr)
        return 2
    root = Path(argv[0])
    trim(root)
    sourceless_stdlib(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
