"""``--events``: Warning Events on the agent's own pod, where ``kubectl describe pod`` shows them.

Plain HTTPS to the API server — no Kubernetes client library in the agent's image. The pod's
service-account token is re-read for every Event (the kubelet rotates the projected token
hourly) and the cluster CA mounted beside it is the only trust root. An Event is commentary
on work that already happened, so it is written off the loop with a three-second deadline, and
one that could not be written is logged once and dropped. Events are Warnings only, so
``http.client`` is imported by the first one: an agent that renders cleanly never needs it.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

__all__ = [
    "EVENT_DEADLINE",
    "SERVICEACCOUNT_DIR",
    "EventWriter",
    "event_body",
]

EVENT_DEADLINE: Final = 3.0
SERVICEACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICEACCOUNT_DIR_ENV: Final = "DYNCONF_SERVICEACCOUNT_DIR"
"""Overrides where the token, CA and namespace are read (tests; not part of the contract)."""

log = logging.getLogger("dynconf_k8s.agent.events")


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def event_body(
    *,
    pod: str,
    namespace: str,
    uid: str | None,
    reason: str,
    message: str,
    now: float | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about the pod: Warning, from ``dynamic-config-agent``, count 1."""
    stamp = _rfc3339(time.time() if now is None else now)
    involved: dict[str, str] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "name": pod,
        "namespace": namespace,
    }
    if uid:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod}.", "namespace": namespace},
        "involvedObject": involved,
        "type": "Warning",
        "reason": reason,
        "message": message,
        "source": {"component": "dynamic-config-agent"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventWriter:
    """Writes Events about one pod; :meth:`write` blocks (run it in a worker thread)."""

    def __init__(
        self,
        pod: str,
        uid: str | None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.pod = pod
        self.uid = uid
        self.directory = Path(env.get(SERVICEACCOUNT_DIR_ENV) or SERVICEACCOUNT_DIR)
        self.host = env.get("KUBERNETES_SERVICE_HOST") or "kubernetes.default.svc"
        self.port = int(env.get("KUBERNETES_SERVICE_PORT") or 443)
        self._in_flight: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def send(self, reason: str, message: str) -> None:
        """Write one Event on a thread of its own: a render never waits on the API server."""
        thread = threading.Thread(
            target=self._send, args=(reason, message), name="dynconf-agent-event", daemon=True
        )
        with self._lock:
            self._in_flight.add(thread)
        thread.start()

    def _send(self, reason: str, message: str) -> None:
        try:
            self.write(reason, message)
        finally:
            with self._lock:
                self._in_flight.discard(threading.current_thread())

    def wait_sent(self, timeout: float = EVENT_DEADLINE) -> bool:
        """Wait, at most ``timeout`` seconds in all, for Events still being written.

        A fatal exit calls this: the Event that says why (``DocumentAbsent`` under
        ``--on-delete fail``) is the one an operator most needs in ``kubectl describe pod``,
        and the process would otherwise end before its thread sent it. True when none is left.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            pending = list(self._in_flight)
        for thread in pending:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            return not self._in_flight

    def namespace(self) -> str:
        return (self.directory / "namespace").read_text(encoding="utf-8").strip()

    def write(self, reason: str, message: str) -> bool:
        """POST one Event; True when the API server accepted it. Never raises."""
        import http.client

        try:
            token = (self.directory / "token").read_text(encoding="utf-8").strip()
            namespace = self.namespace()
            context = ssl.create_default_context(cafile=str(self.directory / "ca.crt"))
        except (OSError, ssl.SSLError) as error:
            log.warning(
                "event_not_written",
                extra={
                    "reason": reason,
                    "why": f"service-account material unreadable: {type(error).__name__}",
                },
            )
            return False
        body = json.dumps(
            event_body(
                pod=self.pod, namespace=namespace, uid=self.uid, reason=reason, message=message
            )
        ).encode("utf-8")
        connection = http.client.HTTPSConnection(
            self.host, self.port, timeout=EVENT_DEADLINE, context=context
        )
        try:
            connection.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/events",
                body=body,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                    "User-Agent": "dynamic-config-agent",
                },
            )
            response = connection.getresponse()
            response.read(64 * 1024)
            status = response.status
        except (OSError, http.client.HTTPException) as error:
            log.warning("event_not_written", extra={"reason": reason, "why": type(error).__name__})
            return False
        finally:
            connection.close()
        if not 200 <= status < 300:
            log.warning("event_not_written", extra={"reason": reason, "status": status})
            return False
        log.info("event_written", extra={"reason": reason})
        return True
