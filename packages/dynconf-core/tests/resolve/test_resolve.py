"""Resolution behaviours the conformance cases cannot express as data."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dynconf.errors import (
    EnvError,
    IoError,
    LimitError,
    Origin,
    ParseError,
    TypeMismatchError,
)
from dynconf.limits import MAX_DEPTH
from dynconf.plugins import Registry
from dynconf.resolve import InlineSource, LoadSpec, RemoteDocument, parse_assignments, resolve

SECRET_VALUE = "hunter2-do-not-print"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_layer_order_is_the_api_order(tmp_path: Path, registry: Registry) -> None:
    base = _write(tmp_path / "config.toml", '[app]\nv = "file"\n')
    secrets = tmp_path / "secrets"
    _write(secrets / "v", "secret")
    dotenv = _write(tmp_path / ".env", "P_APP_V=dotenv\n")
    spec = LoadSpec(
        key="app",
        files=[base],
        remote=RemoteDocument('{"app": {"v": "remote"}}', "json", "store X"),
        secrets_dir=secrets,
        env_files=[dotenv],
        env_prefix="P_",
        bindings={"v": "BOUND"},
        defaults={"v": "default"},
        flags={"v": "flag"},
        overrides={"v": "override"},
        environ={"P_APP_V": "env", "BOUND": "binding"},
    )
    resolved = resolve(spec, registry=registry)
    assert [layer.layer for layer in resolved.layers] == [
        "default",
        "file",
        "remote",
        "secrets",
        ".env",
        "environment",
        "binding",
        "flag",
        "override",
    ]
    assert resolved.section == {"v": "override"}
    explanation = resolved.explain("v")
    assert [supply.value for supply in explanation.supplied] == [
        "default",
        "file",
        "remote",
        "secret",
        "dotenv",
        "env",
        "binding",
        "flag",
        "override",
    ]


def test_source_of_names_the_exact_variable(registry: Registry) -> None:
    spec = LoadSpec(key="app", env_prefix="P_", environ={"P_APP_DB__PORT": "1", "OTHER": "x"})
    resolved = resolve(spec, registry=registry)
    assert resolved.source_of("db.port") == Origin.env("P_APP_DB__PORT")
    assert resolved.layers[-1].origin == Origin.env("P_APP_*")
    assert str(resolved.source_of("db.port")) == "from P_APP_DB__PORT"


def test_source_of_a_runtime_layer_and_a_missing_path(registry: Registry) -> None:
    resolved = resolve(LoadSpec(key="app", overrides={"a.b": 1}), registry=registry)
    assert str(resolved.source_of("a.b")) == "set as override"
    assert resolved.source_of("a.c") is None
    assert resolved.source_of("a") is None


def test_environment_layer_is_present_even_when_empty(registry: Registry) -> None:
    resolved = resolve(LoadSpec(key="app", env_prefix="P_", environ={}), registry=registry)
    explanation = resolved.explain("port")
    assert not explanation.found
    assert ("environment", Origin.env("P_APP_*")) in explanation.absent


def test_explain_masks_secret_paths(tmp_path: Path, registry: Registry) -> None:
    base = _write(tmp_path / "c.toml", f'[app.db]\npassword = "{SECRET_VALUE}"\nhost = "h"\n')
    resolved = resolve(LoadSpec(key="app", files=[base]), registry=registry)
    leaf = resolved.explain("db.password", secrets={"db.password"})
    table = resolved.explain("db", secrets={"db.password"})
    assert leaf.value == "***"
    assert leaf.supplied[0].value == "***"
    assert table.value == {"password": "***", "host": "h"}
    assert SECRET_VALUE not in str(leaf) + str(table)


def test_alias_provenance_is_the_old_value_origin(tmp_path: Path, registry: Registry) -> None:
    base = _write(tmp_path / "c.toml", "[app]\nold = 1\n")
    spec = LoadSpec(key="app", files=[base])
    spec.add_alias("old", "new")
    resolved = resolve(spec, registry=registry)
    assert resolved.source_of("new") == Origin.file(str(base))
    assert resolved.explain("new").alias_of == "old"


def test_cross_section_alias_reads_documents_not_env(tmp_path: Path, registry: Registry) -> None:
    base = _write(tmp_path / "c.toml", "[legacy]\nport = 1\n[app]\n")
    spec = LoadSpec(key="app", files=[base], env_prefix="P_", environ={"P_LEGACY_PORT": "9"})
    spec.add_alias("legacy::port", "port")
    resolved = resolve(spec, registry=registry)
    assert resolved.section == {"port": 1}
    assert resolved.siblings == {"legacy": {"port": 1}}
    assert resolved.source_of("port") == Origin.file(str(base))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a", "b::c"),
        ("::b", "c"),
        ("s::", "c"),
        ("s.t::b", "c"),
        ("a..b", "c"),
        ("a", ""),
        ("a", "a"),
    ],
)
def test_malformed_alias_paths_are_refused_at_add(old: str, new: str) -> None:
    with pytest.raises(TypeMismatchError):
        LoadSpec(key="app").add_alias(old, new)


def test_alias_cycle_is_refused_at_add() -> None:
    spec = LoadSpec(key="app")
    spec.add_alias("a", "b")
    spec.add_alias("b", "c")
    with pytest.raises(TypeMismatchError, match="cycle"):
        spec.add_alias("c", "a")


def test_set_assignments_split_on_the_first_equals() -> None:
    assert parse_assignments(["a.b=x=y", "n=8080", "s="]) == {"a.b": "x=y", "n": 8080, "s": ""}


def test_set_assignment_without_equals_names_the_argument() -> None:
    with pytest.raises(TypeMismatchError, match="#2"):
        parse_assignments(["a=1", "nothing"])


def test_runtime_layer_path_with_empty_segment_is_refused(registry: Registry) -> None:
    with pytest.raises(TypeMismatchError):
        resolve(LoadSpec(key="app", overrides={"a..b": 1}), registry=registry)


def test_inline_source_has_an_inline_origin(registry: Registry) -> None:
    spec = LoadSpec(key="app", files=[InlineSource("[app]\nport = 1\n", "toml")])
    resolved = resolve(spec, registry=registry)
    assert resolved.section == {"port": 1}
    assert str(resolved.source_of("port")) == "in an inline source"


def test_remote_document_section_and_origin(registry: Registry) -> None:
    remote = RemoteDocument('{"app": {"port": 2}, "$schema": "x"}', "json", "consul kv app")
    resolved = resolve(LoadSpec(key="app", remote=remote), registry=registry)
    assert resolved.section == {"port": 2}
    assert str(resolved.source_of("port")) == "from consul kv app"


def test_non_table_top_level_names_key_and_whole_document(registry: Registry) -> None:
    remote = RemoteDocument(f'{{"token": "{SECRET_VALUE}"}}', "json", "store")
    with pytest.raises(ParseError) as caught:
        resolve(LoadSpec(key="app", remote=remote), registry=registry)
    assert caught.value.path == "token"
    assert "whole_document" in str(caught.value)
    assert SECRET_VALUE not in str(caught.value) + repr(caught.value)


def test_discovery_takes_the_first_extension_per_dir_and_expands_home(
    tmp_path: Path, registry: Registry
) -> None:
    home = tmp_path / "home"
    _write(home / "conf" / "app.toml", '[app]\nfrom = "toml"\n')
    _write(home / "conf" / "app.json", '{"app": {"from": "json", "json_only": 1}}')
    _write(home / "conf" / "app.prod.toml", "[app]\nvariant = true\n")
    etc = tmp_path / "etc"
    _write(etc / "app.json", '{"app": {"from": "etc"}}')
    spec = LoadSpec(
        key="app",
        discover=[("app", [etc, Path("~/conf"), Path("~nobody/x")])],
        profile_env="PROFILE",
        environ={"HOME": str(home), "PROFILE": "prod"},
    )
    resolved = resolve(spec, registry=registry)
    assert resolved.section == {"from": "toml", "variant": True}
    assert [layer.layer for layer in resolved.layers] == ["discovered"] * 3
    assert home / "conf" in resolved.watched_dirs()


def test_discovery_dir_dropped_when_home_unknown(registry: Registry) -> None:
    spec = LoadSpec(key="app", discover=[("app", [Path("~/conf")])], environ={})
    assert resolve(spec, registry=registry).watched_dirs() == []


def test_watched_files_cover_variants_and_env_files(tmp_path: Path, registry: Registry) -> None:
    base = _write(tmp_path / "config.toml", "[app]\n")
    spec = LoadSpec(
        key="app",
        files=[base],
        env_files=[tmp_path / ".env"],
        secrets_dir=tmp_path / "secrets",
        profile_env="PROFILE",
        environ={"PROFILE": "prod"},
    )
    resolved = resolve(spec, registry=registry)
    assert resolved.watched_files() == [base, tmp_path / "config.prod.toml", tmp_path / ".env"]
    assert resolved.watched_dirs() == [tmp_path / "secrets"]


@pytest.mark.parametrize("profile", ["../x", "a/b", "a\\b", "a\x00b"])
def test_profile_refused_even_without_files(profile: str, registry: Registry) -> None:
    spec = LoadSpec(key="app", profile_env="APP_PROFILE", environ={"APP_PROFILE": profile})
    with pytest.raises(EnvError) as caught:
        resolve(spec, registry=registry)
    assert "APP_PROFILE" in str(caught.value)
    assert caught.value.origin == Origin.env("APP_PROFILE")


def test_strict_env_names_the_variable_never_the_value(registry: Registry) -> None:
    spec = LoadSpec(key="app", env_prefix="P_", strict_env=True, environ={"P_APP_FLAG": " Off "})
    with pytest.raises(EnvError) as caught:
        resolve(spec, registry=registry)
    message = str(caught.value)
    assert "P_APP_FLAG" in message
    assert "Off" not in message


def test_strict_env_applies_to_dotenv_files(tmp_path: Path, registry: Registry) -> None:
    dotenv = _write(tmp_path / ".env", "P_APP_FLAG=nil\n")
    spec = LoadSpec(key="app", env_prefix="P_", strict_env=True, env_files=[dotenv], environ={})
    with pytest.raises(EnvError, match="P_APP_FLAG"):
        resolve(spec, registry=registry)


def test_malformed_dotenv_line_gives_only_the_line_number(
    tmp_path: Path, registry: Registry
) -> None:
    dotenv = _write(tmp_path / ".env", f"OK=1\n{SECRET_VALUE}\n")
    spec = LoadSpec(key="app", env_prefix="P_", env_files=[dotenv], environ={})
    with pytest.raises(ParseError, match="line 2") as caught:
        resolve(spec, registry=registry)
    assert SECRET_VALUE not in str(caught.value)


def test_binding_twice_replaces_and_blank_falls_through(registry: Registry) -> None:
    spec = LoadSpec(key="app", environ={"A": "1", "B": " "})
    spec.bindings["port"] = "B"
    spec.bindings["port"] = "A"
    assert resolve(spec, registry=registry).section == {"port": 1}
    blank = LoadSpec(key="app", bindings={"port": "B"}, environ={"B": " "})
    assert resolve(blank, registry=registry).section == {}


def test_non_ascii_names_do_not_crash(registry: Registry) -> None:
    # A Greek capital alpha and a dotless i: both upper-case to look like ASCII.
    environ = {"ÄPP_APP_X": "1", "P_APP_ß": "2", "P_\u0391PP_Y": "3", "\u0131": "4"}
    spec = LoadSpec(key="app", env_prefix="P_", environ=environ)
    assert resolve(spec, registry=registry).section == {"ß": 2}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")
def test_symlink_outside_the_secrets_dir_is_refused(tmp_path: Path, registry: Registry) -> None:
    outside = _write(tmp_path / "elsewhere" / "token", SECRET_VALUE)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").symlink_to(outside)
    with pytest.raises(IoError, match="allow_external_symlinks") as caught:
        resolve(LoadSpec(key="app", secrets_dir=secrets), registry=registry)
    assert SECRET_VALUE not in str(caught.value)
    allowed = LoadSpec(key="app", secrets_dir=secrets, allow_external_symlinks=True)
    assert resolve(allowed, registry=registry).section == {"token": SECRET_VALUE}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")
def test_kubernetes_secret_layout_and_dangling_links(tmp_path: Path, registry: Registry) -> None:
    secrets = tmp_path / "secrets"
    _write(secrets / "..2024_01_01" / "password", "pw\r\n")
    (secrets / "..data").symlink_to(secrets / "..2024_01_01")
    (secrets / "password").symlink_to(Path("..data") / "password")
    (secrets / "gone").symlink_to(tmp_path / "missing")
    resolved = resolve(LoadSpec(key="app", secrets_dir=secrets), registry=registry)
    assert resolved.section == {"password": "pw"}
    assert resolved.source_of("password") == Origin.file(str(secrets / "password"))


def test_non_utf8_secret_names_the_path(tmp_path: Path, registry: Registry) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "key").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(IoError) as caught:
        resolve(LoadSpec(key="app", secrets_dir=secrets), registry=registry)
    assert str(secrets / "key") in str(caught.value)
    assert "UTF-8" in str(caught.value)


def test_unreadable_file_is_an_io_error(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _write(tmp_path / "config.toml", "[app]\n")

    def refuse(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(IoError, match="permissions") as caught:
        resolve(LoadSpec(key="app", files=[base]), registry=registry)
    assert caught.value.origin == Origin.file(str(base))


def test_a_directory_as_a_file_is_an_io_error(tmp_path: Path, registry: Registry) -> None:
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(IoError):
        resolve(LoadSpec(key="app", files=[tmp_path / "config.toml"]), registry=registry)


def test_parse_errors_never_echo_the_document(tmp_path: Path, registry: Registry) -> None:
    base = _write(tmp_path / "config.toml", f'[app]\npassword = "{SECRET_VALUE}\n')
    with pytest.raises(ParseError) as caught:
        resolve(LoadSpec(key="app", files=[base]), registry=registry)
    assert SECRET_VALUE not in str(caught.value) + repr(caught.value)


def test_result_does_not_alias_layer_tables(registry: Registry) -> None:
    resolved = resolve(LoadSpec(key="app", overrides={"a.b": [1]}), registry=registry)
    resolved.section["a"]["b"].append(2)
    assert resolved.layers[0].table == {"a": {"b": [1]}}


def test_environ_none_reads_the_process_environment(
    monkeypatch: pytest.MonkeyPatch, registry: Registry
) -> None:
    monkeypatch.setenv("RT_PROC_APP_PORT", "81")
    resolved = resolve(LoadSpec(key="app", env_prefix="RT_PROC_"), registry=registry)
    assert resolved.section == {"port": 81}


def test_an_environment_name_nested_past_the_limit_is_refused_by_name(registry: Registry) -> None:
    name = "P_APP_" + "__".join(["A"] * 600)
    spec = LoadSpec(key="app", env_prefix="P_", environ={name: "1"})
    with pytest.raises(LimitError) as caught:
        resolve(spec, registry=registry)
    assert caught.value.origin == Origin.env(name)
    assert caught.value.path == ".".join(["a"] * (MAX_DEPTH + 1))
