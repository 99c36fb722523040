"""The embedded file store keeps the store contract."""

from __future__ import annotations

import threading
from pathlib import Path

from dynconf.file_store import FILE_STORE
from dynconf.stores import ABSENT, Fetched, StoreSpec, WatchCapability


def spec(key: str, endpoint: str = "") -> StoreSpec:
    return StoreSpec(source="file", endpoint=endpoint, key=key)


def test_fetch_reads_text_format_and_revision(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("app:\n  a: 1\n", encoding="utf-8")
    answer = FILE_STORE.build(spec(str(path))).fetch()
    assert isinstance(answer, Fetched)
    assert answer.format == "yaml" and answer.text.startswith("app:")
    assert answer.revision and len(answer.revision) == 12
    assert "a: 1" not in repr(answer)


def test_missing_file_is_absent(tmp_path: Path) -> None:
    assert FILE_STORE.build(spec(str(tmp_path / "nope.json"))).fetch() is ABSENT


def test_validate_refuses_foreign_flags_and_traversal(tmp_path: Path) -> None:
    refusals = FILE_STORE.validate(
        StoreSpec.from_inputs(
            source="file", endpoint=str(tmp_path), key="../etc/passwd.json", ref="main"
        )
    )
    assert any("--ref is git's" in r for r in refusals)
    assert any("without `..`" in r for r in refusals)
    assert FILE_STORE.validate(spec("noext")) and not FILE_STORE.validate(spec("a.toml"))


def test_changes_primes_silently_then_yields_edits_and_absent(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('{"v": 0}', encoding="utf-8")
    source = FILE_STORE.build(spec(str(path)))
    assert source.capability is WatchCapability.PUSH
    stop = threading.Event()
    seen: list[object] = []
    delivered = threading.Event()

    def consume() -> None:
        for answer in source.changes(0.02, stop.is_set):
            seen.append(answer)
            delivered.set()
            if answer is ABSENT:
                stop.set()

    thread = threading.Thread(target=consume)
    thread.start()
    # The generator registers its watch when the thread first iterates; keep editing until
    # an edit lands after registration (bounded), then remove the file.
    for value in range(1, 50):
        path.write_text(f'{{"v": {value}}}', encoding="utf-8")
        if delivered.wait(0.1):
            break
    path.unlink()
    thread.join(5)
    stop.set()
    assert isinstance(seen[0], Fetched) and seen[0].text != '{"v": 0}'
    assert seen[-1] is ABSENT
