"""dynconf: layered, typed, live configuration from files, the environment and remote stores.

Public names are imported on first use, so ``import dynconf`` (and every store plugin that
imports a piece of it) does not pay for pydantic, jinja2 or jsonschema until they are
needed: an agent that only renders must stay small.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Change": "dynconf.config",
    "ConfigStatus": "dynconf.config",
    "DynamicConfig": "dynconf.config",
    "Failure": "dynconf.config",
    "HookGuard": "dynconf.config",
    "ReloadReason": "dynconf.config",
    "RemoteStatus": "dynconf.config",
    "changed_paths": "dynconf.config",
    "ConfigGroup": "dynconf.group",
    "Backpressure": "dynconf.notify",
    "ConfigEvent": "dynconf.notify",
    "Reloaded": "dynconf.notify",
    "ReloadFailed": "dynconf.notify",
    "CacheMode": "dynconf.cache",
    "Report": "dynconf.diagnostics",
    "Snapshot": "dynconf.diagnostics",
    "UnknownKey": "dynconf.diagnostics",
    "ConfigCollector": "dynconf.metrics",
    "ConfigMeter": "dynconf.otel",
    "Format": "dynconf.remote",
    "Configured": "dynconf.declare",
    "dynamic_config": "dynconf.declare",
    "set_executor": "dynconf.concurrency",
    "fingerprint": "dynconf.document",
    "AuthError": "dynconf.errors",
    "BackendError": "dynconf.errors",
    "DynconfError": "dynconf.errors",
    "EnvError": "dynconf.errors",
    "ErrorKind": "dynconf.errors",
    "InvalidError": "dynconf.errors",
    "IoError": "dynconf.errors",
    "LimitError": "dynconf.errors",
    "MissingError": "dynconf.errors",
    "NotInitialisedError": "dynconf.errors",
    "Origin": "dynconf.errors",
    "ParseError": "dynconf.errors",
    "RemoteError": "dynconf.errors",
    "TypeMismatchError": "dynconf.errors",
    "Values": "dynconf.models",
    "secret_paths": "dynconf.models",
    "InlineSource": "dynconf.resolve",
    "LoadSpec": "dynconf.resolve",
    "RemoteDocument": "dynconf.resolve",
    "Resolved": "dynconf.resolve",
    "resolve": "dynconf.resolve",
    "DynconfSettingsSource": "dynconf.settings",
    "ABSENT": "dynconf.stores",
    "Absent": "dynconf.stores",
    "AsyncRemoteSource": "dynconf.stores",
    "Fetched": "dynconf.stores",
    "RemoteSource": "dynconf.stores",
    "StoreSpec": "dynconf.stores",
    "WatchCapability": "dynconf.stores",
}

__all__ = [
    "ABSENT",
    "Absent",
    "AsyncRemoteSource",
    "AuthError",
    "BackendError",
    "Backpressure",
    "CacheMode",
    "Change",
    "ConfigCollector",
    "ConfigEvent",
    "ConfigGroup",
    "ConfigMeter",
    "ConfigStatus",
    "Configured",
    "DynamicConfig",
    "DynconfError",
    "DynconfSettingsSource",
    "EnvError",
    "ErrorKind",
    "Failure",
    "Fetched",
    "Format",
    "HookGuard",
    "InlineSource",
    "InvalidError",
    "IoError",
    "LimitError",
    "LoadSpec",
    "MissingError",
    "NotInitialisedError",
    "Origin",
    "ParseError",
    "ReloadFailed",
    "ReloadReason",
    "Reloaded",
    "RemoteDocument",
    "RemoteError",
    "RemoteSource",
    "RemoteStatus",
    "Report",
    "Resolved",
    "Snapshot",
    "StoreSpec",
    "TypeMismatchError",
    "UnknownKey",
    "Values",
    "WatchCapability",
    "__version__",
    "changed_paths",
    "dynamic_config",
    "fingerprint",
    "resolve",
    "secret_paths",
    "set_executor",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dynconf' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from dynconf.cache import CacheMode
    from dynconf.concurrency import set_executor
    from dynconf.config import (
        Change,
        ConfigStatus,
        DynamicConfig,
        Failure,
        HookGuard,
        ReloadReason,
        RemoteStatus,
        changed_paths,
    )
    from dynconf.declare import Configured, dynamic_config
    from dynconf.diagnostics import Report, Snapshot, UnknownKey
    from dynconf.document import fingerprint
    from dynconf.errors import (
        AuthError,
        BackendError,
        DynconfError,
        EnvError,
        ErrorKind,
        InvalidError,
        IoError,
        LimitError,
        MissingError,
        NotInitialisedError,
        Origin,
        ParseError,
        RemoteError,
        TypeMismatchError,
    )
    from dynconf.group import ConfigGroup
    from dynconf.metrics import ConfigCollector
    from dynconf.models import Values, secret_paths
    from dynconf.notify import Backpressure, ConfigEvent, Reloaded, ReloadFailed
    from dynconf.otel import ConfigMeter
    from dynconf.remote import Format
    from dynconf.resolve import InlineSource, LoadSpec, RemoteDocument, Resolved, resolve
    from dynconf.settings import DynconfSettingsSource
    from dynconf.stores import (
        ABSENT,
        Absent,
        AsyncRemoteSource,
        Fetched,
        RemoteSource,
        StoreSpec,
        WatchCapability,
    )
