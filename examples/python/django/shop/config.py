"""The live configuration the project reads (named in ``DYNCONF['CONFIGS']``)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from dynconf import DynamicConfig


class Settings(BaseModel):
    greeting: str
    limit: int = 10


default = Path(__file__).resolve().parent.parent / "config.toml"
config = DynamicConfig(Settings, "app").file(os.environ.get("APP_CONFIG", default)).env("APP_")
