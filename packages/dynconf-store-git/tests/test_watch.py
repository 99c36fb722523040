"""The conditional watch: ls-remote each interval, a transfer only when the ref moved."""

from __future__ import annotations

import pytest

from dynconf.stores import ABSENT, Fetched

pytestmark = pytest.mark.git


def test_change_is_delivered_with_the_new_commit(repo, make_source, watcher):
    source = make_source(repo.http_url)
    source.fetch()
    watch = watcher(source)
    watch.wait_connected()
    commit = repo.commit({"app.yaml": "greeting: changed\n"})
    delivered = watch.next()
    assert isinstance(delivered, Fetched)
    assert delivered.text == "greeting: changed\n"
    assert delivered.revision == commit


def test_starting_value_is_not_announced(repo, make_source, watcher):
    watch = watcher(make_source(repo.http_url))
    watch.wait_connected()
    assert watch.quiet(1.2)


def test_unmoved_ref_is_only_asked_never_transferred(repo, make_source, watcher):
    source = make_source(repo.http_url)
    source.fetch()
    watch = watcher(source, interval=0.1)
    watch.wait_connected()
    assert watch.quiet(1.5)  # about a dozen ls-remote checks
    assert source.transfers == 1


def test_commit_touching_other_files_is_not_delivered(repo, make_source, watcher):
    source = make_source(repo.http_url)
    watch = watcher(source)
    watch.wait_connected()
    repo.commit({"other.yaml": "x: 1\n"})
    assert watch.quiet(1.5)
    assert source.transfers == 2  # the ref moved, so it was read once
    repo.commit({"app.yaml": "greeting: again\n"})
    assert watch.next().text == "greeting: again\n"


def test_removed_file_is_absent_once_then_its_return(repo, make_source, watcher):
    watch = watcher(make_source(repo.http_url))
    watch.wait_connected()
    repo.commit({"app.yaml": None, "keep.yaml": "k: 1\n"})
    assert watch.next() is ABSENT
    repo.commit({"keep.yaml": "k: 2\n"})
    assert watch.quiet(1.0)
    repo.commit({"app.yaml": "greeting: back\n"})
    assert watch.next().text == "greeting: back\n"


def test_moved_tag_is_followed(repo, make_source, watcher):
    repo.commit({"app.yaml": "v: 1\n"}, tag="live")
    watch = watcher(make_source(repo.http_url, ref="tag:live"))
    watch.wait_connected()
    repo.commit({"app.yaml": "v: untagged\n"})
    assert watch.quiet(1.0)
    repo.commit({"app.yaml": "v: 2\n"}, tag="live")
    assert watch.next().text == "v: 2\n"


def test_pinned_commit_never_transfers_again(repo, make_source, watcher):
    first = repo.commit({"app.yaml": "v: pinned\n"})
    source = make_source(repo.http_url, ref=f"commit:{first}")
    assert source.fetch().text == "v: pinned\n"
    watch = watcher(source, interval=0.1)
    watch.wait_connected()
    repo.commit({"app.yaml": "v: later\n"})
    assert watch.quiet(1.0)
    assert source.transfers == 1


def test_stop_is_prompt(repo, make_source, watcher):
    import time

    watch = watcher(make_source(repo.http_url), interval=30.0)
    watch.wait_connected()
    started = time.monotonic()
    watch.stopping.set()
    assert watch.finished.wait(2.0)
    assert time.monotonic() - started < 0.5  # the pause is sliced in 250 ms
