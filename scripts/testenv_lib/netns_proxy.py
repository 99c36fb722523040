"""Byte pipes across the node's private network namespace (run as a script by ``node.py``).

The node's kubelet, containerd and pods live in a network namespace of their own, which has no
route to the machine's loopback, while the control plane listens on the machine's 127.0.0.1.
Two small processes join them, and nothing else crosses:

``forward --listen-netns NS --listen HOST:PORT --to HOST:PORT``
    Binds its listening socket inside the namespace ``NS`` (a ``/proc/<pid>/ns/net`` path; the
    process switches into it with ``setns`` only for the ``bind``, before any thread exists),
    then serves from the machine's namespace: every accepted connection is piped to ``--to``
    on the machine's loopback.  This is how the kubelet reaches the apiserver.
``connect --uds PATH``
    Started inside the namespace: an HTTP ``CONNECT`` proxy on a Unix socket, which the
    apiserver's egress selector (``cluster``) dials to reach the kubelet (logs, exec) and pods.
    A Unix socket is a file, so it is reachable from any network namespace that sees the path.

Standard library only (it runs with the interpreter that runs ``scripts/testenv``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy until EOF, then half-close so the other direction can finish."""
    with contextlib.suppress(OSError):
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _join(a: socket.socket, b: socket.socket) -> None:
    back = threading.Thread(target=_pipe, args=(b, a), daemon=True)
    back.start()
    _pipe(a, b)
    back.join()
    a.close()
    b.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def forward(listen_netns: str, listen: str, to: str) -> None:
    own = f"/proc/{os.getpid()}/ns/net"
    with open(own) as home:  # keep a handle on our own namespace to switch back
        _setns(listen_netns)
        server = socket.create_server(_address(listen), backlog=128)
        _setns(f"/proc/self/fd/{home.fileno()}")
    target = _address(to)
    print(f"forwarding {listen} (in {listen_netns}) -> {to}", flush=True)
    while True:
        conn, _ = server.accept()
        try:
            upstream = socket.create_connection(target, timeout=10)
            upstream.settimeout(None)
        except OSError as err:
            # stderr: stdout is a pipe whose reader (kube_node.expose) stops after the first
            # line, so a write there could fill it and stall every later connection
            print(f"connect {to}: {err}", file=sys.stderr, flush=True)
            conn.close()
            continue
        threading.Thread(target=_join, args=(conn, upstream), daemon=True).start()


def _serve_connect(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > 16384:
            conn.close()
            return
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) < 2 or parts[0] != b"CONNECT":
        conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
        conn.close()
        return
    target = parts[1].decode("ascii", "replace")
    try:
        upstream = socket.create_connection(_address(target), timeout=10)
        upstream.settimeout(None)
    except (OSError, ValueError) as err:
        print(f"CONNECT {target}: {err}", file=sys.stderr, flush=True)
        conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
        conn.close()
        return
    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    if rest:
        upstream.sendall(rest)
    _join(conn, upstream)


def connect_proxy(uds: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(uds)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)  # the socket reaches the kubelet as cluster admin: owner only
    try:
        server.bind(uds)
    finally:
        os.umask(old)
    server.listen(128)
    print(f"HTTP CONNECT proxy on {uds}", flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve_connect, args=(conn,), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netns_proxy", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    fwd = sub.add_parser("forward")
    fwd.add_argument("--listen-netns", required=True)
    fwd.add_argument("--listen", required=True)
    fwd.add_argument("--to", required=True)
    con = sub.add_parser("connect")
    con.add_argument("--uds", required=True)
    args = parser.parse_args(argv)
    if args.mode == "forward":
        forward(args.listen_netns, args.listen, args.to)
    else:
        connect_proxy(args.uds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
