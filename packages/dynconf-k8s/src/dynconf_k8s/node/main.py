"""``dynamic-config-node-agent``: the CSI node plugin process the DaemonSet runs on every node.

Start-up: ``KUBE_NODE_NAME`` is required (it is the node id the kubelet registers), the plugin
lock is loaded as the agent loads it, the volumes published before a restart are claimed again
from the state directory, then the stale socket is removed and the Identity and Node services
serve on it. ``--kubelet-registration-path`` then registers the driver with the kubelet from
this process (:mod:`dynconf_k8s.node.registration`), so no registrar sidecar is needed.
``DYNAMIC_CONFIG_METRICS_ADDR`` (``host:port``) adds the metrics port. SIGTERM
stops serving, stops every watch and exits 0; the published files stay, because the kubelet
still owns the volumes and the next start resumes watching them.
The per-store call budgets are ``DYNAMIC_CONFIG_STORE_BUDGETS`` when set (fixed), else the
``store-budget`` tiers of the installation document at
``DYNAMIC_CONFIG_NODE_AGENT_INSTALLATION_FILE``, re-read every 5 s and applied live
(:mod:`dynconf_k8s.inforce`); a bad edit keeps the budgets in force.
``OTEL_EXPORTER_OTLP_ENDPOINT`` turns on OTLP traces (:mod:`dynconf.tracing`: publish,
unpublish and each shared fetch), flushed within a bounded wait before the process exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import anyio
import grpc

from dynconf.budget import budgets_from_env
from dynconf.cli import asked_for, version_line
from dynconf.errors import DynconfError
from dynconf.logs import configure_logging, console_entry
from dynconf.tracing import Tracing, tracing_from_env
from dynconf_k8s.agent.main import load_registry
from dynconf_k8s.contract.installation import InstallationError
from dynconf_k8s.inforce import DocumentWatch, document_installation, follow_budgets
from dynconf_k8s.inforce.disk import POLL_SECONDS
from dynconf_k8s.node.metrics import NodeMetrics, serve_metrics
from dynconf_k8s.node.registration import (
    DEFAULT_REGISTRATION_DIR,
    RegistrationServer,
    RegistrationSettings,
)
from dynconf_k8s.node.service import DRIVER_NAME, NodeAgent, NodeSettings, generic_handlers
from dynconf_k8s.node.shared import Documents

__all__ = ["DEFAULT_SOCKET", "INSTALLATION_FILE_ENV", "USAGE", "main", "parse_settings", "run"]

INSTALLATION_FILE_ENV: Final = "DYNAMIC_CONFIG_NODE_AGENT_INSTALLATION_FILE"

DEFAULT_SOCKET: Final = Path("/csi/csi.sock")
STOP_GRACE: Final = 5.0
SERVICE_NAME: Final = "dynamic-config-node-agent"
USAGE: Final = """\
usage: dynamic-config-node-agent [--endpoint unix:///csi/csi.sock] [--state-dir DIR]
                                 [--kubelet-registration-path PATH [--registration-dir DIR]]
                                 [--allow-file-source]
       dynamic-config-node-agent --version

  --endpoint ADDR       the CSI socket (or CSI_ENDPOINT; default /csi/csi.sock)
  --state-dir DIR       where published volumes are recorded for restarts
                        (default: volumes/ beside the socket)
  --kubelet-registration-path PATH
                        register with the kubelet from this process: PATH is the CSI
                        socket as the kubelet sees it, e.g.
                        /var/lib/kubelet/plugins/config.dynamic-config.rs/csi.sock
  --registration-dir DIR
                        the kubelet's plugins_registry as mounted here
                        (default /registration)
  --allow-file-source   accept source "file" (reads node paths as root: tests and demos only)
  -h, --help            print this text and exit
  --version             print the node agent's version and exit

Environment: KUBE_NODE_NAME (required), DYNAMIC_CONFIG_METRICS_ADDR (host:port, optional),
RUST_LOG (log level), DYNCONF_PLUGIN_LOCK (the plugin lock, as for the agent).
"""

log = logging.getLogger("dynconf_k8s.node")


class UsageError(Exception):
    """A start-up refusal, printed with the usage text."""


VALUE_FLAGS: Final = (
    "--endpoint",
    "--state-dir",
    "--kubelet-registration-path",
    "--registration-dir",
)


def _socket_path(text: str, flag: str = "--endpoint") -> Path:
    if text.startswith("unix://"):
        text = text.removeprefix("unix://")
    if not text.startswith("/"):
        raise UsageError(f"{flag} {text} must be an absolute unix socket path")
    return Path(text)


def _metrics_addr(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"DYNAMIC_CONFIG_METRICS_ADDR {text} is not host:port; e.g. 0.0.0.0:9111")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - the node's port, by contract


def parse_settings(argv: Sequence[str], environ: Mapping[str, str]) -> NodeSettings:
    """The command line and environment, checked; raises :class:`UsageError`."""
    values: dict[str, str] = {}
    allow_file = False
    index = 0
    while index < len(argv):
        flag = argv[index]
        if flag == "--allow-file-source":
            allow_file = True
            index += 1
            continue
        if flag not in VALUE_FLAGS:
            raise UsageError(f'unknown flag "{flag}"')
        if index + 1 >= len(argv):
            raise UsageError(f"{flag} needs a value")
        values[flag] = argv[index + 1]
        index += 2
    node_id = environ.get("KUBE_NODE_NAME", "").strip()
    if not node_id:
        raise UsageError("KUBE_NODE_NAME is required: set it from the downward API's spec.nodeName")
    socket = _socket_path(
        values.get("--endpoint") or environ.get("CSI_ENDPOINT") or str(DEFAULT_SOCKET)
    )
    state_dir = Path(values.get("--state-dir") or socket.parent / "volumes")
    metrics = environ.get("DYNAMIC_CONFIG_METRICS_ADDR", "").strip()
    registration = _registration(values)
    try:
        budgets = budgets_from_env(environ)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return NodeSettings(
        node_id=node_id,
        socket=socket,
        state_dir=state_dir,
        metrics_addr=_metrics_addr(metrics) if metrics else None,
        allow_file_source=allow_file,
        registration=registration,
        store_budgets=budgets,
    )


def _registration(values: Mapping[str, str]) -> RegistrationSettings | None:
    path = values.get("--kubelet-registration-path")
    directory = values.get("--registration-dir")
    if path is None:
        if directory is not None:
            raise UsageError(
                "--registration-dir needs --kubelet-registration-path: "
                "the kubelet must be told where the CSI socket is on the host"
            )
        return None
    endpoint = _socket_path(path, "--kubelet-registration-path")
    where = Path(directory) if directory is not None else DEFAULT_REGISTRATION_DIR
    if not where.is_absolute():
        raise UsageError(f"--registration-dir {directory} must be an absolute directory")
    return RegistrationSettings(endpoint=endpoint, directory=where)


async def serve(
    settings: NodeSettings, environ: Mapping[str, str], tracing: Tracing | None = None
) -> None:
    """Restore, serve the CSI socket (and the metrics port) until SIGTERM or SIGINT."""
    registry, lock_path = load_registry(environ)
    path = environ.get(INSTALLATION_FILE_ENV, "").strip() or None
    try:
        installation = document_installation(path)
    except InstallationError as error:
        raise UsageError(str(error)) from None
    live = follow_budgets(installation, environ)
    async with anyio.create_task_group() as tg:
        if live and path:
            tg.start_soon(_follow_document, DocumentWatch(path, installation))
        agent = NodeAgent(
            settings,
            registry,
            lambda build: Documents(build, tg, tracing=tracing),
            lock_path=lock_path,
            tracing=tracing,
        )
        metrics = NodeMetrics(
            lambda: agent.documents.documents,
            lambda: agent.documents.readers,
            lambda: agent.ready,
            lambda: agent.documents.staleness,
        )
        if settings.metrics_addr is not None:
            host, port = settings.metrics_addr
            await tg.start(serve_metrics, metrics, host, port)
        await agent.restore()
        settings.socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            settings.socket.unlink()  # a stale socket from the previous process
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(generic_handlers(agent))
        server.add_insecure_port(f"unix://{settings.socket}")
        await server.start()
        agent.ready = True
        log.info(
            "serving",
            extra={
                "socket": str(settings.socket),
                "node": settings.node_id,
                "plugin_lock": lock_path,
            },
        )
        registration = None
        if settings.registration is not None:
            # only now: the kubelet dials the CSI socket as soon as it reads GetInfo
            registration = RegistrationServer(settings.registration, DRIVER_NAME)
            await registration.start()
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("stopping", extra={"signal": signal.Signals(signum).name})
                break
        agent.ready = False
        if registration is not None:
            await registration.stop(STOP_GRACE)
        await server.stop(STOP_GRACE)
        await agent.documents.close()
        tg.cancel_scope.cancel()
    log.info("stopped")


async def _follow_document(watch: DocumentWatch) -> None:
    """The document's check on the loop: a stat, and a parse when it changed (milliseconds)."""
    while True:
        await anyio.sleep(POLL_SECONDS)
        watch.check()


def run(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Parse, then serve; the exit code."""
    env = os.environ if environ is None else environ
    args = list(sys.argv[1:] if argv is None else argv)
    asked = "help" if args[:1] == ["help"] else asked_for(args, VALUE_FLAGS)
    if asked == "help":
        sys.stdout.write(USAGE)
        return 0
    if asked == "version":
        sys.stdout.write(version_line(SERVICE_NAME, "dynconf-k8s"))
        return 0
    configure_logging(environ=env)
    try:
        settings = parse_settings(args, env)
    except UsageError as error:
        sys.stderr.write(f"dynamic-config-node-agent: {error}\n\n{USAGE}")
        return 1
    tracing = tracing_from_env(env, SERVICE_NAME, extra="dynconf-k8s[otel]")
    try:
        anyio.run(serve, settings, env, tracing, backend="asyncio")
    except UsageError as error:
        sys.stderr.write(f"dynamic-config-node-agent: {error}\n")
        return 1
    except DynconfError as error:
        log.error("node_agent_failed", extra={"reason": str(error)})
        return 1
    finally:
        tracing.shutdown()  # main() then exits with os._exit: no atexit flush would run
    return 0


@console_entry("dynamic-config-node-agent", hard_exit=True)
def main() -> None:
    """Console entry point; exits without waiting on store threads stuck in a long poll."""
    code = run()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
