"""``--notify-http``: tell the application, over loopback, that the file just moved.

One ``POST`` after the rename (never before: the promise is that the document is already there
when the request lands), one attempt, a two-second deadline, never fatal — the file is already
correct, so a notification that did not arrive undoes nothing. The address is checked for a
loopback host here as well as at admission, because the two run in different places and an
agent that POSTs anywhere would be an SSRF primitive holding the pod's store credential.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

__all__ = [
    "NOTIFY_DEADLINE",
    "NotifyTarget",
    "NotifyUrlError",
    "parse_notify_url",
    "send_notification",
]

NOTIFY_DEADLINE: Final = 2.0
_READ_LIMIT: Final = 8 * 1024
_LOOPBACK: Final = {"localhost": "127.0.0.1", "127.0.0.1": "127.0.0.1", "::1": "::1"}

log = logging.getLogger("dynconf_k8s.agent.notify")


@dataclass(frozen=True, slots=True)
class NotifyTarget:
    """A parsed loopback URL: where to connect and what ``Host`` and path to send."""

    host: str
    """The name as written (``localhost``, ``127.0.0.1`` or ``::1``)."""
    address: str
    """The address connected to (``localhost`` is pinned to ``127.0.0.1``, never resolved)."""
    port: int
    path: str

    @property
    def host_header(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{shown}:{self.port}"


class NotifyUrlError(ValueError):
    """A URL the notification refuses; ``str()`` is the rule, phrased to follow its source.

    The agent says ``--notify-http <rule>``, the webhook ``dynamic-config.rs/notify-http
    <rule>``: one grammar, two front ends. The rule never repeats the URL (it may hold bytes
    that would break a log line or a request line).
    """


_PORT_EXAMPLE: Final = "e.g. http://127.0.0.1:8080/-/reload"


def _ascii_port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise NotifyUrlError(f"has no valid port: give ASCII digits 1-65535, {_PORT_EXAMPLE}")
    return int(text)


def _request_path(path: str) -> str:
    """The path as the request line carries it: ASCII only, anything else percent-encoded."""
    path = path.split("#", 1)[0]
    return quote(path, safe="/%?&=:@!$'()*+,;-._~")


def parse_notify_url(url: str) -> NotifyTarget:
    """The loopback target of ``url``; raise :class:`NotifyUrlError` (http only, loopback
    host, an ASCII port, no control characters, spaces or lone surrogates anywhere)."""
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise NotifyUrlError(
            "carries a space or a control character (CR and LF would end the request line); "
            "percent-encode it, " + _PORT_EXAMPLE
        )
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in url):
        # bytes that were not UTF-8 (argv's surrogateescape, or a JSON "\ud800" escape):
        # the percent-encoding of the path has no UTF-8 bytes to spell them with
        raise NotifyUrlError(
            "holds a lone surrogate (bytes that are not UTF-8 text); give the URL as UTF-8 or "
            "percent-encode the bytes, " + _PORT_EXAMPLE
        )
    prefix = "http://"
    if not url.startswith(prefix):
        raise NotifyUrlError(
            "must start with http://; the agent only notifies a process in its own pod, over "
            "loopback"
        )
    rest = url[len(prefix) :]
    end = min((i for i in (rest.find(c) for c in "/?#") if i != -1), default=len(rest))
    authority, path = rest[:end], rest[end:]
    if authority.startswith("["):
        host, bracket, port_part = authority[1:].partition("]")
        if not bracket or not port_part.startswith(":"):
            raise NotifyUrlError("needs a port, e.g. http://[::1]:8080/-/reload")
        port_text = port_part[1:]
    elif authority.count(":") > 1:
        host, _, port_text = authority.rpartition(":")
    else:
        host, colon, port_text = authority.partition(":")
        if not colon:
            raise NotifyUrlError(f"needs a port, {_PORT_EXAMPLE}")
    if host not in _LOOPBACK:
        raise NotifyUrlError(
            "is not loopback; use http://127.0.0.1, http://localhost or http://[::1] with a "
            "port: an agent that POSTs anywhere else would carry the pod's store credential "
            "off the pod"
        )
    port = _ascii_port(port_text)
    path = path if path.startswith("/") else "/" + path
    return NotifyTarget(host=host, address=_LOOPBACK[host], port=port, path=_request_path(path))


async def send_notification(target: NotifyTarget) -> bool:
    """POST once with a two-second deadline; True for a 2xx/3xx answer. Never raises.

    Everything, building the request included, happens inside the guard: the file is already
    published, so nothing about the notification may end the agent.
    """
    status: int | None = None
    import anyio  # the sidecar's loop; an init agent never notifies (agent.once)

    with anyio.move_on_after(NOTIFY_DEADLINE):
        try:
            request = (
                f"POST {target.path} HTTP/1.1\r\n"
                f"Host: {target.host_header}\r\n"
                "Content-Length: 0\r\n"
                "User-Agent: dynamic-config-agent\r\n"
                "Connection: close\r\n\r\n"
            ).encode("ascii")
            async with await anyio.connect_tcp(target.address, target.port) as stream:
                await stream.send(request)
                received = b""
                while b"\r\n" not in received and len(received) < _READ_LIMIT:
                    try:
                        chunk = await stream.receive(_READ_LIMIT - len(received))
                    except anyio.EndOfStream:
                        break
                    received += chunk
                status = _status(received)
        except OSError as error:
            log.warning("notify_failed", extra={"reason": error.strerror or type(error).__name__})
            return False
        except (UnicodeError, ValueError) as error:
            log.warning("notify_failed", extra={"reason": type(error).__name__})
            return False
    if status is None:
        log.warning("notify_failed", extra={"reason": "no HTTP answer within 2 s"})
        return False
    ok = 200 <= status < 400
    if not ok:
        log.warning("notify_refused", extra={"status": status})
    return ok


def _status(head: bytes) -> int | None:
    line = head.split(b"\r\n", 1)[0].split()
    if len(line) >= 2 and line[0].startswith(b"HTTP/") and line[1].isdigit():
        return int(line[1])
    return None
