"""The config server's OTLP traces: a ``request`` span per request, a ``rebuild`` per build.

``dynamic-config-server`` runs as a real process with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointed
at the loopback collector of :mod:`tests.fixtures.otlp`; SIGTERM drains it and flushes its
spans. Neither the document's values nor a client token may be in what leaves.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.fixtures.otlp import Receiver

from .conftest import OTHER_TOKEN, TOKEN, free_port, get

SERVER = Path(sys.executable).with_name("dynamic-config-server")


def test_request_and_rebuild_spans_arrive_without_values_or_tokens(
    otlp_receiver: Receiver, tmp_path: Path
) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    (tmp_path / "billing.toml").write_text(f'[billing]\nport = 8080\npassword = "{secret}"\n')
    (tmp_path / "shop.toml").write_text('[shop]\nname = "shop"\n')
    port = free_port()
    config = tmp_path / "server.toml"
    config.write_text(
        f'[server]\nbind = "127.0.0.1:{port}"\nstore_interval = 0.5\n'
        "[[server.sections]]\n"
        'application = "billing"\nprofile = "prod"\nfiles = ["billing.toml"]\n'
        "[[server.sections]]\n"
        'application = "shop"\nprofile = "prod"\nfiles = ["shop.toml"]\n'
        "[[server.clients]]\n"
        f'name = "billing-pods"\ntoken = "{TOKEN}"\napplications = ["billing"]\n'
        "[[server.clients]]\n"
        f'name = "shop-pods"\ntoken = "{OTHER_TOKEN}"\napplications = ["shop"]\n'
    )
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url}
    proc = subprocess.Popen([str(SERVER), str(config)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if get(url + "/healthz", token=None)[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the config server did not start"
            time.sleep(0.05)
        status, _, body = get(url + "/billing/prod")
        assert status == 200 and secret.encode() in body
        assert get(url + "/billing/prod", token=OTHER_TOKEN)[0] == 404
        assert get(url + "/billing/prod", token="not-a-token")[0] == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    # uvicorn re-raises the SIGTERM it handled once the drain is done
    assert proc.returncode in (0, -signal.SIGTERM), output

    spans = otlp_receiver.wait_for(["request", "rebuild"])
    assert {span.service for span in spans} == {"dynamic-config-server"}
    requests = [span.attributes for span in spans if span.name == "request"]
    outcomes = [(r.get("caller"), r.get("outcome"), r.get("status")) for r in requests]
    assert outcomes == [
        ("billing-pods", "served", "200"),
        ("shop-pods", "not-found", "404"),
        ("-", "unauthenticated", "401"),
    ]
    assert requests[0]["application"] == "billing" and requests[0]["profile"] == "prod"
    rebuilds = {s.attributes["section"]: s.attributes for s in spans if s.name == "rebuild"}
    assert rebuilds["billing/prod"] == {"section": "billing/prod", "initial": "True",
                                        "outcome": "installed", "generation": "1"}  # fmt: skip
    assert otlp_receiver.leaked(secret, TOKEN, OTHER_TOKEN, "not-a-token") == []
