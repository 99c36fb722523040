"""Robyn with a live configuration: ``python app.py`` (``PORT`` picks the port)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel
from robyn import Robyn

from dynconf import DynamicConfig
from dynconf.integrations import current, request_snapshot
from dynconf.integrations.robyn import setup


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")

app = Robyn(__file__)
integration = setup(app, config)  # startup: init + watch; shutdown: stop; /readyz


@app.get("/")
@integration.scoped
async def index(request: object) -> str:
    settings = current(config)
    return json.dumps({"greeting": settings.greeting, "generation": request_snapshot().generation})


if __name__ == "__main__":
    app.start(host="127.0.0.1", port=int(os.environ.get("PORT", "8080")))
