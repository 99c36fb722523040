"""A token never travels through an environment proxy nor follows a redirect to another host.

The traps are loopback servers on 127.0.0.2, a second address: one plays the proxy that
``http_proxy`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` name, the other is where a 307 from the
repository's own address points. Each records every request head it gets; the token must
reach neither. The opt-in (``use_proxy=true``) shows the proxy trap does catch a request
when the store is allowed to use it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from dynconf.errors import RemoteError

pytestmark = pytest.mark.git

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                   "ALL_PROXY")  # fmt: skip


@dataclass
class Trap:
    """A loopback HTTP listener that records request heads and answers with ``answer``."""

    host: str
    answer: bytes = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    heads: list[str] = field(default_factory=list)
    port: int = 0
    _sock: socket.socket | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Trap:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        sock.listen(16)
        self._sock, self.port = sock, sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._sock is not None
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                with contextlib.suppress(OSError):
                    while b"\r\n\r\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    self.heads.append(data.decode("latin-1"))
                    conn.sendall(self.answer)

    def saw(self, text: str) -> bool:
        return any(text.lower() in head.lower() for head in self.heads)

    def stop(self) -> None:
        if self._sock is not None:
            # close alone leaves accept() blocked on Linux: shut the socket down to wake it
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._thread is not None:
            self._thread.join(5)


@pytest.fixture
def trap() -> Iterator[type[Trap]]:
    started: list[Trap] = []

    class Started(Trap):
        def start(self) -> Trap:
            started.append(self)
            return super().start()

    yield Started
    for each in started:
        each.stop()


def token_source(make_source, repo, git_server, **extra: str):
    return make_source(repo.auth_url, auth="token", token=git_server.password,
                       auth_username=git_server.user, extra=extra)  # fmt: skip


def point_proxies_at(monkeypatch, proxy: Trap) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, f"http://{proxy.host}:{proxy.port}")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_token_never_goes_through_an_environment_proxy(repo, git_server, make_source, trap,
                                                       monkeypatch, caplog):  # fmt: skip
    proxy = trap("127.0.0.2").start()
    point_proxies_at(monkeypatch, proxy)
    source = token_source(make_source, repo, git_server)
    with caplog.at_level(logging.WARNING, logger="dynconf.store"):
        assert source.fetch().text == "greeting: hello\n"  # straight to the repository
    assert proxy.heads == []
    [ignored] = [r for r in caplog.records if r.getMessage() == "store_proxy_ignored"]
    assert "HTTPS_PROXY" in ignored.variables  # type: ignore[attr-defined]
    assert "127.0.0.2" not in str(vars(ignored))  # names only, never the values


def test_use_proxy_opts_in_to_the_environment_proxy(repo, git_server, make_source, trap,
                                                    monkeypatch):  # fmt: skip
    proxy = trap("127.0.0.2").start()
    point_proxies_at(monkeypatch, proxy)
    source = token_source(make_source, repo, git_server, use_proxy="true")
    with pytest.raises(RemoteError):
        source.fetch()  # the trap answers 502
    assert proxy.saw("authorization: basic")  # the trap does catch what is sent its way


def test_token_never_follows_a_redirect_to_another_host(repo, git_server, make_source, trap):
    elsewhere = trap("127.0.0.2").start()
    location = f"http://{elsewhere.host}:{elsewhere.port}/{repo.name}/info/refs"
    redirect = trap(
        "127.0.0.1",
        answer=(f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n").encode(),
    ).start()  # fmt: skip
    source = make_source(f"http://127.0.0.1:{redirect.port}/{repo.name}", auth="token",
                         token="the-token", auth_username="reader")  # fmt: skip
    with pytest.raises(RemoteError):
        source.fetch()
    assert redirect.saw("authorization: basic")  # the endpoint itself is asked, once
    assert elsewhere.heads == []
