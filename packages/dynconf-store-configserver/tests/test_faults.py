"""Faults: the server restarted under a watching client; a section's store going down."""

from __future__ import annotations

import json
import time

import pytest

from dynconf.errors import RemoteError

from .conftest import METRICS_TOKEN, TOKEN, base_settings, client_source, get
from .test_client import Watch

pytestmark = [pytest.mark.configserver, pytest.mark.slow]


def test_server_restarted_mid_watch_recovers_and_delivers(billing, config_dir):
    w = Watch(client_source(billing.url), interval=0.3)
    try:
        w.wait_connected()
        billing.stop()
        deadline = time.monotonic() + 10
        while not w.failures:
            assert time.monotonic() < deadline, "the dropped stream was never reported"
            time.sleep(0.05)
        assert isinstance(w.failures[0], RemoteError)
        assert w.quiet(0.5)
        billing.start()  # same port, a fresh process state: generation starts at 1 again
        config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.after-restart"\n')
        delivered = w.next(timeout=15)
        assert json.loads(delivered.text)["db"]["host"] == "db.after-restart"
        assert w.error is None
    finally:
        w.stop()


def test_change_made_while_the_server_was_down_is_delivered_after(billing, config_dir):
    w = Watch(client_source(billing.url), interval=0.3)
    try:
        w.wait_connected()
        billing.stop()
        config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.while-down"\n')
        billing.start()  # loads the changed file at generation 1: same number, new document
        delivered = w.next(timeout=15)
        assert json.loads(delivered.text)["db"]["host"] == "db.while-down"
    finally:
        w.stop()


def test_section_with_a_store_down_keeps_serving_the_last_good_document_as_stale(serve, config_dir):
    # The section's store is another config server (a real one), which the test stops.
    upstream = serve(base_settings(config_dir), base=config_dir.root)
    token_file = config_dir.write("upstream-token", TOKEN)
    raw = base_settings(config_dir)
    raw["server"]["sections"] = [{
        "application": "edge", "profile": "prod", "whole_document": True,
        "stores": [{"source": "config-server", "endpoint": upstream.url, "key": "billing/prod",
                    "auth": "token", "token_file": str(token_file), "timeout": 1}],
    }]  # fmt: skip
    raw["server"]["clients"] = [{"name": "edge", "token": TOKEN, "applications": ["edge"]}]
    edge = serve(raw, base=config_dir.root)
    status, headers, body = get(f"{edge.url}/edge/prod")
    assert status == 200 and "dynconf-stale" not in {k.lower() for k in headers}
    good = json.loads(body)["config"]
    assert good["db"]["host"] == "db.prod"
    upstream.stop()
    deadline = time.monotonic() + 15
    while True:
        status, headers, body = get(f"{edge.url}/edge/prod")
        if headers.get("dynconf-stale") == "true":
            break
        assert time.monotonic() < deadline, "the section was never reported stale"
        time.sleep(0.1)
    assert status == 200
    assert json.loads(body)["config"] == good  # the last good document, still served
    assert json.loads(get(f"{edge.url}/readyz", token=None)[2])["stale_sections"] == 1
    metrics = get(f"{edge.url}/metrics", token=METRICS_TOKEN)[2].decode()
    assert 'dynconf_server_section_stale{application="edge",profile="prod"} 1.0' in metrics
    upstream.start()
    deadline = time.monotonic() + 15
    while get(f"{edge.url}/edge/prod")[1].get("dynconf-stale") == "true":
        assert time.monotonic() < deadline, "the section never recovered"
        time.sleep(0.1)
