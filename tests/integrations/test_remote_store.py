"""The lifecycle follows a real store too: a FastAPI app whose configuration's remote layer
is the Redis test server answers a value changed in Redis, over HTTP, while serving."""

# no `from __future__ import annotations`: FastAPI must see the Annotated dependency, which
# names a local, as an object rather than a string it would resolve in the module's globals
import json
import uuid
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI
from pydantic import BaseModel

from dynconf import DynamicConfig
from dynconf.integrations.fastapi import config_dependency, setup
from dynconf.stores import StoreSpec
from dynconf_store_redis import REDIS_STORE
from tests.integrations._support import get, greeting_becomes, serve_asgi

pytestmark = pytest.mark.redis


class Settings(BaseModel):
    greeting: str


def test_fastapi_serves_a_value_changed_in_redis(redis_server: Any) -> None:
    key = f"dynconf-web-{uuid.uuid4().hex}.json"
    redis_server.client.set(key, json.dumps({"app": {"greeting": "hello"}}))
    source = REDIS_STORE.build(StoreSpec(source="redis", endpoint=redis_server.url, key=key))
    config = DynamicConfig(Settings, "app").remote(source)
    app = FastAPI()
    setup(app, config, remote_interval=1.0)

    @app.get("/")
    def index(settings: Annotated[Settings, Depends(config_dependency(config))]) -> Any:
        return {"greeting": settings.greeting}

    try:
        with serve_asgi(app) as base:
            assert get(base).json() == {"greeting": "hello"}
            assert get(base, "/readyz").json()["configs"]["app"]["remote"]["reachable"] is True
            redis_server.client.set(key, json.dumps({"app": {"greeting": "bonjour"}}))
            greeting_becomes(base, "bonjour")
            ready = get(base, "/readyz").json()["configs"]["app"]
            assert ready["generation"] == 2 and ready["last_reason"] == "remote-changed"
    finally:
        redis_server.client.delete(key)
