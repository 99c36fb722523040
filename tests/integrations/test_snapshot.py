"""The framework-free half every adapter shares: the request snapshot's consistency, its
errors, and the lifecycle's start contract (real files, real reloads, no framework)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from dynconf import ConfigGroup, DynamicConfig
from dynconf.errors import DynconfError
from dynconf.integrations import (
    Lifecycle,
    OutsideRequestError,
    current,
    readiness,
    request_snapshot,
    scoped,
    take_snapshot,
)


class Part(BaseModel):
    step: int


def _member(tmp_path: Path, key: str, step: int) -> tuple[DynamicConfig[Part], Path]:
    path = tmp_path / f"{key}.toml"
    path.write_text(f"[{key}]\nstep = {step}\n")
    # the cache makes each member's install write a file: real I/O between the members'
    # installs of one atomic reload, where a lock-free reader gets the GIL
    config = DynamicConfig(Part, key).file(path).cache(tmp_path / f"{key}.cache.json")
    return config, path


def test_a_group_snapshot_never_mixes_two_sides_of_an_atomic_reload(tmp_path: Path) -> None:
    members = [_member(tmp_path, key, 0) for key in ("a", "b", "c")]
    group = ConfigGroup(*(config for config, _ in members))
    group.init()
    done = threading.Event()

    def reloads() -> None:
        for step in range(1, 60):
            for _, path in members:
                path.write_text(f"[{path.stem}]\nstep = {step}\n")
            group.reload_atomic()
        done.set()

    writer = threading.Thread(target=reloads, name="test-reloads")
    writer.start()
    taken = 0
    try:
        while not done.is_set():
            snapshot = take_snapshot(group)
            steps = {snapshot[key].step for key in ("a", "b", "c")}
            assert len(steps) == 1, f"a torn snapshot: {snapshot.models}"
            assert len(set(snapshot.generations.values())) == 1
            taken += 1
    finally:
        writer.join(60)
    assert taken > 20
    assert take_snapshot(group)["a"].step == 59


def test_a_scope_answers_the_same_model_after_a_reload(tmp_path: Path) -> None:
    config, path = _member(tmp_path, "a", 1)
    config.init()
    with scoped(config) as snapshot:
        first = current(config)
        path.write_text("[a]\nstep = 2\n")
        config.reload()
        assert current(config) is first and first.step == 1
        assert request_snapshot() is snapshot and snapshot.generation == 1
        assert config.current().step == 2  # the live read moved; the scope did not
    with scoped(config):
        assert current(config).step == 2


def test_a_scoped_read_outside_a_request_names_the_live_read(tmp_path: Path) -> None:
    config, _ = _member(tmp_path, "a", 1)
    config.init()
    with pytest.raises(OutsideRequestError, match=r"config\.current\(\)"):
        current(config)
    other, _ = _member(tmp_path, "b", 1)
    other.init()
    with scoped(config), pytest.raises(OutsideRequestError, match="`b` is not in"):
        current(other)


def test_lifecycle_start_fails_on_a_bad_first_load_and_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text('[a]\nstep = "many"\n')
    config = DynamicConfig(Part, "a").file(path)
    lifecycle = Lifecycle(config)
    with pytest.raises(DynconfError):
        lifecycle.start()
    assert not lifecycle.started and not config.watching_now
    assert readiness(config).status == 503
    path.write_text("[a]\nstep = 1\n")
    with lifecycle:
        assert config.watching_now and readiness(config).status == 200
    assert not config.watching_now


def test_readiness_reports_each_group_member_and_turns_503_when_stale(tmp_path: Path) -> None:
    members = [_member(tmp_path, key, 1)[0] for key in ("a", "b")]
    group = ConfigGroup(*members)
    group.init()
    fresh = readiness(group, stale_after=60)
    assert fresh.status == 200
    body = json.loads(fresh.body)
    assert body["generations"] == {"a": 1, "b": 1} and body["status"] == "ok"
    stale = readiness(group, stale_after=0)
    assert stale.status == 503
    assert json.loads(stale.body)["status"] == "degraded"
