"""The webhook process's OTLP traces: one ``admission`` span per review, no annotation value.

``dynamic-config-webhook serve`` runs as a real process (plain HTTP through the local-harness
opt-in) with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointed at the loopback collector of
:mod:`tests.fixtures.otlp`; SIGTERM flushes its spans on the way out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.fixtures.otlp import Receiver

from .conftest import free_port

WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")


def _post(url: str, body: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST" if body else "GET",
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _review(annotations: dict[str, str] | None) -> bytes:
    metadata: dict[str, Any] = {"name": "app"}
    if annotations is not None:
        metadata["annotations"] = annotations
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
           "spec": {"containers": [{"name": "app", "image": "busybox"}]}}  # fmt: skip
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u1", "namespace": "team-a", "object": pod}}  # fmt: skip
    return json.dumps(review).encode()


def test_admission_spans_carry_the_decision_and_no_annotation_value(
    otlp_receiver: Receiver, tmp_path: Path
) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    annotations = {
        "dynamic-config.rs/inject": "true",
        "dynamic-config.rs/source": "consul",
        "dynamic-config.rs/endpoint": "http://consul:8500",
        "dynamic-config.rs/key": f"myapp/{secret}.json",
        "dynamic-config.rs/path": "/config/rendered.toml",
    }
    port = free_port()
    env = {
        **os.environ,
        "DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT": "1",
        "DYNAMIC_CONFIG_WEBHOOK_ADDR": f"127.0.0.1:{port}",
        "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(tmp_path / "absent.yaml"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url,
    }
    proc = subprocess.Popen([str(WEBHOOK), "serve"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if _post(url + "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the webhook did not start"
            time.sleep(0.05)
        status, body = _post(url + "/mutate", _review(annotations))
        assert status == 200 and json.loads(body)["response"].get("patchType") == "JSONPatch", body
        refused = {**annotations, "dynamic-config.rs/mode": f"x-{secret}"}
        assert _post(url + "/mutate", _review(refused))[0] == 200
        assert _post(url + "/mutate", _review(None))[0] == 200
        assert _post(url + "/mutate", b"[not a review")[0] == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output

    spans = otlp_receiver.wait_for(["admission"])
    admissions = [span for span in spans if span.name == "admission"]
    assert {span.service for span in admissions} == {"dynamic-config-webhook"}
    by_outcome = {span.attributes.get("outcome"): span.attributes for span in admissions}
    assert set(by_outcome) == {"patched", "refused", "skipped", "bad-request"}
    assert by_outcome["patched"]["namespace"] == "team-a"
    assert by_outcome["patched"]["pod"] == "app"
    assert int(by_outcome["patched"]["patch_bytes"]) > 0
    assert by_outcome["refused"]["reason"] == "DynamicConfigMalformed"
    assert otlp_receiver.leaked(secret, "consul:8500", "myapp/") == []
