"""Flask with a live configuration: ``flask --app app:create_app run`` in this directory."""

from __future__ import annotations

import os
from pathlib import Path

from flask import Flask, g
from pydantic import BaseModel

from dynconf import DynamicConfig
from dynconf.integrations.flask import Dynconf


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")
dynconf = Dynconf(config)


def create_app() -> Flask:
    app = Flask(__name__)
    dynconf.init_app(app)  # loads now, follows the file; /healthz /readyz /metrics

    @app.get("/")
    def index() -> dict[str, object]:
        settings = g.dynconf.one()  # the model this request began with
        return {"greeting": settings.greeting, "generation": g.dynconf.generation}

    return app
