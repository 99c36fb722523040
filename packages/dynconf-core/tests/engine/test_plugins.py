"""Plugin discovery and the lock that pins what a process loads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dynconf.errors import BackendError
from dynconf.plugins import LockEntry, PluginLock, discover, load_locked, lock_from


def test_discovery_finds_builtin_formats_filters_and_file_store() -> None:
    registry = discover()
    assert {"json", "toml", "yaml", "ini", "properties", "env"} <= set(registry.formats)
    assert {"b64encode", "b64decode", "json", "yaml", "quote", "required"} <= set(registry.filters)
    assert "file" in registry.stores
    assert registry.format_for_path("x.YML").name == "yaml"


def test_unknown_extension_error_lists_known_ones() -> None:
    with pytest.raises(BackendError, match=r"\.toml"):
        discover().format_for_path("settings.conf")


def test_lock_round_trips_and_loads_exactly_the_pinned_set(tmp_path: Path) -> None:
    lock = lock_from(discover())
    path = tmp_path / "plugins.lock"
    path.write_text(lock.to_json(), encoding="utf-8")
    builtin_only = PluginLock(
        tuple(e for e in PluginLock.read(path).entries if e.name == "builtin")
    )
    registry = load_locked(builtin_only)
    assert [e.name for e in registry.plugins] == ["builtin"]
    assert set(registry.stores) == {"file"}


def test_lock_refuses_another_version() -> None:
    entry = next(e for e in lock_from(discover()).entries if e.name == "builtin")
    wrong = dataclasses.replace(entry, version="0.0.0-not-this")
    with pytest.raises(BackendError, match=r"pinned at 0\.0\.0-not-this"):
        load_locked(PluginLock((wrong,)))


def test_lock_refuses_a_missing_distribution() -> None:
    missing = LockEntry("dynconf-store-nowhere", "1.0", "nowhere", "dynconf_store_nowhere.plugin")
    with pytest.raises(BackendError, match="not installed"):
        load_locked(PluginLock((missing,)))


def test_store_client_library_is_not_imported_at_discovery() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from dynconf.plugins import discover; discover(); "
        "heavy = [m for m in ('hvac', 'boto3', 'consul', 'redis', 'nats', 'git', "
        "'google.cloud.firestore', 'etcd3gw') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
