"""What every integration test needs: an example loaded fresh, a real server in a thread,
a live edit, and the mid-request reload a handler performs on itself."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from dynconf import DynamicConfig

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "python"
_LOADED = itertools.count()


def write_greeting(path: Path, greeting: str, limit: int = 10) -> None:
    """Replace the file the way an editor or a renderer does (write, rename)."""
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(f'[app]\ngreeting = "{greeting}"\nlimit = {limit}\n')
    staged.replace(path)


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def load_example(framework: str, config_file: Path) -> ModuleType:
    """``examples/python/<framework>/app.py`` as a fresh module reading ``config_file``."""
    name = f"dynconf_example_{framework}_{next(_LOADED)}"
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / framework / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with environment(APP_CONFIG=str(config_file)):
        spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serve_asgi(app: Any, lifespan: str = "on") -> Iterator[str]:
    """The app under a real uvicorn in a thread (its lifespan run unless ``"off"``: Django's
    ASGI handler has none); stopped and joined after."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan=lifespan, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), 30)
        assert server.started, "uvicorn did not start (its lifespan failed?)"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        assert not thread.is_alive()


@contextlib.contextmanager
def serve_wsgi(app: Any) -> Iterator[str]:
    """The app under werkzeug's threaded WSGI server in a thread; shut down after."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="test-wsgi", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(20)
        assert not thread.is_alive()


def wait_until(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s")
        time.sleep(0.05)


def get(base: str, path: str = "/", **options: Any) -> httpx.Response:
    return httpx.get(base + path, timeout=30, **options)


def greeting_becomes(base: str, expected: str, path: str = "/") -> dict[str, Any]:
    """Poll ``path`` until it answers ``expected`` (the watcher's debounce is ~0.2 s)."""
    seen: dict[str, Any] = {}

    def arrived() -> bool:
        seen.update(get(base, path).json())
        return seen.get("greeting") == expected

    wait_until(arrived)
    return seen


def reload_during(
    read: Callable[[], str], config: DynamicConfig[Any], config_file: Path, new: str
) -> dict[str, Any]:
    """A handler's body: read, make the watcher reload under it, read again."""
    from dynconf.integrations import request_snapshot

    first = read()
    before = config.generation
    write_greeting(config_file, new)
    wait_until(lambda: config.generation > before)
    return {
        "first": first,
        "second": read(),
        "live": config.current().greeting,
        "generation": request_snapshot().generation,
        "live_generation": config.generation,
    }


async def reload_during_async(
    read: Callable[[], str], config: DynamicConfig[Any], config_file: Path, new: str
) -> dict[str, Any]:
    """:func:`reload_during` for an ``async def`` handler (the wait is on a worker thread,
    whose copied context carries the request's snapshot)."""
    import anyio.to_thread

    first = read()
    before = config.generation
    write_greeting(config_file, new)
    await anyio.to_thread.run_sync(lambda: wait_until(lambda: config.generation > before))
    from dynconf.integrations import request_snapshot

    return {
        "first": first,
        "second": read(),
        "live": config.current().greeting,
        "generation": request_snapshot().generation,
        "live_generation": config.generation,
    }


def assert_one_generation(answer: dict[str, Any], old: str, new: str) -> None:
    assert answer["first"] == answer["second"] == old, answer
    assert answer["live"] == new, answer
    assert answer["live_generation"] == answer["generation"] + 1, answer
