"""The postgres_server fixture gives a working PostgreSQL: SQL write and read, LISTEN/NOTIFY."""

from __future__ import annotations

import pytest

from tests.fixtures.servers import PostgresServer

pytestmark = pytest.mark.postgres


def test_query_reads_what_was_written(postgres_server: PostgresServer) -> None:
    with postgres_server.connect() as conn:
        conn.execute("CREATE TEMP TABLE cfg (k text PRIMARY KEY, v text)")
        conn.execute("INSERT INTO cfg VALUES ('greeting', 'hello')")
        row = conn.execute("SELECT v FROM cfg WHERE k = 'greeting'").fetchone()
        assert row == ("hello",)


def test_notify_reaches_a_listener(postgres_server: PostgresServer) -> None:
    with postgres_server.connect() as listener, postgres_server.connect() as writer:
        listener.execute("LISTEN cfg_changed")
        writer.execute("NOTIFY cfg_changed, 'app.yaml'")
        [note] = list(listener.notifies(timeout=5, stop_after=1))
        assert (note.channel, note.payload) == ("cfg_changed", "app.yaml")
