"""The served webhook over real TLS: /mutate, probes, metrics names and buckets, audit lines."""

from __future__ import annotations

import json
import logging
import ssl
import urllib.request
from pathlib import Path

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.settings import WebhookSettings

CANONICAL = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}


def _get(hook, path, body=None):
    context = ssl.create_default_context(cafile=hook.ca)
    request = urllib.request.Request(
        hook.url + path,
        data=body,
        method="POST" if body else "GET",
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _review(pod):
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u1", "namespace": "default", "object": pod},
        }
    ).encode()


def test_mutate_over_tls_patches_and_counts(running_webhook, make_pod, caplog):
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    with caplog.at_level(logging.INFO, logger="dynconf_k8s.webhook"):
        status, body = _get(hook, "/mutate", _review(make_pod(CANONICAL)))
        _get(hook, "/mutate", _review(make_pod({**CANONICAL, "dynamic-config.rs/mode": "x"})))
        _get(hook, "/mutate", _review(make_pod(None)))
    assert status == 200
    response = json.loads(body)["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    _, metrics = _get(hook, "/metrics")
    assert 'dynamic_config_admissions_total{outcome="patched"} 1.0' in metrics
    assert 'dynamic_config_admissions_total{outcome="refused"} 1.0' in metrics
    assert 'dynamic_config_admissions_total{outcome="skipped"} 1.0' in metrics
    assert 'dynamic_config_admission_refusals_total{reason="malformed"} 1.0' in metrics
    for le in ("0.0001", "0.0005", "0.001", "0.005", "0.025", "0.1", "1.0", "+Inf"):
        assert f'dynamic_config_admission_duration_seconds_bucket{{le="{le}"}}' in metrics
    assert "dynamic_config_admission_patch_bytes_total" in metrics
    assert "dynamic_config_certificate_rotations_total" in metrics
    assert "dynamic_config_certificate_expires_at_seconds" in metrics
    audits = [r for r in caplog.records if r.getMessage() == "admission"]
    assert [r.outcome for r in audits] == ["patched", "refused"]
    assert audits[0].namespace == "default" and audits[0].source == "consul"
    assert "consul:8500" not in " ".join(str(vars(r)) for r in audits)


def test_probes(running_webhook):
    hook = running_webhook(WebhookSettings())
    assert _get(hook, "/healthz") == (200, "ok")
    assert _get(hook, "/readyz") == (200, "ok")


def test_renewed_pair_is_picked_up_and_half_written_pair_keeps_old(tmp_path):
    import os

    from dynconf_k8s.webhook.tls import ServingTls

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _ca, first_cert, first_key = _mint(tmp_path / "a")
    cert.write_bytes(Path(first_cert).read_bytes())
    key.write_bytes(Path(first_key).read_bytes())
    tls = ServingTls(str(cert), str(key))
    assert tls.loaded
    cert.write_text("-----BEGIN CERTIFICATE-----\nhalf")
    os.utime(cert, ns=(1, 1))
    assert tls.reload() is False and tls.loaded
    _ca2, second_cert, second_key = _mint(tmp_path / "b")
    cert.write_bytes(Path(second_cert).read_bytes())
    key.write_bytes(Path(second_key).read_bytes())
    os.utime(cert, ns=(2, 2))
    assert tls.reload() is True


def test_readyz_without_material_is_503():
    from dynconf_k8s.webhook.server import _ready

    assert _ready(WebhookSettings(), None) is False
    assert _ready(WebhookSettings(plaintext=True), None) is True


def test_serve_refuses_plain_http_without_material(tmp_path):
    import asyncio

    import pytest

    from dynconf_k8s.webhook.server import NoTlsMaterial, serve

    settings = WebhookSettings(
        tls_cert=str(tmp_path / "none.crt"), tls_key=str(tmp_path / "none.key")
    )
    with pytest.raises(NoTlsMaterial, match="DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT=1"):
        asyncio.run(serve(settings))


def _mint(directory):
    import importlib.util
    from pathlib import Path

    directory.mkdir(parents=True, exist_ok=True)
    spec = importlib.util.spec_from_file_location(
        "_webhook_conftest", Path(__file__).parent / "conftest.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mint_pair(directory)


def test_self_rotate_serving_waits_for_the_pair_then_reports_its_expiry(tmp_path):
    import asyncio
    import shutil

    from cryptography import x509

    from dynconf_k8s.webhook.server import _await_pair
    from dynconf_k8s.webhook.tls import ServingTls

    tls = ServingTls(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    _ca, cert, key = _mint(tmp_path / "minted")

    async def scenario():
        stopping = asyncio.Event()
        waiting = asyncio.create_task(_await_pair(tls, 0.01, stopping))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        shutil.copy(key, tmp_path / "tls.key")
        shutil.copy(cert, tmp_path / "tls.crt")
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(scenario()) is True
    expected = x509.load_pem_x509_certificate(Path(cert).read_bytes()).not_valid_after_utc
    assert tls.not_after == expected.timestamp()


def test_self_rotate_wait_ends_on_sigterm(tmp_path):
    import asyncio

    from dynconf_k8s.webhook.server import _await_pair
    from dynconf_k8s.webhook.tls import ServingTls

    tls = ServingTls(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))

    async def scenario():
        stopping = asyncio.Event()
        stopping.set()
        return await _await_pair(tls, 60, stopping)

    assert asyncio.run(scenario()) is False


def test_audit_line_of_a_refused_pod_carries_only_a_parsed_source(
    running_webhook, make_pod, caplog
):
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    raw = 'consul\n{"forged": "audit"} s3cr3t-token'
    with caplog.at_level(logging.INFO, logger="dynconf_k8s.webhook"):
        _get(hook, "/mutate", _review(make_pod({**CANONICAL, "dynamic-config.rs/source": raw})))
        _get(hook, "/mutate", _review(make_pod({**CANONICAL, "dynamic-config.rs/mode": "x"})))
    audits = [r for r in caplog.records if r.getMessage() == "admission"]
    assert [(r.outcome, r.source) for r in audits] == [("refused", None), ("refused", "consul")]
    assert "s3cr3t" not in " ".join(str(vars(r)) for r in audits)


def test_sigterm_goes_on_admitting_while_readyz_withdraws_then_exits(tmp_path, make_pod):
    """A deleted replica stays in the Service's endpoints a moment after its SIGTERM: it must
    keep answering /mutate through the shutdown delay (readyz 503 meanwhile), or the API
    server's admissions to it meet a closed port and Ignore starts pods without the agent."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.error

    def free() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    port, metrics = free(), free()
    env = {
        **os.environ,
        "DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT": "1",
        "DYNAMIC_CONFIG_WEBHOOK_ADDR": f"127.0.0.1:{port}",
        "DYNAMIC_CONFIG_WEBHOOK_METRICS_ADDR": f"127.0.0.1:{metrics}",
        "DYNAMIC_CONFIG_WEBHOOK_SHUTDOWN_DELAY_SECONDS": "2",
        "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(tmp_path / "none.yaml"),
    }
    webhook = Path(sys.executable).with_name("dynamic-config-webhook")
    process = subprocess.Popen(
        [str(webhook), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    review = _review(make_pod())

    def status(path: str, target: int, body: bytes | None = None) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{target}{path}", data=body)
        try:
            with urllib.request.urlopen(request, timeout=2) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if status("/readyz", metrics) == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the webhook never became ready"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        time.sleep(0.5)
        assert status("/readyz", metrics) == 503
        assert status("/mutate", port, review) == 200  # still admitting
        assert process.wait(timeout=20) == 0
        took = time.monotonic() - signalled
        assert 1.8 <= took <= 10, f"exited {took:.1f} s after SIGTERM"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


def test_a_shutdown_delay_out_of_range_is_refused_naming_the_variable():
    import pytest

    from dynconf_k8s.contract import InstallationError

    with pytest.raises(InstallationError, match="SHUTDOWN_DELAY_SECONDS takes seconds"):
        WebhookSettings.from_environ({"DYNAMIC_CONFIG_WEBHOOK_SHUTDOWN_DELAY_SECONDS": "5m"})
