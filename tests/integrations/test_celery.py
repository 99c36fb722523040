"""A real Celery worker (a subprocess, prefork pool, Redis broker and result backend from
the ``redis_server`` fixture): the configuration is loaded in ``worker_init``, re-armed in
the forked child, each task reads the snapshot it began with, and ``dynconf.readiness``
answers the child's generation."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from tests.integrations._support import REPO, assert_one_generation, wait_until, write_greeting

pytestmark = pytest.mark.redis


@dataclass(frozen=True)
class Worker:
    client: Celery
    config_file: Path
    process: subprocess.Popen[bytes]

    def call(self, name: str, *args: Any) -> Any:
        return self.client.send_task(name, args=args).get(timeout=30, interval=0.05)


@pytest.fixture(scope="module")
def worker(redis_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One worker for the module (its start is most of the time); tests edit relative to
    what it serves."""
    tmp_path = tmp_path_factory.mktemp("celery")
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    broker = redis_server.url.rsplit("/", 1)[0] + "/7"
    env = {
        **os.environ,
        "APP_CONFIG": str(config_file),
        "BROKER_URL": broker,
        "PYTHONPATH": str(REPO),
    }
    log = (tmp_path / "worker.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.integrations.celery_worker_app",
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
            "-n",
            f"dynconf-test-{os.getpid()}@localhost",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = Celery("test-client", broker=broker, backend=broker)
    try:
        yield Worker(client, config_file, process)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        client.close()
        log.close()
        print((tmp_path / "worker.log").read_text(errors="replace")[-4000:])


def test_celery_prefork_child_follows_the_file_it_inherited(worker: Worker) -> None:
    assert worker.call("tests.pid") != worker.process.pid  # tasks run in the forked child
    ready = worker.call("dynconf.readiness")
    assert ready["ready"] is True and ready["configs"]["app"]["watching"] is True
    # the first test on a fresh worker: loaded once in worker_init, before the fork; the child
    # re-armed the watcher without loading again
    assert ready["generations"] == {"app": 1}
    assert ready["configs"]["app"]["last_reason"] == "initial"


def test_celery_worker_task_reads_a_live_edit(worker: Worker) -> None:
    before = worker.call("dynconf.readiness")["generations"]["app"]
    write_greeting(worker.config_file, "salut")
    wait_until(lambda: worker.call("example.greet", "ada") == "salut, ada")
    ready = worker.call("dynconf.readiness")
    assert ready["generations"] == {"app": before + 1}
    assert ready["configs"]["app"]["last_reason"] == "file-changed"


def test_celery_task_sees_one_generation_across_a_reload(worker: Worker) -> None:
    write_greeting(worker.config_file, "hello")
    wait_until(lambda: worker.call("example.greet", "ada") == "hello, ada")
    assert_one_generation(worker.call("tests.during", "bonjour"), "hello", "bonjour")
    assert worker.call("example.greet", "ada") == "bonjour, ada"
