"""Atomic publishing, history and meta files."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynconf import publish as publish_module
from dynconf.errors import BackendError, IoError
from dynconf.publish import (
    MetaInfo,
    history_dir,
    meta_path,
    publish_file,
    read_published,
    safe_child,
    write_meta,
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_publish_writes_the_bytes(tmp_path: Path) -> None:
    target = tmp_path / "app.yaml"
    published = publish_file(target, b"a: 1\n")
    assert target.read_bytes() == b"a: 1\n"
    assert published.fingerprint == "sha256:" + hashlib.sha256(b"a: 1\n").hexdigest()
    assert published.size == 5
    assert leftovers(tmp_path) == []


def test_rename_moves_a_complete_scratch_file_with_its_final_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "app.yaml"
    target.write_bytes(b"old\n")
    seen: list[tuple[str, str, bytes, int, bytes]] = []
    real_replace = os.replace

    def spying_replace(src: str, dst: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
        # renameat within one directory descriptor: the target's own directory
        assert os.path.samestat(os.fstat(src_dir_fd), os.stat(tmp_path))
        assert src_dir_fd == dst_dir_fd
        source, destination = tmp_path / src, tmp_path / dst
        seen.append((src, dst, source.read_bytes(), mode_of(source), destination.read_bytes()))
        real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "replace", spying_replace)
    publish_file(target, b"new content\n", mode=0o640)
    [(source, destination, scratch_bytes, scratch_mode, target_before)] = seen
    assert destination == target.name
    assert source != target.name
    assert "/" not in source
    assert scratch_bytes == b"new content\n"
    assert scratch_mode == 0o640
    assert target_before == b"old\n"
    assert mode_of(target) == 0o640


def test_without_a_mode_the_umask_decides(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "app.yaml"
    publish_file(target, b"x")
    assert mode_of(target) == 0o644


def test_mode_past_0777_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="past 0777"):
        publish_file(tmp_path / "a.json", b"{}", mode=0o4755)


def test_planted_symlink_at_the_scratch_name_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    planted = tmp_path / ".app.yaml.planted.tmp"
    planted.symlink_to(victim)
    names = iter([planted.name, ".app.yaml.fresh.tmp"])
    monkeypatch.setattr(publish_module, "_scratch_name", lambda _name: next(names))
    publish_file(tmp_path / "app.yaml", b"data", mode=0o600)
    assert victim.read_bytes() == b"precious"
    assert planted.is_symlink()
    assert (tmp_path / "app.yaml").read_bytes() == b"data"


def test_only_planted_scratch_names_fail_without_touching_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    planted = tmp_path / ".app.yaml.planted.tmp"
    planted.symlink_to(victim)
    monkeypatch.setattr(publish_module, "_scratch_name", lambda _name: planted.name)
    with pytest.raises(IoError, match="already exists"):
        publish_file(tmp_path / "app.yaml", b"data")
    assert victim.read_bytes() == b"precious"
    assert not (tmp_path / "app.yaml").exists()


def test_failed_rename_removes_the_scratch_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "app.yaml"
    target.write_bytes(b"last good\n")

    def failing_replace(src: str, dst: str, **_dir_fds: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(IoError, match="the last published file is unchanged"):
        publish_file(target, b"new\n")
    assert target.read_bytes() == b"last good\n"
    assert leftovers(tmp_path) == []


def test_missing_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(IoError) as caught:
        publish_file(missing / "app.yaml", b"x")
    assert f"the directory {missing} does not exist" in str(caught.value)


def test_history_keeps_the_replaced_generation_with_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "app.yaml"
    publish_file(target, b"one\n", mode=0o600, history=3, now=100)
    assert not history_dir(target).exists()
    published = publish_file(target, b"two\n", mode=0o644, history=3, now=101)
    digest = hashlib.sha256(b"one\n").hexdigest()[:12]
    entry = tmp_path / ".app.yaml.history" / f"101-{digest}.yaml"
    assert published.history_entry == entry
    assert entry.read_bytes() == b"one\n"
    assert mode_of(entry) == 0o600
    assert mode_of(target) == 0o644


def test_history_prunes_the_oldest_by_name(tmp_path: Path) -> None:
    target = tmp_path / "app.yaml"
    for second, body in enumerate([b"a", b"b", b"c", b"d", b"e"], start=100):
        publish_file(target, body, history=2, now=second)
    kept = sorted(p.name for p in history_dir(target).iterdir())
    assert [name.split("-")[0] for name in kept] == ["103", "104"]
    assert [(history_dir(target) / name).read_bytes() for name in kept] == [b"c", b"d"]


def test_an_unchanged_file_adds_no_history(tmp_path: Path) -> None:
    target = tmp_path / "app.yaml"
    publish_file(target, b"same", history=2, now=1)
    publish_file(target, b"same", history=2, now=2)
    assert not history_dir(target).exists()


def test_history_past_ten_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="0 to 10"):
        publish_file(tmp_path / "a.yaml", b"x", history=11)


def test_history_entry_without_an_extension(tmp_path: Path) -> None:
    target = tmp_path / "config"
    publish_file(target, b"one", history=1, now=7)
    published = publish_file(target, b"two", history=1, now=8)
    assert published.history_entry is not None
    assert published.history_entry.name == f"8-{hashlib.sha256(b'one').hexdigest()[:12]}"


def test_meta_file_contents_and_mode(tmp_path: Path) -> None:
    target = tmp_path / "app.yaml"
    published = publish_file(
        target, b"a: 1\n", mode=0o640, meta=MetaInfo(revision="42", rendered_at=1700000000)
    )
    meta = tmp_path / ".app.yaml.meta"
    assert published.meta_file == meta == meta_path(target)
    fingerprint = "sha256:" + hashlib.sha256(b"a: 1\n").hexdigest()
    assert meta.read_text(encoding="utf-8") == (
        "{\n"
        f'  "fingerprint": "{fingerprint}",\n'
        '  "revision": "42",\n'
        '  "rendered_at": 1700000000\n'
        "}\n"
    )
    assert mode_of(meta) == 0o640


def test_meta_without_revision_is_null_and_time_defaults_to_now(tmp_path: Path) -> None:
    target = tmp_path / "app.json"
    write_meta(target, "sha256:00", MetaInfo(), mode=None)
    body = json.loads(meta_path(target).read_text(encoding="utf-8"))
    assert body["revision"] is None
    assert isinstance(body["rendered_at"], int)
    assert body["rendered_at"] > 1_600_000_000


def test_read_published(tmp_path: Path) -> None:
    target = tmp_path / "app.yaml"
    assert read_published(target) is None
    target.mkdir()
    assert read_published(target) is None
    target.rmdir()
    target.write_bytes(b"x")
    assert read_published(target) == b"x"


@pytest.mark.parametrize("name", ["", ".", "/etc/passwd", "../x", "a/../../x", "a/..", "a\x00b"])
def test_safe_child_refuses_names_that_leave_the_base(tmp_path: Path, name: str) -> None:
    with pytest.raises(BackendError):
        safe_child(tmp_path, name)


def test_safe_child_refuses_a_symlink_out_of_the_base(tmp_path: Path) -> None:
    base = tmp_path / "volume"
    base.mkdir()
    (base / "escape").symlink_to(tmp_path)
    with pytest.raises(BackendError, match="through a symlink"):
        safe_child(base, "escape/x.yaml")


def test_safe_child_accepts_a_nested_relative_name(tmp_path: Path) -> None:
    assert safe_child(tmp_path, "conf/app.yaml") == tmp_path / "conf" / "app.yaml"
