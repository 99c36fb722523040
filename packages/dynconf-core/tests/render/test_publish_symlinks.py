"""Symlink swaps under a published file: nothing outside the root is written, read or deleted.

Whoever can write inside the root (a tenant's pod writing its own volume) may replace any
component — a directory between the root and the file, the file, its meta file, its history
directory, a history entry — with a symlink to a directory outside, at any moment between two
publishes or between a publish and the removal. Each case plants such a swap, then publishes
(or removes) again, and compares the outside directory byte for byte with what it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dynconf.errors import IoError
from dynconf.publish import MetaInfo, publish_file, read_published, remove_published_file

Swap = Callable[[Path, Path], None]


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry under ``directory``: file bytes, or where a symlink points."""
    seen: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        if path.is_symlink():
            seen[name] = f"-> {os.readlink(path)}"
        elif path.is_file():
            seen[name] = path.read_bytes()
        else:
            seen[name] = "dir"
    return seen


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """A root with ``conf/app.yaml`` published (meta and history on) and an outside dir
    holding files under every name a publish or a removal would touch."""
    root, outside = tmp_path / "volume", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    for name in ("app.yaml", ".app.yaml.meta", "1-000000000000.yaml", "precious"):
        (outside / name).write_bytes(b"not yours: " + name.encode())
    out = root / "conf" / "app.yaml"
    publish_file(out, b"one\n", root=root, history=2, meta=MetaInfo(), now=1)
    publish_file(out, b"two\n", root=root, history=2, meta=MetaInfo(), now=2)
    return root, outside


def swap_directory(root: Path, outside: Path) -> None:
    conf = root / "conf"
    conf.rename(root / "conf.old")
    conf.symlink_to(outside)


def swap_file(root: Path, outside: Path) -> None:
    out = root / "conf" / "app.yaml"
    out.unlink()
    out.symlink_to(outside / "app.yaml")


def swap_meta(root: Path, outside: Path) -> None:
    meta = root / "conf" / ".app.yaml.meta"
    meta.unlink()
    meta.symlink_to(outside / ".app.yaml.meta")


def swap_history(root: Path, outside: Path) -> None:
    history = root / "conf" / ".app.yaml.history"
    history.rename(root / "conf" / ".old-history")
    history.symlink_to(outside)


def swap_history_entry(root: Path, outside: Path) -> None:
    history = root / "conf" / ".app.yaml.history"
    for entry in history.iterdir():
        entry.unlink()
        entry.symlink_to(outside / "precious")


SWAPS = {
    "directory": swap_directory,
    "file": swap_file,
    "meta": swap_meta,
    "history": swap_history,
    "history-entry": swap_history_entry,
}


@pytest.mark.parametrize("swap", SWAPS.values(), ids=SWAPS.keys())
def test_a_republish_after_a_symlink_swap_never_touches_the_outside(
    world: tuple[Path, Path], swap: Swap
) -> None:
    root, outside = world
    before = snapshot(outside)
    swap(root, outside)
    out = root / "conf" / "app.yaml"
    refusals = []
    for now in (3, 4, 5):  # past the history limit, so pruning runs too
        try:
            publish_file(out, f"{now}\n".encode(), root=root, history=2, meta=MetaInfo(), now=now)
        except IoError as error:
            refusals.append(str(error))
    assert all("symlink" in reason and "\n" not in reason for reason in refusals)
    assert snapshot(outside) == before


@pytest.mark.parametrize("swap", [swap_directory, swap_history], ids=["directory", "history"])
def test_a_symlinked_directory_is_refused_with_one_line_naming_it(
    world: tuple[Path, Path], swap: Swap
) -> None:
    root, outside = world
    swap(root, outside)
    with pytest.raises(IoError) as caught:
        publish_file(root / "conf" / "app.yaml", b"three\n", root=root, history=2, now=3)
    message = str(caught.value)
    assert "is a symlink or not a directory" in message
    assert "\n" not in message


def test_a_symlinked_file_is_replaced_not_followed(world: tuple[Path, Path]) -> None:
    root, outside = world
    swap_file(root, outside)
    out = root / "conf" / "app.yaml"
    assert read_published(out, root=root) is None  # a symlink is not what was published
    publish_file(out, b"three\n", root=root, history=2, now=3)
    assert not out.is_symlink()
    assert out.read_bytes() == b"three\n"
    # the symlink's target was never copied into history
    history = root / "conf" / ".app.yaml.history"
    assert all(b"not yours" not in entry.read_bytes() for entry in history.iterdir())


@pytest.mark.parametrize("swap", SWAPS.values(), ids=SWAPS.keys())
def test_removal_after_a_symlink_swap_never_deletes_outside(
    world: tuple[Path, Path], swap: Swap
) -> None:
    root, outside = world
    before = snapshot(outside)
    swap(root, outside)
    remove_published_file(root / "conf" / "app.yaml", root=root)
    assert snapshot(outside) == before


def test_removal_deletes_what_was_published_and_the_emptied_directories(
    world: tuple[Path, Path],
) -> None:
    root, _outside = world
    remove_published_file(root / "conf" / "app.yaml", root=root)
    assert list(root.iterdir()) == []


def test_directories_below_the_root_are_created(tmp_path: Path) -> None:
    publish_file(tmp_path / "a" / "b" / "c.json", b"{}", root=tmp_path)
    assert (tmp_path / "a" / "b" / "c.json").read_bytes() == b"{}"


def test_a_path_outside_the_root_is_refused(tmp_path: Path) -> None:
    from dynconf.errors import BackendError

    with pytest.raises(BackendError, match="not inside"):
        publish_file(tmp_path / "elsewhere.json", b"{}", root=tmp_path / "volume")
