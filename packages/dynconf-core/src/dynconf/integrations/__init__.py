"""Web frameworks and workers: one lifecycle, one request snapshot, one readiness answer.

Each framework has a module here (``dynconf.integrations.fastapi``, ``.starlette``,
``.litestar``, ``.flask``, ``.quart``, ``.django``, ``.robyn``, ``.celery``) that imports its
framework when it is imported, and only then; ``dynconf-core[<framework>]`` installs it.
What does not depend on a framework lives once, in :mod:`dynconf.integrations._common`,
and is re-exported here: importing this package imports no framework.
"""

from __future__ import annotations

from dynconf.integrations._common import (
    Guard,
    Lifecycle,
    OutsideRequestError,
    Reply,
    RequestSnapshot,
    Route,
    current,
    enter,
    leave,
    liveness,
    readiness,
    request_snapshot,
    routes,
    scoped,
    take_snapshot,
    token_guard,
)

__all__ = [
    "Guard",
    "Lifecycle",
    "OutsideRequestError",
    "Reply",
    "RequestSnapshot",
    "Route",
    "current",
    "enter",
    "leave",
    "liveness",
    "readiness",
    "request_snapshot",
    "routes",
    "scoped",
    "take_snapshot",
    "token_guard",
]
