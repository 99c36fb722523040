"""dynconf: layered, typed, live configuration from files, the environment and remote stores.

Public names are imported on first use, so ``import dynconf`` (and every store plugin that
imports a piece of it) does not pay for pydantic, jinja2 or jsonschema until they are
needed: an agent that only renders must stay small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes

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

__all__ = [*_EXPORTS, "__version__"]  # noqa: PLE0604 - one list: the runtime table


__getattr__ = lazy_attributes(globals(), _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from dynconf.cache import CacheMode as CacheMode
    from dynconf.concurrency import set_executor as set_executor
    from dynconf.config import (
        Change as Change,
    )
    from dynconf.config import (
        ConfigStatus as ConfigStatus,
    )
    from dynconf.config import (
        DynamicConfig as DynamicConfig,
    )
    from dynconf.config import (
        Failure as Failure,
    )
    from dynconf.config import (
        HookGuard as HookGuard,
    )
    from dynconf.config import (
        ReloadReason as ReloadReason,
    )
    from dynconf.config import (
        RemoteStatus as RemoteStatus,
    )
    from dynconf.config import (
        changed_paths as changed_paths,
    )
    from dynconf.declare import Configured as Configured
    from dynconf.declare import dynamic_config as dynamic_config
    from dynconf.diagnostics import Report as Report
    from dynconf.diagnostics import Snapshot as Snapshot
    from dynconf.diagnostics import UnknownKey as UnknownKey
    from dynconf.document import fingerprint as fingerprint
    from dynconf.errors import (
        AuthError as AuthError,
    )
    from dynconf.errors import (
        BackendError as BackendError,
    )
    from dynconf.errors import (
        DynconfError as DynconfError,
    )
    from dynconf.errors import (
        EnvError as EnvError,
    )
    from dynconf.errors import (
        ErrorKind as ErrorKind,
    )
    from dynconf.errors import (
        InvalidError as InvalidError,
    )
    from dynconf.errors import (
        IoError as IoError,
    )
    from dynconf.errors import (
        LimitError as LimitError,
    )
    from dynconf.errors import (
        MissingError as MissingError,
    )
    from dynconf.errors import (
        NotInitialisedError as NotInitialisedError,
    )
    from dynconf.errors import (
        Origin as Origin,
    )
    from dynconf.errors import (
        ParseError as ParseError,
    )
    from dynconf.errors import (
        RemoteError as RemoteError,
    )
    from dynconf.errors import (
        TypeMismatchError as TypeMismatchError,
    )
    from dynconf.group import ConfigGroup as ConfigGroup
    from dynconf.metrics import ConfigCollector as ConfigCollector
    from dynconf.models import Values as Values
    from dynconf.models import secret_paths as secret_paths
    from dynconf.notify import (
        Backpressure as Backpressure,
    )
    from dynconf.notify import (
        ConfigEvent as ConfigEvent,
    )
    from dynconf.notify import (
        Reloaded as Reloaded,
    )
    from dynconf.notify import (
        ReloadFailed as ReloadFailed,
    )
    from dynconf.otel import ConfigMeter as ConfigMeter
    from dynconf.remote import Format as Format
    from dynconf.resolve import (
        InlineSource as InlineSource,
    )
    from dynconf.resolve import (
        LoadSpec as LoadSpec,
    )
    from dynconf.resolve import (
        RemoteDocument as RemoteDocument,
    )
    from dynconf.resolve import (
        Resolved as Resolved,
    )
    from dynconf.resolve import (
        resolve as resolve,
    )
    from dynconf.settings import DynconfSettingsSource as DynconfSettingsSource
    from dynconf.stores import (
        ABSENT as ABSENT,
    )
    from dynconf.stores import (
        Absent as Absent,
    )
    from dynconf.stores import (
        AsyncRemoteSource as AsyncRemoteSource,
    )
    from dynconf.stores import (
        Fetched as Fetched,
    )
    from dynconf.stores import (
        RemoteSource as RemoteSource,
    )
    from dynconf.stores import (
        StoreSpec as StoreSpec,
    )
    from dynconf.stores import (
        WatchCapability as WatchCapability,
    )
