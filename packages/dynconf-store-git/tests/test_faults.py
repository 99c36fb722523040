"""Faults: the server restarted mid-watch, a refused token mid-watch, the cache ceiling."""

from __future__ import annotations

import secrets

import pytest

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import Fetched

pytestmark = [pytest.mark.git, pytest.mark.slow]


def test_server_restarted_mid_watch_reports_recovers_and_delivers(repo, own_http, make_source,
                                                                   watcher):  # fmt: skip
    source = make_source(f"{own_http.base}/{repo.name}", timeout=3.0)
    source.fetch()
    watch = watcher(source, interval=0.2)
    watch.wait_connected()
    own_http.kill()
    while not watch.failures:  # reported while the server is down, the watch goes on
        assert watch.error is None
        watch.quiet(0.1)
    assert isinstance(watch.failures[0], RemoteError)
    assert source.connected is False
    repo.commit({"app.yaml": "greeting: written while down\n"})  # pushed via the shared server
    own_http.start()
    watch.wait_connected(timeout=15)
    delivered = watch.next(timeout=15)  # the change made while it was down
    assert isinstance(delivered, Fetched)
    assert delivered.text == "greeting: written while down\n"
    repo.commit({"app.yaml": "greeting: after restart\n"})
    assert watch.next(timeout=15).text == "greeting: after restart\n"
    assert watch.error is None


def test_refused_token_ends_the_watch_with_auth(repo, own_auth_http, make_source, watcher,
                                                tmp_path):  # fmt: skip
    token_file = tmp_path / "token"
    token_file.write_text("right-token")
    source = make_source(f"{own_auth_http.base}/{repo.name}", auth="token",
                         auth_token_path=str(token_file), auth_username="reader")  # fmt: skip
    watch = watcher(source, interval=0.2)
    watch.wait_connected()
    token_file.write_text("revoked-token")
    assert watch.finished.wait(10)
    assert isinstance(watch.error, AuthError)
    asked = own_auth_http.requests()
    with pytest.raises(AuthError, match="not sent again"):
        source.fetch()
    assert own_auth_http.requests() == asked


def test_cache_is_recloned_past_its_pack_ceiling(repo, make_source):
    source = make_source(repo.http_url)
    source._max_packs = 3
    for n in range(8):
        repo.commit({"app.yaml": f"n: {n}\n"})
        assert source.fetch().text == f"n: {n}\n"
        assert _clone_of(source).pack_count() <= 4
    assert source.transfers == 8


def test_cache_is_recloned_past_its_size_ceiling(repo, make_source):
    source = make_source(repo.http_url, extra={"cache_max_bytes": "4096"})
    sizes = []
    for n in range(6):
        repo.commit({"app.yaml": f"n: {n}\n", f"filler-{n}.txt": secrets.token_hex(1500)})
        source.fetch()
        sizes.append(_clone_of(source).object_bytes())
    assert max(sizes) < 4096 + 2 * 4096  # the ceiling plus at most one transfer


def _clone_of(source):
    return source._clone
