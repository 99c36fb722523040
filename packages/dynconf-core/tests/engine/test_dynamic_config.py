"""DynamicConfig: install, last-known-good, generation, hooks, diagnostics, watching."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from dynconf.config import DynamicConfig, ReloadReason, changed_paths
from dynconf.document import digest, fingerprint
from dynconf.errors import InvalidError, NotInitialisedError, ParseError
from dynconf.models import Values


class Db(BaseModel):
    host: str
    port: int
    password: SecretStr = SecretStr("")


class App(BaseModel):
    name: str
    db: Db


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def app_toml(tmp_path: Path) -> Path:
    return write(
        tmp_path / "config.toml",
        '[app]\nname = "billing"\n[app.db]\nhost = "db"\nport = 5432\npassword = "hunter2"\n',
    )


def test_current_before_init_raises_not_initialised() -> None:
    config = DynamicConfig(App, "app")
    with pytest.raises(NotInitialisedError):
        config.current()
    assert config.try_current() is None


def test_live_before_init_raises_not_initialised_on_first_attribute() -> None:
    config = DynamicConfig(App, "app")
    with pytest.raises(NotInitialisedError, match=r"call init\(\) before reading config.live.db"):
        _ = config.live.db
    assert not config.live
    assert not hasattr(config.live, "__deepcopy__")


def test_live_is_the_installed_model_and_follows_every_install(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    first = config.init()
    assert config.live is first
    write(app_toml, app_toml.read_text(encoding="utf-8").replace("5432", "6543"))
    second = config.reload()
    assert config.live is second and config.live.db.port == 6543
    write(app_toml, "[app\n")
    assert not config.try_reload()
    assert config.live is second  # a refused reload keeps the last good model


def test_secret_paths_are_worked_out_once_per_model_and_handed_out_as_copies() -> None:
    from dynconf.models import secret_paths

    first = secret_paths(App)
    first.append("not.a.secret")
    assert secret_paths(App) == ["db.password"]
    assert DynamicConfig(App, "app").secret_paths == frozenset({"db.password"})


def test_init_installs_generation_one_and_current_is_the_model(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    model = config.init()
    assert config.current() is model
    assert model.db.port == 5432
    assert config.generation == 1
    assert config.status().last_reason == "initial"


def test_refused_reload_keeps_previous_snapshot_and_generation(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    first = config.init()
    write(app_toml, '[app]\nname = "billing"\n[app.db]\nhost = "db"\nport = "not-a-port"\n')
    with pytest.raises(InvalidError) as caught:
        config.reload()
    assert caught.value.path == "db.port"
    assert "not-a-port" not in str(caught.value)
    assert config.current() is first
    assert config.generation == 1
    status = config.status()
    assert status.consecutive_failures == 1
    assert status.last_failure is not None and status.last_failure.kind == "invalid"


def test_identical_reload_still_installs_and_bumps_generation(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    config.reload()
    assert config.generation == 2
    assert config.status().last_reason == "manual"


def test_parse_error_is_refused_without_document_text(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    write(app_toml, "[app\nsecret-ish = hunter2\n")
    with pytest.raises(ParseError) as caught:
        config.reload()
    assert "hunter2" not in str(caught.value)
    assert config.current().name == "billing"


def test_fingerprint_is_stable_across_reloads(app_toml: Path) -> None:
    config = DynamicConfig(None, "app").file(app_toml)
    config.init()
    fp = config.fingerprint()
    assert fp.startswith("sha256:") and len(fp) == len("sha256:") + 64
    config.reload()
    assert config.fingerprint() == fp


def test_untyped_model_is_values_with_dotted_lookup(app_toml: Path) -> None:
    config = DynamicConfig(None, "app").file(app_toml)
    values = config.init()
    assert isinstance(values, Values)
    assert values["db.port"] == 5432
    assert "hunter2" not in repr(values)


def test_dataclass_model_refuses_unknown_keys(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Small:
        name: str

    path = write(tmp_path / "c.toml", '[app]\nname = "x"\nextra = 1\n')
    with pytest.raises(InvalidError) as caught:
        DynamicConfig(Small, "app").file(path).init()
    assert caught.value.path == "extra"


def test_on_reload_fires_first_with_old_none_then_old_and_new(app_toml: Path) -> None:
    seen: list[tuple[object, object]] = []
    config = DynamicConfig(App, "app").file(app_toml)
    config.on_reload(lambda old, new: seen.append((old, new)))
    first = config.init()
    second = config.reload()
    assert seen == [(None, first), (first, second)]


def test_on_change_fires_only_for_named_paths(app_toml: Path) -> None:
    fired: list[int] = []
    config = DynamicConfig(App, "app").file(app_toml)
    config.on_change("db.port")(lambda _old, new: fired.append(new.db.port))
    config.init()
    write(app_toml, app_toml.read_text().replace('"billing"', '"payments"'))
    config.reload()
    write(app_toml, app_toml.read_text().replace("5432", "6543"))
    config.reload()
    assert fired == [5432, 6543]


def test_hook_guard_unregisters(app_toml: Path) -> None:
    calls: list[int] = []
    config = DynamicConfig(App, "app").file(app_toml)
    guard = config.on_reload(lambda _o, _n: calls.append(1))
    config.init()
    guard.close()
    config.reload()
    assert calls == [1]


def test_explain_masks_secret_paths(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    text = repr(config.explain("db.password"))
    assert "hunter2" not in text
    assert "***" in text


def test_source_of_names_the_file_and_the_env_variable(
    app_toml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TDC_APP_DB__PORT", "7000")
    config = DynamicConfig(App, "app").file(app_toml).env("TDC_")
    config.init()
    assert str(config.source_of("db.host")) == f"in {app_toml}"
    assert str(config.source_of("db.port")) == "from TDC_APP_DB__PORT"
    assert config.current().db.port == 7000


def test_overrides_block_restores_previous_layer(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    with config.overrides(db__port=1) as inside:
        assert inside.db.port == 1
    assert config.current().db.port == 5432


def test_set_assignments_types_text(app_toml: Path) -> None:
    config = DynamicConfig(None, "app").file(app_toml).set_assignments(["db.port=6000"])
    assert config.init()["db.port"] == 6000


def test_changed_returns_model_after_install_and_none_on_timeout(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    assert config.changed(timeout=0.01) is None
    results: list[object] = []
    waiter = threading.Thread(target=lambda: results.append(config.changed(timeout=5)))
    waiter.start()
    while not waiter.is_alive():
        pass
    config.reload()
    waiter.join(5)
    assert results and results[0] is config.current()


def test_watch_reloads_after_atomic_rename(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    with config.watching(debounce=0.02):
        replacement = app_toml.with_name(".config.toml.tmp")
        write(replacement, app_toml.read_text().replace("5432", "6543"))
        replacement.replace(app_toml)
        assert config.changed(timeout=5) is not None
    assert config.current().db.port == 6543
    assert config.status().last_reason == ReloadReason.FILE_CHANGED.value


def test_watch_keeps_last_good_on_broken_edit(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    first = config.init()
    with config.watching(debounce=0.02):
        write(app_toml, "[app\n")
        assert config.changed(timeout=5) is None
    assert config.current() is first
    assert config.status().consecutive_failures >= 1


def test_watch_covers_profile_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = write(tmp_path / "config.toml", '[app]\nname = "base"\n[app.db]\nhost = "h"\nport = 1\n')
    variant = write(tmp_path / "config.prod.toml", '[app]\nname = "prod"\n')
    monkeypatch.setenv("TDC_PROFILE", "prod")
    config = DynamicConfig(App, "app").file(base).profile_env("TDC_PROFILE")
    assert config.init().name == "prod"
    with config.watching(debounce=0.02):
        write(variant, '[app]\nname = "prod2"\n')
        assert config.changed(timeout=5) is not None
    assert config.current().name == "prod2"


def test_second_watcher_is_refused(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    with config.watching(debounce=0.02), pytest.raises(OSError, match="already"):
        config.watch()


def test_changed_paths_reports_paths_not_values() -> None:
    changes = changed_paths({"a": 1, "b": {"c": True}}, {"a": 1.0, "b": {"d": 2}})
    assert [(c.path, c.kind) for c in changes] == [
        ("a", "changed"),
        ("b.c", "removed"),
        ("b.d", "added"),
    ]


def test_sources_are_fixed_after_first_load(app_toml: Path) -> None:
    config = DynamicConfig(App, "app").file(app_toml)
    config.init()
    with pytest.raises(Exception, match="fixed after the first load"):
        config.file(app_toml)


def test_watch_covers_dotenv_and_secrets_dir(tmp_path: Path) -> None:
    base = write(tmp_path / "config.toml", '[app]\nname = "x"\n[app.db]\nhost = "h"\nport = 1\n')
    dotenv = write(tmp_path / ".env", "TWS_APP_NAME=from-dotenv\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    write(secrets / "db__host", "secret-host\n")
    config = DynamicConfig(App, "app").file(base).env("TWS_").env_file(dotenv).secrets_dir(secrets)
    assert config.init().name == "from-dotenv"
    with config.watching(debounce=0.02):
        write(dotenv, "TWS_APP_NAME=edited\n")
        assert config.changed(timeout=5) is not None
        assert config.current().name == "edited"
        write(secrets / "db__host", "rotated-host\n")
        assert config.changed(timeout=5) is not None
    assert config.current().db.host == "rotated-host"


def test_fingerprint_is_the_digest_of_the_file_it_read(app_toml: Path) -> None:
    config = DynamicConfig(None, "app").file(app_toml).set_default("extra", 1)
    config.init()
    assert config.fingerprint() == "sha256:" + hashlib.sha256(app_toml.read_bytes()).hexdigest()
    assert config.fingerprint() == digest(app_toml.read_bytes())


def test_fingerprint_without_a_document_is_the_canonical_json_digest() -> None:
    config = DynamicConfig(None, "app").set_default("name", "x")
    config.init()
    assert config.fingerprint() == fingerprint({"name": "x"})


def test_on_change_with_a_hook_argument_registers_it(app_toml: Path) -> None:
    fired: list[int] = []
    config = DynamicConfig(App, "app").file(app_toml)
    guard = config.on_change("db", lambda _old, new: fired.append(new.db.port))
    config.init()
    write(app_toml, app_toml.read_text().replace("5432", "6543"))
    config.reload()
    assert fired == [5432, 6543]
    guard.close()
    write(app_toml, app_toml.read_text().replace("6543", "7654"))
    config.reload()
    assert fired == [5432, 6543]


def test_on_change_takes_several_paths_then_the_hook(app_toml: Path) -> None:
    fired: list[str] = []
    config = DynamicConfig(App, "app").file(app_toml)
    config.on_change("nothing", "name", lambda _old, new: fired.append(new.name))
    config.init()
    assert fired == ["billing"]


@pytest.mark.parametrize(
    "args",
    [(), (print,), (["db"],), (1, print), ("db", 2), ("",)],
    ids=["nothing", "a hook alone", "a list", "a number", "a number after a path", "empty"],
)
def test_on_change_refuses_what_is_not_a_path_saying_how_to_call_it(args: tuple[object]) -> None:
    config = DynamicConfig(None, "app")
    with pytest.raises(TypeError) as caught:
        config.on_change(*args)  # type: ignore[call-overload]
    assert 'config.on_change("db", hook)' in str(caught.value)
