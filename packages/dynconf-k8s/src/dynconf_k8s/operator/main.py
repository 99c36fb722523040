"""``dynamic-config-operator``: print the CRDs, or run the controller.

``--crds`` prints every CRD we ship (pretty JSON separated by ``---``) and exits;
``--write-crds DIR`` writes the shipped YAML copies. Without flags the process runs: JSON logs
on stdout, metrics and probes on ``DYNAMIC_CONFIG_OPERATOR_METRICS_ADDR`` (default
``0.0.0.0:9090``, empty disables), leader election when ``POD_NAMESPACE`` and ``POD_NAME`` are
set (otherwise a warning and an unelected run), and a clean stop on SIGTERM/SIGINT that hands
the lease back. A lost lease ends the process with exit code 1.

The API server is reached in-cluster (the pod's ServiceAccount) when
``KUBERNETES_SERVICE_HOST`` is set, else through ``KUBECONFIG`` / ``~/.kube/config``.
``DYNAMIC_CONFIG_OPERATOR_WORKERS`` (default 4) sets how many Renders reconcile at once.
``DYNAMIC_CONFIG_OPERATOR_RESTARTS=true`` rolls workloads annotated ``restart-on-change``
(:mod:`dynconf_k8s.operator.restarts`), at most once per
``DYNAMIC_CONFIG_OPERATOR_RESTART_MIN_INTERVAL`` (default 60 s) per workload, a write judged
``DYNAMIC_CONFIG_OPERATOR_RESTART_SETTLE`` (default 5 s) after it lands; a bad value ends the
start with exit code 2 and the variable named.
``DYNAMIC_CONFIG_OPERATOR_POD_AUDIT`` (default ``true``) reports pods that asked for injection
and run without the agent (:mod:`dynconf_k8s.operator.podaudit`), every
``DYNAMIC_CONFIG_OPERATOR_POD_AUDIT_INTERVAL`` (default 30 s), among the pods that
``DYNAMIC_CONFIG_OPERATOR_WEBHOOK_CONFIGURATION`` (the MutatingWebhookConfiguration, set by the
chart) selects, or among every pod when it is unset.
The per-store call budgets are ``DYNAMIC_CONFIG_STORE_BUDGETS`` when set (fixed for the
process's life), else the installation's ``storeDefaults.<store>.store-budget`` tiers, kept
current live (:mod:`dynconf_k8s.inforce`): from the ``DynamicConfigInstallation`` named by
``DYNAMIC_CONFIG_OPERATOR_INSTALLATION`` (this replica reports its entry in the status), or
from the document at ``DYNAMIC_CONFIG_OPERATOR_INSTALLATION_FILE``, checked every 5 s.
``OTEL_EXPORTER_OTLP_ENDPOINT`` turns on OTLP traces (one span per reconcile, service
``dynamic-config-operator``), flushed within a bounded wait on the way out.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from dynconf.cli import VERSION_FLAG, version_line
from dynconf.logs import configure_logging, console_entry
from dynconf.tracing import Tracing, tracing_from_env
from dynconf_k8s.inforce import (
    InstallationInForce,
    document_installation,
    follow_budgets,
    live_source,
)
from dynconf_k8s.operator.crds import crds_json, write_crds
from dynconf_k8s.operator.election import LOST_MESSAGE, LeaderElector
from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.metrics import (
    DEFAULT_ADDR,
    METRICS_ADDR_ENV,
    MetricsServer,
    OperatorMetrics,
    parse_addr,
)
from dynconf_k8s.operator.podaudit import pod_audit_settings
from dynconf_k8s.operator.restarts import SettingsError, restart_settings

__all__ = ["api_client_from_environment", "main", "run"]

WORKERS_ENV = "DYNAMIC_CONFIG_OPERATOR_WORKERS"
INSTALLATION_ENV = "DYNAMIC_CONFIG_OPERATOR_INSTALLATION"
INSTALLATION_FILE_ENV = "DYNAMIC_CONFIG_OPERATOR_INSTALLATION_FILE"
SERVICE_NAME = "dynamic-config-operator"

log = logging.getLogger("dynconf_k8s.operator")


REQUEST_TIMEOUT = (10.0, 30.0)
"""(connect, read) seconds for every API call that does not set its own (watches do)."""


def api_client_from_environment(pool: int = 16) -> Any:
    """An ``ApiClient`` for the in-cluster ServiceAccount, or the kubeconfig outside a pod.

    Every call is bounded by :data:`REQUEST_TIMEOUT` unless it passes its own: the client's
    default is to wait forever, and a worker waiting forever on one answer stops its Renders
    from being reconciled or reported without any error to see.
    """
    from kubernetes import client, config  # type: ignore[import-untyped]

    class BoundedApiClient(client.ApiClient):  # type: ignore[misc]
        def request(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("_request_timeout") is None:
                kwargs["_request_timeout"] = REQUEST_TIMEOUT
            return super().request(*args, **kwargs)

    configuration = client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return BoundedApiClient(configuration)


def installation_at_start(env: dict[str, str]) -> InstallationInForce:
    """The installation document at ``DYNAMIC_CONFIG_OPERATOR_INSTALLATION_FILE`` (or none).

    Raises :class:`~dynconf_k8s.contract.InstallationError` when the document is not valid.
    """
    return document_installation(env.get(INSTALLATION_FILE_ENV, "").strip() or None)


def _workers(env: Mapping[str, str]) -> int:
    """``DYNAMIC_CONFIG_OPERATOR_WORKERS``: a whole number of reconcile workers (default 4)."""
    text = (env.get(WORKERS_ENV) or "4").strip()
    if not text.isdigit() or int(text) < 1:
        raise SettingsError(
            f"{WORKERS_ENV} takes a whole number of reconcile workers, at least 1; "
            "leave it unset for 4"
        )
    return int(text)


def run(environ: dict[str, str] | None = None) -> int:
    """Run until a signal (0) or a lost lease (1)."""
    env = dict(os.environ if environ is None else environ)
    configure_logging(environ=env)
    try:
        workers = _workers(env)
        restarts = restart_settings(env)
        pod_audit = pod_audit_settings(env)
        installation = installation_at_start(env)
        follow_budgets(installation, env)
    except (SettingsError, ValueError) as error:
        log.error("settings_refused", extra={"problem": str(error)})
        return 2
    stop = threading.Event()
    lost = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal_received", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    api_client = api_client_from_environment(pool=workers + 8)
    metrics = OperatorMetrics()
    server: MetricsServer | None = None
    address = parse_addr(env.get(METRICS_ADDR_ENV, DEFAULT_ADDR))
    if address is not None:
        server = MetricsServer(metrics, *address)
        server.start()

    tracing = tracing_from_env(env, SERVICE_NAME, extra="dynconf-k8s[otel]")
    namespace, pod = env.get("POD_NAMESPACE"), env.get("POD_NAME")
    identity = pod or "dynamic-config-operator"
    metrics.installation.follow(installation)
    source = live_source(
        installation,
        component="operator",
        identity=identity,
        resource=env.get(INSTALLATION_ENV, "").strip() or None,
        clients=lambda: contextlib.nullcontext(api_client),
        document=env.get(INSTALLATION_FILE_ENV, "").strip() or None,
    )
    follower = None
    if source is not None:
        # Every replica follows, leader or not: a follower that takes over paces as it should.
        follower = threading.Thread(target=source.run, args=(stop,), name="installation")
        follower.start()
    elector: LeaderElector | None = None
    if namespace and pod:
        elector = LeaderElector(api_client, namespace, pod)
        if not elector.acquire(stop):
            _shutdown(server, None, elector, tracing, follower)
            return 0
    else:
        log.warning(
            "leader_election_disabled",
            extra={"why": "POD_NAMESPACE and POD_NAME are not both set; running unelected"},
        )

    operator = Operator(
        api_client,
        identity=identity,
        workers=workers,
        metrics=metrics,
        tracing=tracing,
        restarts=restarts,
        pod_audit=pod_audit,
    )
    operator.start()
    if elector is not None:

        def on_lost() -> None:
            lost.set()
            stop.set()

        threading.Thread(
            target=elector.hold, args=(stop, on_lost), name="lease", daemon=True
        ).start()
    stop.wait()
    _shutdown(server, operator, None if lost.is_set() else elector, tracing, follower)
    if lost.is_set():
        log.error("operator_exiting", extra={"why": LOST_MESSAGE})
        return 1
    log.info("operator_stopped")
    return 0


def _shutdown(
    server: MetricsServer | None,
    operator: Operator | None,
    elector: LeaderElector | None,
    tracing: Tracing | None = None,
    follower: threading.Thread | None = None,
) -> None:
    if operator is not None:
        operator.stop()
    if follower is not None:
        follower.join(timeout=15)  # stop is set: it withdraws its status entry and ends
    if elector is not None:
        elector.release()
    if server is not None:
        server.stop()
    if tracing is not None:
        tracing.shutdown()  # after the workers: their last reconcile spans leave too


@console_entry("dynamic-config-operator")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dynamic-config-operator",
        description="Renders DynamicConfigRender documents into ConfigMaps and Secrets.",
    )
    parser.add_argument(
        VERSION_FLAG, action="version", version=version_line(SERVICE_NAME, "dynconf-k8s").strip()
    )
    parser.add_argument(
        "--crds",
        action="store_true",
        help="print every CRD (the three, then the installation) and exit",
    )
    parser.add_argument(
        "--write-crds",
        metavar="DIR",
        action="append",
        type=Path,
        help="write the CRDs as dynamic-config.rs_<plural>.yaml into DIR (repeatable) and exit",
    )
    args = parser.parse_args(argv)
    if args.crds:
        sys.stdout.write(crds_json())
        return 0
    if args.write_crds:
        for directory in args.write_crds:
            for path in write_crds(directory):
                print(path)
        return 0
    return run()


if __name__ == "__main__":
    raise SystemExit(main())
