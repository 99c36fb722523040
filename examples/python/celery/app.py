"""A Celery worker with a live configuration, over Redis:

    BROKER_URL=redis://127.0.0.1:6379/0 celery -A app worker --pool=prefork -c 2

Every task reads the configuration its run began with; ``dynconf.readiness`` answers the
generation of the process that ran it.
"""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from pydantic import BaseModel

from dynconf import DynamicConfig
from dynconf.integrations.celery import current, setup


class Settings(BaseModel):
    greeting: str
    limit: int = 10


config_file = os.environ.get("APP_CONFIG", str(Path(__file__).with_name("config.toml")))
config = DynamicConfig(Settings, "app").file(config_file).env("APP_")

broker = os.environ.get("BROKER_URL", "redis://127.0.0.1:6379/0")
app = Celery("example", broker=broker, backend=broker)
setup(app, config)  # worker_init / worker_process_init: init + watch; per-task snapshot


@app.task(name="example.greet")
def greet(name: str) -> str:
    return f"{current(config).greeting}, {name}"
