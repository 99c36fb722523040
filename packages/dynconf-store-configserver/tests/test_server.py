"""The server over real HTTP: merge, ETag, 401 vs the one 404, audit, metrics, rebuild on change."""

from __future__ import annotations

import contextlib
import json
import logging
import time

import pytest

from .conftest import METRICS_TOKEN, OTHER_TOKEN, TOKEN, base_settings, get

pytestmark = pytest.mark.configserver


def test_document_merges_files_profile_variant_and_environment(serve, config_dir, monkeypatch):
    monkeypatch.setenv("CSTEST_BILLING_DB__POOL", "9")
    server = serve(base_settings(config_dir), base=config_dir.root)
    status, headers, body = get(f"{server.url}/billing/prod")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "application": "billing", "profile": "prod", "generation": 1,
        "config": {"name": "billing", "port": 8080, "db": {"host": "db.prod", "pool": 9}},
    }  # fmt: skip


def test_stores_are_merged_between_files_and_environment(serve, config_dir):
    config_dir.write("store-a.json", '{"db": {"host": "from-store-a", "user": "a"}}')
    config_dir.write("store-b.json", '{"db": {"user": "b"}, "feature": true}')
    raw = base_settings(config_dir)
    raw["server"]["sections"][0]["stores"] = [
        {"source": "file", "key": str(config_dir.root / "store-a.json")},
        {"source": "file", "key": str(config_dir.root / "store-b.json")},
    ]
    server = serve(raw, base=config_dir.root)
    config = json.loads(get(f"{server.url}/billing/prod")[2])["config"]
    assert config["db"] == {"host": "from-store-a", "pool": 5, "user": "b"}
    assert config["feature"] is True


def test_etag_answers_304_and_generation_is_stable_across_requests(billing):
    status, headers, _ = get(f"{billing.url}/billing/prod")
    etag = headers["etag"]
    for _ in range(5):
        assert get(f"{billing.url}/billing/prod")[1]["etag"] == etag  # no rebuild per request
    status, _, body = get(f"{billing.url}/billing/prod", headers={"If-None-Match": etag})
    assert status == 304
    assert body == b""


def test_the_document_answer_carries_its_length_type_tag_and_no_cache(billing):
    """The document route is answered in front of the router: its headers are built there."""
    status, headers, body = get(f"{billing.url}/billing/prod")
    headers = {k.lower(): v for k, v in headers.items()}
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    assert headers["cache-control"] == "no-cache"
    assert json.loads(body)["generation"] == 1
    assert "dynconf-stale" not in headers
    status, again, body = get(
        f"{billing.url}/billing/prod", headers={"If-None-Match": headers["etag"]}
    )
    again = {k.lower(): v for k, v in again.items()}
    assert (status, body, again["etag"], again["cache-control"]) == (
        304, b"", headers["etag"], "no-cache"
    )  # fmt: skip


@pytest.mark.parametrize("path", ["/billing/prod/", "//prod", "/billing//prod", "/billing"])
def test_a_path_that_is_not_two_segments_is_the_one_404(billing, path):
    status, _, body = get(f"{billing.url}{path}")
    assert (status, body) == (404, b'{"error":"not_found"}')


def test_file_change_rebuilds_with_a_new_generation(billing, config_dir):
    config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.changed"\n')
    deadline = time.monotonic() + 10
    while True:
        envelope = json.loads(get(f"{billing.url}/billing/prod")[2])
        if envelope["generation"] == 2:
            break
        assert time.monotonic() < deadline, "the change was never installed"
        time.sleep(0.05)
    assert envelope["config"]["db"]["host"] == "db.changed"


def test_a_write_landing_while_a_rebuild_reads_the_files_is_not_lost(
    serve, config_dir, monkeypatch
):
    # Found by the e2e latency leg: a rebuild read the file, a write landed, and the rebuild
    # then recorded the *new* file's stat as seen, so the poll never noticed the write and the
    # server served the older document until the next change.  The write is placed in that
    # window here (it is a window of microseconds on a real machine).
    from dynconf_store_configserver.server import sections

    real_resolve = sections.resolve
    writes = ['[billing.db]\nhost = "db.raced"\n']

    def resolve_then_write(*args, **kwargs):
        resolved = real_resolve(*args, **kwargs)
        if (
            writes
            and len(writes) == 1
            and "db.first" in (config_dir.root / "billing.prod.toml").read_text()
        ):
            config_dir.write("billing.prod.toml", writes.pop())
        return resolved

    server = serve(base_settings(config_dir), base=config_dir.root)
    monkeypatch.setattr(sections, "resolve", resolve_then_write)
    config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.first"\n')
    deadline = time.monotonic() + 10
    while True:
        host = json.loads(get(f"{server.url}/billing/prod")[2])["config"]["db"]["host"]
        if host == "db.raced":
            break
        assert time.monotonic() < deadline, f"the raced write was lost; serving {host}"
        time.sleep(0.05)


def test_missing_or_bad_credential_is_401(billing):
    for token in (None, "wrong-token-wrong-token-wrong-token-00"):
        status, headers, body = get(f"{billing.url}/billing/prod", token=token)
        assert status == 401
        assert headers["www-authenticate"] == "Bearer"
        assert json.loads(body) == {"error": "unauthenticated"}
    assert get(f"{billing.url}/nothing/here", token=None)[0] == 401  # no route oracle either


def test_not_granted_not_present_malformed_and_unknown_are_one_identical_404(billing):
    def strip(headers: dict[str, str]) -> dict[str, str]:
        return {k.lower(): v for k, v in headers.items() if k.lower() != "date"}

    answers = [
        get(f"{billing.url}/shop/prod"),  # exists, not granted
        get(f"{billing.url}/billing/staging"),  # granted application, no such profile
        get(f"{billing.url}/nothing/prod"),  # no such application
        get(f"{billing.url}/bad%20name/prod"),  # malformed
        get(f"{billing.url}/billing/prod/explain/x"),  # unknown route
        get(f"{billing.url}/billing/prod", method="POST"),  # other method
        get(f"{billing.url}/shop/prod/stream"),
    ]
    first = answers[0]
    assert first[0] == 404
    assert first[2] == b'{"error":"not_found"}'
    for answer in answers[1:]:
        assert (answer[0], strip(answer[1]), answer[2]) == (first[0], strip(first[1]), first[2])


def test_each_client_reads_only_its_applications(billing):
    assert get(f"{billing.url}/shop/prod", token=OTHER_TOKEN)[0] == 200
    assert get(f"{billing.url}/billing/prod", token=OTHER_TOKEN)[0] == 404


def test_one_audit_line_per_request_without_values(billing, caplog):
    caplog.set_level(logging.INFO, logger="dynconf.server.audit")
    get(f"{billing.url}/billing/prod")
    get(f"{billing.url}/shop/prod")
    get(f"{billing.url}/billing/prod", token=None)
    lines = [r for r in caplog.records if r.name == "dynconf.server.audit"]
    assert [(r.caller, r.endpoint, r.outcome, r.status) for r in lines] == [
        ("billing-pods", "document", "served", 200),
        ("billing-pods", "document", "not-found", 404),
        ("-", "unknown", "unauthenticated", 401),
    ]
    assert lines[0].application == "billing" and lines[0].generation == 1
    text = caplog.text + " ".join(str(vars(r)) for r in lines)
    assert "db.prod" not in text and TOKEN not in text


def test_metrics_answer_only_their_own_credential(billing):
    assert get(f"{billing.url}/metrics", token=None)[0] == 401
    tenant = get(f"{billing.url}/metrics")
    assert tenant[0] == 404 and tenant[2] == get(f"{billing.url}/nowhere")[2]
    status, headers, body = get(f"{billing.url}/metrics", token=METRICS_TOKEN)
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    assert 'dynconf_server_section_generation{application="billing",profile="prod"} 1.0' in text
    assert 'dynconf_server_section_generation{application="shop",profile="prod"}' in text
    assert "dynconf_server_requests_total" in text


def test_metrics_token_reads_no_section(billing):
    assert get(f"{billing.url}/billing/prod", token=METRICS_TOKEN)[0] == 401


def test_probes_need_no_credential(billing):
    assert get(f"{billing.url}/healthz", token=None)[:3:2] == (200, b'{"status":"ok"}')
    status, _, body = get(f"{billing.url}/readyz", token=None)
    assert (status, json.loads(body)) == (200, {"ready": True, "stale_sections": 0})


def test_stream_opens_with_the_generation_and_announces_changes(billing, config_dir):
    import requests

    with requests.get(f"{billing.url}/billing/prod/stream", stream=True, timeout=10,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as response:  # fmt: skip
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines(decode_unicode=True)
        assert [next(lines), next(lines), next(lines)] == [
            "id: 1", "event: generation",
            'data: {"application":"billing","profile":"prod","generation":1}',
        ]  # fmt: skip
        config_dir.write("billing.prod.toml", '[billing.db]\nhost = "db.streamed"\n')
        received = [line for line in (next(lines) for _ in range(6)) if line.startswith("id:")]
        assert received == ["id: 2"]


def test_stream_resumes_without_an_event_when_the_client_is_current(billing):
    import requests

    headers = {"Authorization": f"Bearer {TOKEN}", "Last-Event-ID": "1"}
    with requests.get(f"{billing.url}/billing/prod/stream", stream=True, timeout=10,
                      headers=headers) as response:  # fmt: skip
        first = next(response.iter_lines(decode_unicode=True))
        assert first == ": keep-alive"  # nothing to say: the client already has generation 1


def test_stream_ceiling_answers_503(serve, config_dir):
    import requests

    server = serve(base_settings(config_dir, max_stream_connections=1), base=config_dir.root)
    _wait_loaded(server)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with requests.get(f"{server.url}/billing/prod/stream", stream=True, timeout=10,
                      headers=headers) as held:  # fmt: skip
        assert held.status_code == 200
        # chunk_size=1: urllib3 would otherwise wait for 512 bytes, which an idle stream only
        # reaches after dozens of keep-alives. The iterator is kept: a discarded one is closed,
        # and closing it closes the connection, which ends the held stream.
        lines = held.iter_lines(chunk_size=1)
        next(lines)
        status, answer_headers, _ = get(f"{server.url}/billing/prod/stream")
        assert status == 503
        assert answer_headers["retry-after"] == "5"


def test_one_client_cannot_hold_every_stream(serve, config_dir):
    import requests

    settings = base_settings(config_dir, max_stream_connections=4, max_streams_per_client=2)
    server = serve(settings, base=config_dir.root)
    _wait_loaded(server)
    with contextlib.ExitStack() as held:
        for _ in range(2):
            stream = held.enter_context(requests.get(
                f"{server.url}/billing/prod/stream", stream=True, timeout=10,
                headers={"Authorization": f"Bearer {TOKEN}"},
            ))  # fmt: skip
            assert stream.status_code == 200
            lines = stream.iter_lines(chunk_size=1)
            held.callback(lines.close)
            next(lines)  # open: the server counts it
        status, answer_headers, _ = get(f"{server.url}/billing/prod/stream")
        assert (status, answer_headers["retry-after"]) == (503, "5")
        other = held.enter_context(requests.get(
            f"{server.url}/shop/prod/stream", stream=True, timeout=10,
            headers={"Authorization": f"Bearer {OTHER_TOKEN}"},
        ))  # fmt: skip
        assert other.status_code == 200  # another tenant still gets a slot


def test_shutdown_ends_held_streams_before_the_drain_runs_out(serve, config_dir):
    """Closing wakes each stream's wait on its section, so draining never waits on a stream."""
    import requests

    # keep-alives far apart: a stream must not end only because its keep-alive came round
    server = serve(base_settings(config_dir, keepalive_seconds=30), base=config_dir.root)
    _wait_loaded(server)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with contextlib.ExitStack() as held:
        streams = []
        for path in ("billing/prod", "billing/prod", "shop/prod"):
            response = held.enter_context(requests.get(
                f"{server.url}/{path}/stream", stream=True, timeout=10,
                headers=headers if path.startswith("billing") else
                {"Authorization": f"Bearer {OTHER_TOKEN}"},
            ))  # fmt: skip
            lines = response.iter_lines(chunk_size=1)
            held.callback(lines.close)
            assert next(lines).startswith(b"id: ")
            streams.append(lines)
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 1.5  # the drain allows 2 s
        for lines in streams:
            assert [line for line in lines if line.startswith(b"id: ")] == []  # ended


def _wait_loaded(server) -> None:
    """The section loads just after start-up; until then a stream is refused as unavailable."""
    deadline = time.monotonic() + 10
    while get(f"{server.url}/billing/prod")[0] != 200:
        assert time.monotonic() < deadline, "the section never loaded"
        time.sleep(0.02)
