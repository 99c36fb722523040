"""Starlette with a live configuration: ``uvicorn app:app`` in this directory."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dynconf import DynamicConfig
from dynconf.integrations import current
from dynconf.integrations.starlette import setup


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")


async def index(request: Request) -> JSONResponse:
    settings = current(config)  # the model this request began with
    generation = request.state.dynconf.generation  # the same snapshot, on the request
    return JSONResponse({"greeting": settings.greeting, "generation": generation})


app = Starlette(routes=[Route("/", index)])
setup(app, config)
