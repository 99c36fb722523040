"""Quart with a live configuration: ``hypercorn app:app`` or ``uvicorn app:app`` here."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel
from quart import Quart, g

from dynconf import DynamicConfig
from dynconf.integrations.quart import Dynconf


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")

app = Quart(__name__)
Dynconf(config, app=app)  # started before serving, stopped after


@app.get("/")
async def index() -> dict[str, object]:
    settings = g.dynconf.one()
    return {"greeting": settings.greeting, "generation": g.dynconf.generation}
