"""FastAPI: the Starlette wiring, plus the snapshot as a dependency.

    app = FastAPI()
    setup(app, config)
    Settings_ = config_dependency(config)

    @app.get("/")
    def index(settings: Settings = Depends(Settings_)):
        ...

``config_dependency(config)`` answers the same callable for one configuration every time,
so ``app.dependency_overrides[config_dependency(config)] = ...`` works from a test.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from dynconf.config import DynamicConfig
from dynconf.integrations._common import RequestSnapshot, current, missing, request_snapshot
from dynconf.integrations.starlette import routes, setup

try:
    import fastapi  # noqa: F401  (this module adds FastAPI's dependencies to the Starlette one)
except ImportError as absent:  # the extra is not installed
    raise missing("FastAPI", "fastapi", absent) from None

__all__ = ["config_dependency", "routes", "setup", "snapshot_dependency"]

M = TypeVar("M")
_DEPENDENCIES: weakref.WeakKeyDictionary[DynamicConfig[Any], Callable[[], Any]] = (
    weakref.WeakKeyDictionary()
)


def config_dependency(config: DynamicConfig[M]) -> Callable[[], M]:
    """A ``Depends`` target yielding ``config``'s model as the request began.

    A plain ``def``: FastAPI runs it on its threadpool, which copies the request's context.
    """
    made = _DEPENDENCIES.get(config)
    if made is None:

        def dependency() -> Any:
            return current(config)

        dependency.__name__ = dependency.__qualname__ = f"{config.key}_config"
        made = _DEPENDENCIES.setdefault(config, dependency)
    return made


def snapshot_dependency() -> RequestSnapshot:
    """``Depends(snapshot_dependency)``: every configuration, and their generations."""
    return request_snapshot()
