"""Fixtures for the nats store tests; the helpers live in ``natskit`` beside this file.

The shared ``nats_server`` (``tests/fixtures/servers.py``) serves the plain KV and token
tests and must not be killed, so the fault, TLS and ``.creds`` tests start their own
nats-server (the binary ``scripts/testenv install nats`` puts in the cache) on free loopback
ports and stop it by its own pid.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from natskit import OwnNats, Pki, find_nats_binary, make_pki


@pytest.fixture(scope="session")
def nats_binary() -> Path:
    return find_nats_binary()


@pytest.fixture
def own_nats(nats_binary: Path, tmp_path: Path) -> Iterator[Callable[..., OwnNats]]:
    """Starts nats-servers with JetStream (plus extra config) and kills them afterwards."""
    started: list[OwnNats] = []

    def make(config: str = "", name: str = "nats") -> OwnNats:
        server = OwnNats(nats_binary, tmp_path / name, config)
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.kill()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A private CA; the server certificate names localhost and nats.test (not 127.0.0.1)."""
    return make_pki(tmp_path_factory.mktemp("nats-pki"))
