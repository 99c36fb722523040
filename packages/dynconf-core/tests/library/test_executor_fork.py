"""Where the blocking half runs (executor=), and a fork after init() (gunicorn --preload)."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel

from dynconf.concurrency import set_executor
from dynconf.config import DynamicConfig
from dynconf.group import ConfigGroup


class Db(BaseModel):
    port: int


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.toml"
    path.write_text("[db]\nport = 1\n", encoding="utf-8")
    return path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pool(name: str) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)


@pytest.mark.anyio
async def test_the_blocking_half_runs_on_the_executor_given(config_file: Path) -> None:
    threads: list[str] = []
    config = DynamicConfig(Db, "db", executor=pool("app-config")).file(config_file)
    config.on_reload(lambda _old, _new: threads.append(threading.current_thread().name))
    await config.init_async()
    await config.reload_async()
    group = ConfigGroup(config, executor=pool("app-group"))
    await group.reload_atomic_async()
    assert [name.split("_")[0] for name in threads] == ["app-config", "app-config", "app-group"]


@pytest.mark.anyio
async def test_set_executor_is_the_process_default(config_file: Path) -> None:
    threads: list[str] = []
    config = DynamicConfig(Db, "db").file(config_file)
    config.on_reload(lambda _old, _new: threads.append(threading.current_thread().name))
    set_executor(pool("process-default"))
    try:
        await config.init_async()
    finally:
        set_executor(None)
    await config.reload_async()
    assert threads[0].startswith("process-default")
    assert not threads[1].startswith("process-default")


def _in_child(check: object) -> int:
    """Run ``check`` in a forked child with a deadlock alarm; its exit status."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        signal.alarm(20)
        try:
            check()  # type: ignore[operator]
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_fork_after_init_keeps_the_snapshot_and_can_watch_again(config_file: Path) -> None:
    config = DynamicConfig(Db, "db").file(config_file)
    config.init()
    watch = config.watch(debounce=0.02)

    def child() -> None:
        assert config.current().port == 1
        assert not config.watching_now  # the parent's watcher thread did not survive
        with config.watching(debounce=0.02):
            scratch = config_file.with_name(".app.toml.tmp")
            scratch.write_text("[db]\nport = 2\n", encoding="utf-8")
            scratch.replace(config_file)
            assert config.changed(timeout=10) is not None
        assert config.current().port == 2

    try:
        assert _in_child(child) == 0
    finally:
        watch.stop()
        watch.join(2)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_fork_while_another_thread_holds_the_reload_lock_does_not_deadlock(
    config_file: Path,
) -> None:
    config = DynamicConfig(Db, "db").file(config_file)
    config.init()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with config._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        started = time.monotonic()
        assert _in_child(config.reload) == 0
        assert time.monotonic() - started < 15
    finally:
        release.set()
        holder.join(5)
