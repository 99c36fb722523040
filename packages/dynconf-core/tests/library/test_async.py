"""asyncio as a first-class citizen: streams, events, async hooks, watching, running.

Every test runs under a real asyncio loop (anyio's pytest plugin) against real files; the
watch tests edit the file on disk and await what the watcher thread delivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import typing
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dynconf.config import DynamicConfig, ReloadReason
from dynconf.errors import ParseError
from dynconf.notify import Backpressure, Reloaded, ReloadFailed

pytestmark = pytest.mark.anyio

WAIT = 10.0


class Db(BaseModel):
    host: str
    port: int


class App(BaseModel):
    name: str
    db: Db


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def save(path: Path, text: str) -> None:
    """Replace the file by rename, as an editor or the agent does."""
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(text, encoding="utf-8")
    scratch.replace(path)


def document(port: int, name: str = "billing") -> str:
    return f'[app]\nname = "{name}"\n[app.db]\nhost = "db"\nport = {port}\n'


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    save(path, document(5432))
    return path


@pytest.fixture
def config(config_file: Path) -> DynamicConfig[App]:
    return DynamicConfig(App, "app").file(config_file)


async def test_changes_yields_every_install_in_order(
    config: DynamicConfig[App], config_file: Path
) -> None:
    config.init()
    stream = config.changes()
    for port in (1, 2, 3):
        save(config_file, document(port))
        await anyio.to_thread.run_sync(config.reload)
    with anyio.fail_after(WAIT):
        seen = [(await anext(stream)).db.port for _ in range(3)]
    assert seen == [1, 2, 3]


async def test_changes_from_a_reload_thread_never_waits_for_the_loop(
    config: DynamicConfig[App], config_file: Path
) -> None:
    """A consumer that does not read yet cannot slow the reloading thread: 200 reloads
    finish while the loop is blocked, and the stream then holds the newest ``buffer``."""
    config.init()
    stream = config.changes(buffer=4)
    done = threading.Event()

    def reload_many() -> None:
        for port in range(1, 201):
            config.set_override("db.port", port)
            config.reload()
        done.set()

    worker = threading.Thread(target=reload_many)
    worker.start()
    worker.join(WAIT)  # the loop is blocked here on purpose: nothing on it runs
    assert done.is_set()
    with anyio.fail_after(WAIT):
        seen = [(await anext(stream)).db.port for _ in range(4)]
    assert seen == [197, 198, 199, 200]


async def test_changes_ends_its_subscription_when_closed(config: DynamicConfig[App]) -> None:
    config.init()
    stream = config.changes()
    assert config._models
    await stream.aclose()
    assert not config._models


async def test_events_report_installs_and_refusals_without_values(
    config: DynamicConfig[App], config_file: Path
) -> None:
    config.init()
    events = config.events()
    save(config_file, document(6543))
    await anyio.to_thread.run_sync(config.reload)
    save(config_file, "[app\nbroken = ")
    with pytest.raises(ParseError):
        await anyio.to_thread.run_sync(config.reload)
    with pytest.raises(ParseError):
        await anyio.to_thread.run_sync(config.reload)
    with anyio.fail_after(WAIT):
        got = [await anext(events) for _ in range(3)]
    reloaded, first, second = got
    assert isinstance(reloaded, Reloaded)
    assert (reloaded.generation, reloaded.reason, reloaded.changed) == (2, "manual", ("db.port",))
    assert isinstance(first, ReloadFailed) and isinstance(second, ReloadFailed)
    assert (first.kind, first.generation, first.consecutive) == ("parse", 2, 1)
    assert second.consecutive == 2
    assert "6543" not in repr(got) and "broken" not in repr(got)


async def test_changed_async_awaits_the_next_install_and_times_out_with_none(
    config: DynamicConfig[App],
) -> None:
    config.init()
    assert await config.changed_async(timeout=0.05) is None

    async def later() -> None:
        await anyio.sleep(0.05)
        config.set_override("db.port", 7000)
        await anyio.to_thread.run_sync(config.reload)

    async with anyio.create_task_group() as group:
        group.start_soon(later)
        with anyio.fail_after(WAIT):
            model = await config.changed_async(timeout=WAIT)
    assert model is not None and model.db.port == 7000


async def test_on_reload_async_runs_on_the_registering_loop(config: DynamicConfig[App]) -> None:
    loop = asyncio.get_running_loop()
    ran: list[tuple[int | None, int, bool]] = []
    arrived = asyncio.Event()

    @config.on_reload_async
    async def hook(old: App | None, new: App) -> None:
        ran.append(
            (None if old is None else old.db.port, new.db.port, asyncio.get_running_loop() is loop)
        )
        arrived.set()

    await anyio.to_thread.run_sync(config.init)  # installed on a worker thread
    with anyio.fail_after(WAIT):
        await arrived.wait()
    assert ran == [(None, 5432, True)]


async def _drive(
    config: DynamicConfig[App], policy: Backpressure, installs: int
) -> list[tuple[int, int]]:
    """Register a slow hook under ``policy``, install ``installs`` times while its first
    call is still running, and return what the hook saw (old port, new port)."""
    config.init()
    seen: list[tuple[int, int]] = []
    release = asyncio.Event()
    started = asyncio.Event()
    finished = asyncio.Event()

    async def hook(old: App | None, new: App) -> None:
        started.set()
        await release.wait()
        seen.append((old.db.port if old else 0, new.db.port))
        if new.db.port == 100 + installs - 1:
            finished.set()

    config.on_reload_async(hook, backpressure=policy)
    for port in range(100, 100 + installs):
        config.set_override("db.port", port)
        await anyio.to_thread.run_sync(config.reload)
        if port == 100:
            with anyio.fail_after(WAIT):
                await started.wait()
    await asyncio.sleep(0)  # let the last call_soon_threadsafe land
    release.set()
    with anyio.fail_after(WAIT):
        await finished.wait()
    await asyncio.sleep(0.01)
    return seen


async def test_latest_backpressure_runs_the_newest_install_after_the_running_call(
    config: DynamicConfig[App],
) -> None:
    seen = await _drive(config, Backpressure.LATEST, 4)
    assert seen == [(5432, 100), (100, 103)]


async def test_serial_backpressure_runs_every_install_in_order(config: DynamicConfig[App]) -> None:
    seen = await _drive(config, Backpressure.SERIAL, 4)
    assert seen == [(5432, 100), (100, 101), (101, 102), (102, 103)]


async def test_cancel_previous_backpressure_cancels_the_running_call(
    config: DynamicConfig[App],
) -> None:
    seen = await _drive(config, Backpressure.CANCEL_PREVIOUS, 3)
    assert seen == [(101, 102)]


async def test_async_hook_exception_goes_to_the_loop_handler_and_the_hook_stays(
    config: DynamicConfig[App],
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[BaseException] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["exception"]))
    calls = asyncio.Queue[int]()

    async def hook(_old: App | None, new: App) -> None:
        await calls.put(new.db.port)
        if new.db.port == 5432:
            raise RuntimeError("boom")

    try:
        config.on_reload_async(hook)
        config.init()
        config.set_override("db.port", 1)
        await anyio.to_thread.run_sync(config.reload)
        with anyio.fail_after(WAIT):
            assert [await calls.get(), await calls.get()] == [5432, 1]
        assert [type(e) for e in reported] == [RuntimeError]
    finally:
        loop.set_exception_handler(None)


async def test_on_change_async_fires_only_when_a_named_path_moved(
    config: DynamicConfig[App],
) -> None:
    ports: asyncio.Queue[int] = asyncio.Queue()

    @config.on_change_async("db.port")
    async def hook(_old: App | None, new: App) -> None:
        await ports.put(new.db.port)

    config.init()
    config.set_override("name", "renamed")
    config.reload()
    config.set_override("db.port", 1)
    config.reload()
    with anyio.fail_after(WAIT):
        assert [await ports.get(), await ports.get()] == [5432, 1]
    assert ports.empty()


def test_on_reload_async_outside_a_loop_says_it_needs_one(config: DynamicConfig[App]) -> None:
    async def hook(_old: Any, _new: Any) -> None: ...

    with pytest.raises(RuntimeError, match="needs a running asyncio event loop"):
        config.on_reload_async(hook)


async def test_on_reload_async_refuses_a_plain_function(config: DynamicConfig[App]) -> None:
    with pytest.raises(TypeError, match="coroutine function"):
        config.on_reload_async(typing.cast(Any, lambda old, new: None))


def test_a_wrong_backpressure_lists_the_policies() -> None:
    with pytest.raises(ValueError, match="'latest', 'serial', 'every', 'cancel_previous'"):
        Backpressure("newest")


async def test_watching_async_follows_a_real_file_edit(
    config: DynamicConfig[App], config_file: Path
) -> None:
    await config.init_async()
    stream = config.changes()
    async with config.watching_async(debounce=0.02) as watch:
        assert watch.running
        save(config_file, document(6543))
        with anyio.fail_after(WAIT):
            model = await anext(stream)
    assert model.db.port == 6543
    assert config.status().last_reason == ReloadReason.FILE_CHANGED.value
    assert not watch.running


async def test_running_async_inits_watches_and_stops(
    config: DynamicConfig[App], config_file: Path
) -> None:
    async with config.running_async(debounce=0.02) as first:
        assert first.db.port == 5432
        assert config.watching_now
        stream = config.changes()
        save(config_file, document(6000))
        with anyio.fail_after(WAIT):
            assert (await anext(stream)).db.port == 6000
    assert not config.watching_now


def test_running_yields_the_first_model_and_follows_the_file(
    config: DynamicConfig[App], config_file: Path
) -> None:
    with config.running(debounce=0.02) as first:
        assert first.db.port == 5432
        save(config_file, document(6001))
        assert config.changed(timeout=WAIT) is not None
        assert config.current().db.port == 6001
    assert not config.watching_now


def test_running_async_is_an_asgi_lifespan(config: DynamicConfig[App], config_file: Path) -> None:
    """A real Starlette app served by uvicorn, whose lifespan is ``running_async``: a live
    edit is read back through HTTP, and shutting the server down stops the watch."""
    import json
    import socket
    import time
    import urllib.request

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with config.running_async(debounce=0.02):
            yield

    async def port(_request: Request) -> JSONResponse:
        return JSONResponse({"port": config.current().db.port, "generation": config.generation})

    app = Starlette(routes=[Route("/port", port)], lifespan=lifespan)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, port=free, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def get() -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{free}/port", timeout=5) as response:
            return json.loads(response.read())

    try:
        deadline = time.monotonic() + WAIT
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        assert get() == {"port": 5432, "generation": 1}
        assert config.watching_now
        save(config_file, document(6543))
        assert config.changed(timeout=WAIT) is not None
        assert get() == {"port": 6543, "generation": 2}
    finally:
        server.should_exit = True
        thread.join(WAIT)
    assert not config.watching_now
