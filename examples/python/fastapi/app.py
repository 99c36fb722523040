"""FastAPI with a live configuration: ``uvicorn app:app`` in this directory.

Edit ``config.toml`` while it runs; ``GET /`` answers the new greeting, ``GET /readyz``
the new generation. ``APP_CONFIG`` names another file, ``APP_GREETING`` overrides.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI
from pydantic import BaseModel

from dynconf import DynamicConfig
from dynconf.integrations import RequestSnapshot
from dynconf.integrations.fastapi import config_dependency, setup, snapshot_dependency


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")

app = FastAPI()
setup(app, config)  # lifespan: init + watch, then stop; snapshot middleware; /readyz
settings = config_dependency(config)


@app.get("/")
def index(
    current: Annotated[Settings, Depends(settings)],
    snapshot: Annotated[RequestSnapshot, Depends(snapshot_dependency)],
) -> dict[str, object]:
    return {"greeting": current.greeting, "limit": current.limit, "generation": snapshot.generation}
