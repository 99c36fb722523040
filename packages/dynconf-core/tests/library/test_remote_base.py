"""Store sources written the book's way: subclass RemoteSource, answer (text, Format)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dynconf.config import DynamicConfig
from dynconf.errors import BackendError, DynconfError
from dynconf.plugins import FormatType, default_registry, discover, use_registry
from dynconf.remote import Format, format_enum
from dynconf.stores import AsyncRemoteSource, Fetched, RemoteSource, WatchCapability


class Memory(RemoteSource):
    """A store kept in a dict: what a company's own service would be."""

    def __init__(self, text: str, fmt: object = None) -> None:
        self.text = text
        self.fmt = Format.JSON if fmt is None else fmt
        self.threads: list[str] = []

    def fetch(self) -> tuple[str, Format]:  # type: ignore[override]
        self.threads.append(threading.current_thread().name)
        return self.text, self.fmt

    def describe(self) -> str:
        return "memory"


class AsyncMemory(AsyncRemoteSource):
    def __init__(self, text: str) -> None:
        self.text = text

    async def fetch(self) -> tuple[str, str]:  # type: ignore[override]
        return self.text, "toml"

    def describe(self) -> str:
        return "async memory"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_subclass_answering_text_and_format_loads() -> None:
    source = Memory('{"db": {"port": 5432}}')
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 5432
    assert str(config.source_of("port")).endswith("memory")


def test_the_answer_is_a_fetched_for_every_caller() -> None:
    answer = Memory('{"a": 1}').fetch()
    assert isinstance(answer, Fetched) and answer.format == "json"


def test_a_subclass_satisfies_the_protocol_with_inherited_defaults() -> None:
    source = Memory("{}")
    assert isinstance(source, RemoteSource)
    assert source.capability is WatchCapability.INTERVAL
    source.close()


def test_a_subclass_missing_fetch_cannot_be_built() -> None:
    class Half(RemoteSource):
        def describe(self) -> str:
            return "half"

    with pytest.raises(TypeError, match="fetch"):
        Half()  # type: ignore[abstract]


def test_an_unregistered_format_name_is_refused_by_name() -> None:
    with pytest.raises(BackendError, match=r"no format is named `xml`; use one of: .*json"):
        Memory("<a/>", "xml").fetch()


def test_a_wrong_answer_type_says_what_to_return() -> None:
    class Wrong(RemoteSource):
        def fetch(self) -> str:  # type: ignore[override]
            return "{}"

        def describe(self) -> str:
            return "wrong"

    with pytest.raises(BackendError, match=r"return \(text, Format.JSON\)"):
        Wrong().fetch()


def test_format_members_are_the_registered_formats() -> None:
    assert {member.value for member in Format} == set(default_registry().formats)
    assert Format.JSON == "json" and Format.PROPERTIES == "properties"


def test_a_third_party_format_plugin_shows_up_in_format() -> None:
    registry = discover()
    registry.formats["hocon"] = FormatType("hocon", ("conf",), parse=lambda text, origin: {})
    use_registry(registry)
    try:
        assert format_enum().HOCON == "hocon"  # type: ignore[attr-defined]
        assert Memory("x", format_enum().HOCON).fetch().format == "hocon"  # type: ignore[attr-defined]
    finally:
        use_registry(None)
    assert not hasattr(format_enum(), "HOCON")


def test_the_inherited_interval_watch_delivers_a_change() -> None:
    source = Memory('{"app": {"v": 1}}')
    config = DynamicConfig(None, "app").remote(source)
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.05)
    try:
        source.text = '{"app": {"v": 2}}'
        assert config.changed(timeout=5) is not None
        assert config.current()["v"] == 2
    finally:
        watch.stop()
        watch.join(2)


def test_a_raising_fetch_keeps_the_last_good_document() -> None:
    source = Memory('{"app": {"v": 1}}')
    config = DynamicConfig(None, "app").remote(source)
    config.init()
    source.text = "{not json"
    config.refresh_remote()
    with pytest.raises(DynconfError):
        config.reload()
    assert config.current()["v"] == 1


@pytest.mark.anyio
async def test_an_async_subclass_answering_a_format_name_loads() -> None:
    config = DynamicConfig(None, "app").remote(AsyncMemory("[app]\nv = 3\n"))
    assert (await config.init_async())["v"] == 3


@pytest.mark.anyio
async def test_a_blocking_remote_fetch_runs_on_the_executor_given() -> None:
    source = Memory('{"app": {"v": 1}}')
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="app-remote")
    try:
        config = DynamicConfig(None, "app", executor=executor).remote(source)
        await config.init_async()
        await config.refresh_remote_async()
        assert all(name.startswith("app-remote") for name in source.threads), source.threads
        assert len(source.threads) == 2
    finally:
        executor.shutdown(wait=True)


@pytest.mark.anyio
async def test_watch_async_starts_the_watch_on_the_executor_given(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[app]\nv = 1\n", encoding="utf-8")
    seen: list[str] = []
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="app-watch")
    config = DynamicConfig(None, "app", executor=executor).file(path)
    original = config.watch

    def recording(*args: object) -> object:
        seen.append(threading.current_thread().name)
        return original(*args)  # type: ignore[arg-type]

    config.watch = recording  # type: ignore[method-assign]
    try:
        await config.init_async()
        async with config.watching_async(debounce=0.02):
            pass
        assert seen and seen[0].startswith("app-watch")
    finally:
        executor.shutdown(wait=True)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_fork_after_init_with_a_remote_follower_can_follow_again() -> None:
    import os
    import signal

    source = Memory('{"app": {"v": 1}}')
    config = DynamicConfig(None, "app").remote(source)
    config.init()
    parent_watch = config.watch_remote(interval=0.05)
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        signal.alarm(20)
        try:
            assert config.current()["v"] == 1
            assert not config.watching_now  # the parent's follower did not survive
            follower = config.watch_remote(interval=0.05)
            source.text = '{"app": {"v": 2}}'
            assert config.changed(timeout=10) is not None
            assert config.current()["v"] == 2
            follower.stop()
            follower.join(2)
        except BaseException:
            os._exit(1)
        os._exit(0)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        parent_watch.stop()
        parent_watch.join(2)


def test_refusals_are_spelled_with_constructor_keywords() -> None:
    from dynconf.errors import Refusal
    from dynconf.stores import keyword_spelling

    refusals = [
        Refusal("auth_mount", "{field} names a consul auth method",
                "add {field:auth=kubernetes} or {field:auth=jwt}, or remove it"),
        Refusal("password", "auth userpass needs {field}"),
    ]  # fmt: skip
    said = "; ".join(refusal.render(keyword_spelling) for refusal in refusals)
    assert said == (
        'auth_mount= names a consul auth method; add auth="kubernetes" or auth="jwt", or '
        "remove it; auth userpass needs password="
    )


def test_a_blocking_init_with_an_unfetched_async_source_says_to_await_init_async() -> None:
    config = DynamicConfig(None, "app").remote(AsyncMemory("[app]\nv = 3\n"))
    with pytest.raises(BackendError, match=r"call `await init_async\(\)`"):
        config.init()
    assert config.try_current() is None


def test_the_nine_constructors_are_found_through_the_registry() -> None:
    import importlib

    import dynconf.remote

    names = {
        "Consul": "consul",
        "Vault": "vault",
        "Etcd": "etcd",
        "Redis": "redis",
        "Nats": "nats",
        "S3": "s3",
        "Firestore": "firestore",
        "Git": "git",
        "ConfigServer": "configserver",
    }
    for name, package in names.items():
        found = getattr(dynconf.remote, name)
        assert found is getattr(importlib.import_module(f"dynconf_store_{package}"), name)
    with pytest.raises(AttributeError, match="needs its store package installed"):
        dynconf.remote.Zookeeper  # noqa: B018
