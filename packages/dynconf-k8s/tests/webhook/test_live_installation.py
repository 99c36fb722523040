"""The installation reconfigures itself live from the mounted document, with no restart.

The document is written the way the kubelet updates a ConfigMap volume (a new timestamped
directory, then the ``..data`` symlink swapped onto it), and admissions go through the real
served app over TLS while it changes.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dynconf_k8s.contract import ENV, InstallationError
from dynconf_k8s.inforce import DocumentWatch, InstallationInForce
from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.metrics import WebhookMetrics
from dynconf_k8s.webhook.settings import WebhookSettings, load_installation

OLD = """\
source: consul
path: /config/app.json
watchSeconds: 30
storeDefaults:
  consul:
    endpoint: http://consul.infra:8500
"""
NEW = OLD.replace("watchSeconds: 30", "watchSeconds: 7")
BAD = OLD.replace("watchSeconds: 30", "watchSeconds: soon")
POD_ANNOTATIONS = {"dynamic-config.rs/inject": "true", "dynamic-config.rs/key": "app/config.json"}
"""Admitted only because the installation supplies source, endpoint and path: an empty or
half-applied installation would refuse it."""


class KubeletMount:
    """A ConfigMap volume as the kubelet keeps it: ``name -> ..data/name``, ``..data -> ..<ts>``."""

    def __init__(self, root: Path, name: str = "installation.yaml") -> None:
        self.root, self.name, self._count = root, name, 0
        root.mkdir(parents=True, exist_ok=True)

    @property
    def path(self) -> str:
        return str(self.root / self.name)

    def write(self, text: str) -> None:
        self._count += 1
        version = self.root / f"..2026_12_02_{self._count:06d}"
        version.mkdir()
        (version / self.name).write_text(text, encoding="utf-8")
        previous = (
            os.readlink(self.root / "..data") if (self.root / "..data").is_symlink() else None
        )
        os.symlink(version.name, self.root / "..data_tmp")
        os.replace(self.root / "..data_tmp", self.root / "..data")
        if not (self.root / self.name).is_symlink():
            os.symlink(f"..data/{self.name}", self.root / self.name)
        if previous:
            for child in (self.root / previous).iterdir():
                child.unlink()
            (self.root / previous).rmdir()


def _holder(mount: KubeletMount, **env: str) -> InstallationInForce:
    environ = {ENV.DEFAULTS_FILE: mount.path, **env}
    return InstallationInForce(load_installation(environ), environ, origin=mount.path)


def _sample(metrics: WebhookMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels or None)


@pytest.fixture
def mount(tmp_path: Path) -> KubeletMount:
    mounted = KubeletMount(tmp_path / "etc-dynamic-config")
    mounted.write(OLD)
    return mounted


def test_document_swapped_by_the_kubelet_is_applied_live(mount: KubeletMount) -> None:
    holder = _holder(mount)
    watch = DocumentWatch(mount.path, holder)
    assert holder.current.fleet["watch-seconds"].text == "30"

    mount.write(NEW)
    offer = watch.check()

    assert offer is not None and offer.outcome == "applied"
    assert holder.current.fleet["watch-seconds"].text == "7"
    assert holder.applied.generation == 2
    assert watch.check() is None, "an unchanged mount is not offered again"


def test_bad_edit_keeps_the_last_good_installation_and_says_so(
    mount: KubeletMount, caplog: pytest.LogCaptureFixture
) -> None:
    holder = _holder(mount)
    metrics = WebhookMetrics()
    metrics.installation.follow(holder)
    watch = DocumentWatch(mount.path, holder)
    good = holder.current

    mount.write(BAD)
    with caplog.at_level(logging.ERROR, logger="dynconf_k8s.inforce"):
        offer = watch.check()

    assert offer is not None and offer.outcome == "refused"
    assert holder.current is good
    assert not holder.valid
    [line] = [r for r in caplog.records if r.getMessage() == "installation_refused"]
    assert line.problem == "DYNAMIC_CONFIG_AGENT_WATCH_SECONDS takes whole seconds, for example 15"
    assert (line.generation, line.in_force) == (2, 1)
    reloads = "dynamic_config_webhook_installation_reloads_total"
    assert _sample(metrics, reloads, outcome="refused") == 1.0
    assert _sample(metrics, "dynamic_config_webhook_installation_valid") == 0.0
    assert _sample(metrics, "dynamic_config_webhook_installation_generation") == 1.0

    mount.write(NEW)
    assert (fixed := watch.check()) is not None and fixed.outcome == "applied"
    assert _sample(metrics, "dynamic_config_webhook_installation_valid") == 1.0
    assert _sample(metrics, "dynamic_config_webhook_installation_generation") == 3.0


def test_refused_edit_logs_no_document_value(
    mount: KubeletMount, caplog: pytest.LogCaptureFixture
) -> None:
    holder = _holder(mount)
    watch = DocumentWatch(mount.path, holder)
    mount.write('storeDefaults: "vault endpoint=https://vault.secret-host.example"\n')

    with caplog.at_level(logging.DEBUG, logger="dynconf_k8s.inforce"):
        offer = watch.check()

    assert offer is not None and offer.outcome == "refused"
    assert "group 1 has no `store:` head" in offer.first_problem
    assert "secret-host" not in " ".join(str(vars(r)) for r in caplog.records)


def test_vanished_document_keeps_the_last_good_installation(mount: KubeletMount) -> None:
    holder = _holder(mount)
    watch = DocumentWatch(mount.path, holder)
    good = holder.current

    (mount.root / mount.name).unlink()

    assert watch.check() is None
    assert holder.current is good and holder.valid


def test_variables_still_win_over_a_live_document(mount: KubeletMount) -> None:
    holder = _holder(mount, DYNAMIC_CONFIG_AGENT_WATCH_SECONDS="60")
    watch = DocumentWatch(mount.path, holder)

    mount.write(NEW)
    offer = watch.check()

    assert offer is not None and offer.outcome == "unchanged"
    assert holder.current.fleet["watch-seconds"].text == "60"


def test_settings_take_one_live_source(mount: KubeletMount) -> None:
    env = {ENV.DEFAULTS_FILE: mount.path, "DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS": "5"}
    settings = WebhookSettings.from_environ(env)
    assert settings.reload_seconds == 5.0 and settings.installation_resource is None
    assert settings.document == mount.path

    with pytest.raises(InstallationError, match="set one"):
        WebhookSettings.from_environ({**env, "DYNAMIC_CONFIG_WEBHOOK_INSTALLATION": "default"})
    with pytest.raises(InstallationError, match="DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS takes"):
        WebhookSettings.from_environ({**env, "DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS": "often"})


def _review(uid: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "annotations": POD_ANNOTATIONS},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "namespace": "default", "object": pod},
    }


def test_edit_under_admission_load_refuses_nothing_either_installation_admits(
    mount: KubeletMount, running_webhook: Any
) -> None:
    holder = _holder(mount)
    old = holder.current
    new_mount = KubeletMount(mount.root.parent / "expected-new")
    new_mount.write(NEW)
    new = _holder(new_mount).current
    review = _review("load")
    expected = {
        "old": decide(review, old).response,
        "new": decide(review, new).response,
    }
    assert expected["old"] != expected["new"]
    assert all(r["response"]["allowed"] for r in expected.values())
    hook = running_webhook(WebhookSettings(installation=old), installation=holder)
    watch = DocumentWatch(mount.path, holder, every=0.005)
    stop = threading.Event()
    seen: dict[str, int] = {"old": 0, "new": 0, "other": 0}
    others: list[str] = []

    def admit_in_a_loop() -> None:
        context = ssl.create_default_context(cafile=hook.ca)
        connection = http.client.HTTPSConnection("127.0.0.1", hook.port, context=context)
        body = json.dumps(review)
        try:
            while not stop.is_set():
                connection.request("POST", "/mutate", body, {"content-type": "application/json"})
                answer = json.loads(connection.getresponse().read())
                which = next((k for k, v in expected.items() if v == answer), "other")
                seen[which] += 1
                if which == "other":
                    others.append(json.dumps(answer["response"].get("status")))
        finally:
            connection.close()

    clients = [threading.Thread(target=admit_in_a_loop, name=f"admit-{i}") for i in range(3)]
    watcher = threading.Thread(target=watch.run, args=(stop,), name="installation")
    for thread in (*clients, watcher):
        thread.start()
    try:
        for round_ in range(20):
            mount.write(NEW if round_ % 2 == 0 else OLD)
            time.sleep(0.05)
        mount.write(NEW)
        deadline = time.monotonic() + 5
        while holder.current != new and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        for thread in (*clients, watcher):
            thread.join(timeout=10)

    assert holder.current == new
    assert seen["other"] == 0, f"answers neither installation gives: {others[:3]}"
    assert seen["old"] > 0 and seen["new"] > 0, seen
    applied = hook.metrics.registry.get_sample_value(
        "dynamic_config_webhook_installation_reloads_total", {"outcome": "applied"}
    )
    assert applied is not None and applied >= 2


def test_served_process_applies_a_document_edit_without_a_restart(mount: KubeletMount) -> None:
    import signal
    import subprocess
    import sys
    import urllib.request

    from tests.fixtures.eventually import eventually

    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")},
        "DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT": "1",
        "DYNAMIC_CONFIG_WEBHOOK_ADDR": f"127.0.0.1:{port}",
        "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": mount.path,
        "DYNAMIC_CONFIG_WEBHOOK_RELOAD_SECONDS": "0.1",
    }
    binary = Path(sys.executable).with_name("dynamic-config-webhook")
    process = subprocess.Popen(
        [str(binary), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )

    def watch_flag() -> str:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mutate",
            data=json.dumps(_review("served")).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            response = json.loads(answer.read())["response"]
        assert response["allowed"], response
        patch = json.loads(base64.b64decode(response["patch"]))
        [agent] = [op["value"] for op in patch if isinstance(op.get("value"), dict)
                   and op["value"].get("name") == "dynamic-config-agent"]  # fmt: skip
        return str(agent["args"][agent["args"].index("--watch") + 1])

    try:
        assert eventually(lambda: _answers(port), timeout=20)
        assert watch_flag() == "30"
        mount.write(NEW)
        assert eventually(lambda: watch_flag() == "7", timeout=10)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            metrics = answer.read().decode()
        assert 'dynamic_config_webhook_installation_reloads_total{outcome="applied"} 1.0' in metrics
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output
    assert '"installation_applied"' in output


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
            return True
    except OSError:
        return False


def test_a_replica_is_not_ready_until_the_resource_is_in_force(running_webhook: Any) -> None:
    synced = threading.Event()
    hook = running_webhook(WebhookSettings(), synced=synced)
    context = ssl.create_default_context(cafile=hook.ca)

    def readyz() -> tuple[int, str]:
        connection = http.client.HTTPSConnection("127.0.0.1", hook.port, context=context)
        try:
            connection.request("GET", "/readyz")
            answer = connection.getresponse()
            return answer.status, answer.read().decode()
        finally:
            connection.close()

    assert readyz() == (503, "the installation resource is not in force yet")
    synced.set()
    assert readyz() == (200, "ok")
