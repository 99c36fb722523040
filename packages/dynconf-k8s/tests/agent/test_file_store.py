"""Every behaviour of the agent against the embedded ``file`` store (fast, no server).

Each test runs ``dynamic-config-agent`` as a subprocess, changes the world (the document, the
rendered file, the template, the canary file) and waits for the agent to say so in its files,
its JSON logs or its metrics, scraped and parsed with prometheus-client's parser.
"""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dynconf_k8s.agent.metrics import SERIES

from .conftest import AgentProcess, read, wait_file, wait_for

Start = Callable[..., AgentProcess]


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    doc = tmp_path / "store" / "app.yaml"
    doc.parent.mkdir()
    doc.write_text("db:\n  host: db-1\n  port: 5432\nflags:\n  beta: true\n")
    out = tmp_path / "config"
    out.mkdir()
    return {"doc": doc, "out": out, "tmp": tmp_path}


def sidecar(
    start: Start,
    world: dict[str, Path],
    *extra: str,
    out: str = "app.json",
    env: dict[str, str] | None = None,
) -> AgentProcess:
    return start(
        "--source",
        "file",
        "--key",
        str(world["doc"]),
        "--out",
        str(world["out"] / out),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        *extra,
        env=env,
    )


def test_one_shot_renders_once_and_exits_zero(agent: Start, world: dict[str, Path]) -> None:
    process = agent(
        "--source",
        "file",
        "--key",
        str(world["doc"]),
        "--out",
        str(world["out"] / "app.properties"),
    )
    assert process.wait_exit() == 0
    assert (
        read(world["out"] / "app.properties")
        == "db.host = db-1\ndb.port = 5432\nflags.beta = true\n"
    )
    assert process.events("agent starting") and process.events("rendered")


def test_one_shot_fails_when_the_document_is_absent(agent: Start, world: dict[str, Path]) -> None:
    world["doc"].unlink()
    process = agent(
        "--source", "file", "--key", str(world["doc"]), "--out", str(world["out"] / "a.json")
    )
    assert process.wait_exit() == 1
    failed = process.events("agent_failed")
    assert len(failed) == 1 and "not in the store" in failed[0]["reason"]


def test_sidecar_rerenders_on_change_and_reports_27_series_in_order(
    agent: Start, world: dict[str, Path]
) -> None:
    process = sidecar(agent, world, "--section", "db")
    target = world["out"] / "app.json"
    wait_file(target, lambda t: '"db-1"' in t)
    assert process.get("/readyz") == (200, "ok\n")
    process.wait_metric("resyncs_total", lambda v: v >= 1)  # the watch is open by now
    world["doc"].write_text("db:\n  host: db-2\n  port: 5432\n")
    wait_file(target, lambda t: '"db-2"' in t)
    assert json.loads(target.read_text()) == {"host": "db-2", "port": 5432}
    process.wait_metric("deliveries_total", lambda v: v >= 1)
    _status, text = process.get("/metrics")
    names = [f.name for f in text_string_to_metric_families(text)]
    expected = [f"dynamic_config_agent_{n.removesuffix('_total')}" for n, _, _ in SERIES]
    assert names[:27] == expected
    assert names[27:] == [
        "dynamic_config_agent_reconcile_duration_seconds",
        "dynamic_config_agent_reconcile_failures",
        "dynamic_config_agent_store_requests",
    ]
    assert "# TYPE dynamic_config_agent_renders_total counter" in text
    samples = process.scrape()
    assert samples["dynamic_config_agent_renders_total"] == 2
    assert samples["dynamic_config_agent_watch_connected"] == 1
    assert samples["dynamic_config_agent_canary_percent"] == 100
    assert samples["dynamic_config_agent_reconcile_duration_seconds_bucket{le=+Inf}"] == 2
    assert process.get("/healthz") == (200, "ok\n")
    assert process.stop() == 0


def test_resync_counts_and_unchanged_document_is_not_rewritten(
    agent: Start, world: dict[str, Path]
) -> None:
    process = sidecar(agent, world)
    target = world["out"] / "app.json"
    wait_file(target, lambda t: "db-1" in t)
    inode = target.stat().st_ino
    process.wait_metric("resyncs_total", lambda v: v >= 2)
    assert target.stat().st_ino == inode
    assert process.metric("renders_total") == 1
    assert process.metric("staleness_seconds") <= 1


def test_also_outputs_are_published_all_or_none(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(
        agent,
        world,
        "--also",
        f"out={world['out'] / 'db.yaml'},section=db",
        "--also",
        f"out={world['out'] / 'flags.ini'},section=flags",
    )
    wait_file(world["out"] / "flags.ini", lambda t: "beta = true" in t)
    assert "host: db-1" in (world["out"] / "db.yaml").read_text()
    world["doc"].write_text("db:\n  host: db-2\n  port: 5432\n")  # no flags section any more
    process.wait_metric("render_failures_total", lambda v: v >= 1)
    assert "db-1" in (world["out"] / "app.json").read_text()
    assert "host: db-1" in (world["out"] / "db.yaml").read_text()
    assert process.events("render_failed")[0]["path"] == "flags"


def test_template_edited_into_an_error_keeps_the_last_file_then_recovers(
    agent: Start, world: dict[str, Path]
) -> None:
    template = world["tmp"] / "app.env.tpl"
    template.write_text("DB={{ db.host }}:{{ db.port }}\n")
    process = sidecar(agent, world, "--template", str(template), out="app.env")
    target = world["out"] / "app.env"
    wait_file(target, lambda t: t == "DB=db-1:5432\n")
    template.write_text("DB={{ db.hots }}\n")
    world["doc"].write_text("db:\n  host: db-2\n  port: 5432\n")
    process.wait_metric("render_failures_total", lambda v: v >= 1)
    assert target.read_text() == "DB=db-1:5432\n"
    template.write_text("DB={{ db.host }}\n")
    world["doc"].write_text("db:\n  host: db-3\n  port: 5432\n")
    wait_file(target, lambda t: t == "DB=db-3\n")


def test_first_render_failure_is_fatal(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(agent, world, "--template-inline", "{{ db.hots }}", out="app.env")
    assert process.wait_exit() == 1
    assert "the first render failed" in process.events("agent_failed")[0]["reason"]


def test_schema_is_reread_every_render(agent: Start, world: dict[str, Path]) -> None:
    schema = world["tmp"] / "schema.json"
    schema.write_text(json.dumps({"type": "object"}))
    process = sidecar(agent, world, "--schema", str(schema))
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    schema.write_text(json.dumps({"type": "object", "required": ["cache"]}))
    world["doc"].write_text("db:\n  host: db-2\n")
    process.wait_metric("render_failures_total", lambda v: v >= 1)
    assert "db-1" in (world["out"] / "app.json").read_text()
    assert "schema" in process.events("render_failed")[0]["reason"]


def test_size_ceiling_refuses_and_keeps_the_file(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(agent, world, "--max-document-bytes", "200")
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    world["doc"].write_text("db:\n  host: " + "x" * 300 + "\n")
    process.wait_metric("render_failures_total", lambda v: v >= 1)
    # the counter may move first for a resync that read the same refusal (fetch_failed)
    assert "past the 200-byte ceiling" in process.wait_event("render_failed")["reason"]


def test_meta_history_and_mode(agent: Start, world: dict[str, Path]) -> None:
    sidecar(agent, world, "--meta", "--history", "2", "--file-mode", "0640")
    target = world["out"] / "app.json"
    wait_file(target, lambda t: "db-1" in t)
    for n in (2, 3, 4):
        world["doc"].write_text(f"db:\n  host: db-{n}\n")
        wait_file(target, lambda t, n=n: f"db-{n}" in t)
    meta = json.loads((world["out"] / ".app.json.meta").read_text())
    assert meta["fingerprint"].startswith("sha256:") and meta["revision"]
    assert oct(target.stat().st_mode & 0o777) == "0o640"
    history = sorted((world["out"] / ".app.json.history").iterdir())
    assert len(history) == 2
    assert all(oct(p.stat().st_mode & 0o777) == "0o640" for p in history)


@pytest.mark.parametrize("policy", ["retain", "remove"])
def test_deleted_document_then_recreated(agent: Start, world: dict[str, Path], policy: str) -> None:
    process = sidecar(agent, world, "--on-delete", policy)
    target = world["out"] / "app.json"
    wait_file(target, lambda t: "db-1" in t)
    world["doc"].unlink()
    process.wait_metric("absent", lambda v: v == 1)
    assert process.metric("absent_total") == 1
    if policy == "retain":
        assert "db-1" in target.read_text()
    else:
        wait_file(target, lambda t: t == "")
    world["doc"].write_text("db:\n  host: db-1\n")
    wait_file(target, lambda t: "db-1" in t)
    process.wait_metric("absent", lambda v: v == 0)
    assert process.metric("absent_total") == 1


def test_deleted_document_under_fail_ends_the_agent(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(agent, world, "--on-delete", "fail")
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    world["doc"].unlink()
    assert process.wait_exit() == 1
    assert process.events("agent_failed")[0]["reason"] == "the document is no longer in the store"


@pytest.mark.parametrize("policy", ["warn", "repair"])
def test_file_edited_by_someone_else(agent: Start, world: dict[str, Path], policy: str) -> None:
    process = sidecar(agent, world, "--on-drift", policy)
    target = world["out"] / "app.json"
    original = wait_file(target, lambda t: "db-1" in t)
    target.write_text("{}\n")
    process.wait_metric("drift_total", lambda v: v == 1)
    if policy == "repair":
        wait_file(target, lambda t: t == original)
        process.wait_metric("drift", lambda v: v == 0)
    else:
        assert process.metric("drift") == 1
        assert target.read_text() == "{}\n"


def test_drift_under_fail_ends_the_agent(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(agent, world, "--on-drift", "fail")
    target = world["out"] / "app.json"
    wait_file(target, lambda t: "db-1" in t)
    target.unlink()
    assert process.wait_exit() == 1
    assert (
        process.events("agent_failed")[0]["reason"]
        == "the rendered file was written by something else"
    )


def test_store_down_at_start_without_cache_is_fatal_under_allow_cached(
    agent: Start, world: dict[str, Path]
) -> None:
    world["doc"].unlink()
    world["doc"].mkdir()  # the store answers with an error, not "gone"
    process = sidecar(agent, world)
    assert process.wait_exit() == 1
    assert "holds nothing to serve" in process.events("agent_failed")[0]["reason"]


def test_store_down_at_start_under_require_fresh_is_fatal(
    agent: Start, world: dict[str, Path]
) -> None:
    (world["out"] / "app.json").write_text('{"cached": true}\n')
    world["doc"].unlink()
    world["doc"].mkdir()
    process = sidecar(agent, world, "--startup-policy", "require-fresh")
    assert process.wait_exit() == 1
    assert process.events("agent_failed")[0]["reason"].startswith("the first fetch failed")


def test_store_down_at_start_with_cache_serves_it_unready_then_recovers(
    agent: Start, world: dict[str, Path]
) -> None:
    target = world["out"] / "app.json"
    target.write_text('{"cached": true}\n')
    text = world["doc"].read_text()
    world["doc"].unlink()
    world["doc"].mkdir()
    process = sidecar(agent, world)
    process.wait_event("serving_cached")
    assert process.get("/readyz") == (503, "no configuration rendered\n")
    samples = process.scrape()
    assert samples["dynamic_config_agent_render_failures_total"] >= 1
    assert samples["dynamic_config_agent_renders_total"] == 0
    assert samples["dynamic_config_agent_staleness_seconds"] == 0
    assert target.read_text() == '{"cached": true}\n'
    world["doc"].rmdir()
    world["doc"].write_text(text)
    wait_file(target, lambda t: "db-1" in t)
    wait_for(lambda: process.get("/readyz")[0] == 200, what="ready")


def test_best_effort_writes_empty_outputs_and_continues(
    agent: Start, world: dict[str, Path]
) -> None:
    text = world["doc"].read_text()
    world["doc"].unlink()
    process = sidecar(
        agent,
        world,
        "--startup-policy",
        "best-effort",
        "--also",
        f"out={world['out'] / 'db.yaml'},section=db",
    )
    process.wait_event("serving_empty")
    assert (world["out"] / "app.json").read_text() == ""
    assert (world["out"] / "db.yaml").read_text() == ""
    assert process.get("/readyz")[0] == 503
    world["doc"].write_text(text)
    wait_file(world["out"] / "db.yaml", lambda t: "db-1" in t)


def test_max_staleness_makes_the_pod_unready(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(agent, world, "--max-staleness", "2s")
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    wait_for(lambda: process.get("/readyz")[0] == 200, what="ready")
    shutil.move(world["doc"], world["tmp"] / "aside.yaml")
    world["doc"].mkdir()  # reads now fail: nothing fresh arrives
    wait_for(lambda: process.get("/readyz")[0] == 503, timeout=15, what="stale")
    assert process.metric("staleness_seconds") >= 2


def test_require_ack_gates_readiness(agent: Start, world: dict[str, Path]) -> None:
    process = sidecar(agent, world, "--require-ack", "--meta")
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    assert process.get("/readyz")[0] == 503
    assert process.get("/applied", b"") == (
        400,
        "the body is the fingerprint this application is running\n",
    )
    fingerprint = json.loads((world["out"] / ".app.json.meta").read_text())["fingerprint"]
    status, body = process.get("/applied", b"sha256:old\n")
    assert (status, body) == (409, f"a different document is published: {fingerprint}\n")
    assert process.get("/applied", fingerprint.encode() + b"\n") == (200, "current\n")
    assert process.get("/readyz") == (200, "ok\n")
    samples = process.scrape()
    assert samples["dynamic_config_agent_acks_total"] == 3 - 1  # the empty body is not an ack
    assert samples["dynamic_config_agent_ack_mismatches_total"] == 1
    assert samples["dynamic_config_agent_applied"] == 1
    world["doc"].write_text("db:\n  host: db-2\n")
    wait_for(lambda: process.get("/readyz")[0] == 503, what="unapplied after a new render")
    assert process.metric("applied") == 0


def test_canary_holds_until_the_percentage_admits(agent: Start, world: dict[str, Path]) -> None:
    percent = world["tmp"] / "percent"
    percent.write_text("0")
    process = sidecar(
        agent, world, "--canary", str(percent), env={"DYNAMIC_CONFIG_POD_NAME": "web-1"}
    )
    target = world["out"] / "app.json"
    wait_file(target, lambda t: "db-1" in t)  # the first render is never held
    world["doc"].write_text("db:\n  host: db-2\n")
    process.wait_metric("canary_holding", lambda v: v == 1)
    assert process.metric("canary_percent") == 0
    assert "db-1" in target.read_text()
    percent.write_text("100")
    wait_file(target, lambda t: "db-2" in t)
    process.wait_metric("canary_holding", lambda v: v == 0)
    assert process.metric("canary_percent") == 100


def test_canary_garbage_is_no_canary(agent: Start, world: dict[str, Path]) -> None:
    percent = world["tmp"] / "percent"
    percent.write_text("five")
    process = sidecar(agent, world, "--canary", str(percent))
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    world["doc"].write_text("db:\n  host: db-2\n")
    wait_file(world["out"] / "app.json", lambda t: "db-2" in t)
    assert process.metric("canary_holding") == 0


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, str, bool]]] = []
    watched: Path = Path()
    status = 204

    def do_POST(self) -> None:
        present = self.watched.exists() and "db-2" in self.watched.read_text()
        self.seen.append(
            (self.path, self.headers["User-Agent"], self.headers["Content-Length"], present)
        )
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def recorder(world: dict[str, Path]) -> Iterator[tuple[int, type[_Recorder]]]:
    handler = type("Rec", (_Recorder,), {"seen": [], "watched": world["out"] / "app.json"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], handler
    server.shutdown()
    server.server_close()


def test_notify_http_posts_after_the_rename(
    agent: Start, world: dict[str, Path], recorder: tuple[int, type[_Recorder]]
) -> None:
    port, handler = recorder
    process = sidecar(agent, world, "--notify-http", f"http://127.0.0.1:{port}/-/reload")
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    world["doc"].write_text("db:\n  host: db-2\n")
    process.wait_metric("notifications_total", lambda v: v == 1)
    assert handler.seen == [("/-/reload", "dynamic-config-agent", "0", True)]


def test_notify_failure_is_counted_never_fatal(
    agent: Start, world: dict[str, Path], recorder: tuple[int, type[_Recorder]]
) -> None:
    port, handler = recorder
    handler.status = 500
    process = sidecar(agent, world, "--notify-http", f"http://localhost:{port}/")
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    world["doc"].write_text("db:\n  host: db-2\n")
    process.wait_metric("notification_failures_total", lambda v: v == 1)
    world["doc"].write_text("db:\n  host: db-3\n")
    wait_file(world["out"] / "app.json", lambda t: "db-3" in t)


def test_sigterm_exits_zero_promptly(agent: Start, world: dict[str, Path]) -> None:
    import time

    process = sidecar(agent, world)
    wait_file(world["out"] / "app.json", lambda t: "db-1" in t)
    began = time.monotonic()
    assert process.stop() == 0
    assert time.monotonic() - began < 3
    assert process.events("stopped")


def test_logs_are_json_lines_without_values(agent: Start, world: dict[str, Path]) -> None:
    world["doc"].write_text("db:\n  password: hunter2-secret\n")
    process = sidecar(agent, world)
    wait_file(world["out"] / "app.json", lambda t: "hunter2" in t)
    process.stop()
    assert process.raw and all(line.startswith("{") for line in process.raw)
    assert not any("hunter2" in line for line in process.raw)


def test_a_store_outside_the_plugin_lock_is_refused_by_name(
    agent: Start, world: dict[str, Path]
) -> None:
    lock = world["tmp"] / "plugins.lock"
    from importlib.metadata import version

    lock.write_text(
        json.dumps(
            {
                "version": 1,
                "group": "dynconf",
                "plugins": [
                    {
                        "distribution": "dynconf-core",
                        "version": version("dynconf-core"),
                        "name": "builtin",
                        "value": "dynconf.builtin",
                    }
                ],
            }
        )
    )
    process = agent(
        "--source",
        "consul",
        "--endpoint",
        "http://127.0.0.1:1",
        "--key",
        "a.json",
        "--out",
        str(world["out"] / "a.json"),
        env={"DYNCONF_PLUGIN_LOCK": str(lock)},
    )
    assert process.wait_exit() == 1
    reason = process.events("agent_failed")[0]["reason"]
    assert reason.startswith(f"the consul store is not in this agent's plugin lock ({lock})")
    ok = agent(
        "--source",
        "file",
        "--key",
        str(world["doc"]),
        "--out",
        str(world["out"] / "b.json"),
        env={"DYNCONF_PLUGIN_LOCK": str(lock)},
    )
    assert ok.wait_exit() == 0


@pytest.mark.parametrize("name", ["deep", "digits", "surrogate"])
def test_a_hostile_document_is_one_line_and_the_agent_keeps_watching(
    agent: Start, world: dict[str, Path], name: str
) -> None:
    from tests.fixtures.hostile_documents import HOSTILE

    doc = world["tmp"] / "store" / "app.json"
    doc.write_text('{"db": {"port": 1}}')
    out = world["out"] / "app.toml"
    process = agent("--source", "file", "--key", str(doc), "--out", str(out), "--watch", "1",
                    "--metrics-addr", "127.0.0.1:0")  # fmt: skip
    wait_file(out, lambda t: "port = 1" in t)
    doc.write_text(HOSTILE[name])
    failed = process.wait_event("render_failed")
    assert "\n" not in failed["reason"] and "7777" not in failed["reason"]
    assert "port = 1" in out.read_text()  # the last good file stays
    doc.write_text('{"db": {"port": 2}}')
    wait_file(out, lambda t: "port = 2" in t)
    assert process.proc.poll() is None


@pytest.mark.parametrize("component", [".app.json.history", "app.json", ".app.json.meta"])
def test_a_symlink_swapped_into_the_volume_is_never_followed(
    agent: Start, world: dict[str, Path], component: str
) -> None:
    outside = world["tmp"] / "outside"
    outside.mkdir()
    for name in ("app.json", ".app.json.meta", "0-000000000000.json"):
        (outside / name).write_text(f"not yours: {name}")
    before = {p.name: p.read_text() for p in outside.iterdir()}
    process = sidecar(agent, world, "--history", "1", "--meta")
    out = world["out"] / "app.json"
    wait_file(out, lambda t: "db-1" in t)
    world["doc"].write_text("db:\n  host: db-2\n")
    wait_file(out, lambda t: "db-2" in t)  # a history entry and a meta file now exist
    swapped = world["out"] / component
    if swapped.is_dir():
        shutil.rmtree(swapped)
    else:
        swapped.unlink()
    swapped.symlink_to(outside if component.endswith(".history") else outside / component)
    for host in ("db-3", "db-4"):  # past the history limit: pruning runs too
        world["doc"].write_text(f"db:\n  host: {host}\n")
        if component.endswith(".history"):
            process.wait_metric("render_failures_total", lambda v: v >= 1)
        else:
            wait_file(out, lambda t, host=host: host in t)
    assert {p.name: p.read_text() for p in outside.iterdir()} == before
    assert process.proc.poll() is None


def test_a_small_document_in_a_format_is_prepared_on_the_loop(tmp_path: Path) -> None:
    """No worker-thread hop for a small document without a template or a schema (it costs
    more than the parse); a large one, a template or a schema file goes to a worker."""
    from dynconf.file_store import FileSource
    from dynconf.follow import StoreDriver
    from dynconf.stores import Fetched
    from dynconf_k8s.agent.flags import parse_args
    from dynconf_k8s.agent.loop import INLINE_PREPARE_BYTES, WatchLoop
    from dynconf_k8s.agent.metrics import AgentMetrics, AgentState

    doc = tmp_path / "doc.json"
    doc.write_text("{}")
    base = ["--source", "file", "--key", str(doc), "--out", str(tmp_path / "app.json")]

    def loop(*extra: str) -> WatchLoop:
        settings = parse_args([*base, "--watch", "1", *extra], {})
        return WatchLoop(
            settings, AgentMetrics(AgentState()), lambda: StoreDriver(FileSource(doc, "json"))
        )

    small = Fetched('{"a": 1}', "json")
    large = Fetched('{"a": "' + "x" * INLINE_PREPARE_BYTES + '"}', "json")
    schema = tmp_path / "schema.json"
    schema.write_text("{}")
    assert loop().prepares_on_the_loop(small)
    assert not loop().prepares_on_the_loop(large)
    assert not loop("--schema", str(schema)).prepares_on_the_loop(small)
    assert not loop("--template-inline", "{{ a }}").prepares_on_the_loop(small)


def test_the_interval_reconcile_waits_for_a_delivery_being_published(tmp_path: Path) -> None:
    """A tick that decides while a delivery's publish is still writing must not publish the
    same document again (CI saw two ``rendered`` lines for one S3 change, renders_total 3)."""
    import time

    import anyio

    from dynconf.file_store import FileSource
    from dynconf.follow import Delivery, StoreDriver
    from dynconf.pipeline import Prepared
    from dynconf.stores import Fetched
    from dynconf_k8s.agent.flags import parse_args
    from dynconf_k8s.agent.loop import WatchLoop
    from dynconf_k8s.agent.metrics import AgentMetrics, AgentState

    doc = tmp_path / "doc.json"
    doc.write_text('{"a": 1}')
    out = tmp_path / "app.json"

    class HeldPublish(WatchLoop):
        """Our loop, its publish held at a gate the test opens (the writing under way)."""

        gate: anyio.Event | None = None

        async def _publish(self, prepared: Prepared, *, repair: bool = False) -> None:
            if self.gate is not None:
                await self.gate.wait()
            await super()._publish(prepared, repair=repair)

    async def main() -> int:
        settings = parse_args(["--source", "file", "--key", str(doc), "--out", str(out)], {})
        loop = HeldPublish(
            settings, AgentMetrics(AgentState()), lambda: StoreDriver(FileSource(doc, "json"))
        )
        assert await loop.first_fetch()
        loop.gate = anyio.Event()
        change = Delivery(Fetched('{"a": 2}', "json"), "watch", time.monotonic())
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop._render, change)
            await anyio.sleep(0.05)  # the delivery has decided and is publishing
            tg.start_soon(loop._reconcile)
            await anyio.sleep(0.05)  # the tick has had its chance to decide
            loop.gate.set()
        assert json.loads(out.read_text()) == {"a": 2}
        return loop.state.renders_total

    assert anyio.run(main) == 2  # the first render and the change, each once
