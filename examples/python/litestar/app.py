"""Litestar with a live configuration: ``uvicorn app:app`` in this directory.

The plugin provides each configuration as a dependency named after its key (``app``
here) and the request snapshot as ``dynconf``.
"""

from __future__ import annotations

import os
from pathlib import Path

from litestar import Litestar, get
from litestar.di import NamedDependency
from pydantic import BaseModel

from dynconf import DynamicConfig
from dynconf.integrations import RequestSnapshot
from dynconf.integrations.litestar import DynconfPlugin


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")


@get("/", sync_to_thread=False)
def index(
    app: NamedDependency[Settings], dynconf: NamedDependency[RequestSnapshot]
) -> dict[str, object]:
    return {"greeting": app.greeting, "generation": dynconf.generation}


app = Litestar(route_handlers=[index], plugins=[DynconfPlugin(config)])
