"""The kubelet's plugin registration, served by the node agent (``--kubelet-registration-path``).

The kubelet learns that a CSI driver exists from its plugin watcher: a Unix socket appears in
``<kubelet root>/plugins_registry/``, the kubelet calls ``Registration.GetInfo`` on it, dials
the CSI endpoint the answer names (a path on the *host*, which is why it is a flag and not the
container's ``--endpoint``), calls ``NodeGetInfo`` there, records the driver in the node's
``CSINode`` and reports the outcome with ``NotifyRegistrationStatus``. Upstream ships that
socket as a separate container (``node-driver-registrar``); serving it here removes that
container and its image from every node. This is dynconf's own option, not the contract's:
without the flag nothing here runs and a registrar sidecar can do the job as before.

The socket is named ``<driver>-reg.sock``, as the registrar names it, so switching between the
two leaves one socket. It is removed at start (a stale one from a killed process would be
dialled by the kubelet) and at stop (the kubelet deregisters the driver when it goes).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc
from google.protobuf.message import Message

from dynconf_k8s.node._generated import pluginregistration_pb2 as reg

__all__ = [
    "CSI_PLUGIN",
    "DEFAULT_REGISTRATION_DIR",
    "METHODS",
    "SUPPORTED_VERSIONS",
    "SERVICE",
    "RegistrationServer",
    "RegistrationSettings",
]

CSI_PLUGIN: Final = "CSIPlugin"
SUPPORTED_VERSIONS: Final = ("1.0.0",)
"""The CSI versions the kubelet's CSI plugin handler accepts (it checks for a 1.x)."""
DEFAULT_REGISTRATION_DIR: Final = Path("/registration")
"""Where the DaemonSet mounts ``<kubelet root>/plugins_registry``."""

log = logging.getLogger("dynconf_k8s.node")


@dataclass(frozen=True)
class RegistrationSettings:
    """Where the registration socket goes and what it tells the kubelet."""

    endpoint: Path
    """The CSI socket as the kubelet sees it (``<kubelet root>/plugins/<driver>/csi.sock``)."""
    directory: Path = DEFAULT_REGISTRATION_DIR

    def socket(self, driver: str) -> Path:
        return self.directory / f"{driver}-reg.sock"


class RegistrationServer:
    """The ``pluginregistration.Registration`` service on its own Unix socket."""

    def __init__(self, settings: RegistrationSettings, driver: str) -> None:
        self.settings = settings
        self.driver = driver
        self.socket = settings.socket(driver)
        self.registered: bool | None = None
        """What the kubelet last reported: ``None`` until it calls, then its verdict."""
        self.error = ""
        self._server: grpc.aio.Server | None = None

    async def get_info(
        self, request: reg.InfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> reg.PluginInfo:
        return reg.PluginInfo(
            type=CSI_PLUGIN,
            name=self.driver,
            endpoint=str(self.settings.endpoint),
            supported_versions=list(SUPPORTED_VERSIONS),
        )

    async def notify_registration_status(
        self, request: reg.RegistrationStatus, context: grpc.aio.ServicerContext[Any, Any]
    ) -> reg.RegistrationStatusResponse:
        self.registered, self.error = request.plugin_registered, request.error
        if request.plugin_registered:
            log.info("kubelet_registered", extra={"driver": self.driver})
        else:
            # The kubelet does not ask again until the socket is recreated: a restart retries.
            log.error(
                "kubelet_registration_refused",
                extra={"driver": self.driver, "reason": request.error[:1024]},
            )
        return reg.RegistrationStatusResponse()

    def handler(self) -> grpc.GenericRpcHandler:
        table = {
            name: grpc.unary_unary_rpc_method_handler(
                getattr(self, attribute),
                request_deserializer=request.FromString,
                response_serializer=response.SerializeToString,
            )
            for name, (attribute, request, response) in METHODS.items()
        }
        return grpc.method_handlers_generic_handler(SERVICE, table)

    async def start(self) -> None:
        """Replace a stale socket and serve; call only once the CSI socket serves."""
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([self.handler()])
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server
        log.info(
            "registration_serving",
            extra={"socket": str(self.socket), "endpoint": str(self.settings.endpoint)},
        )

    async def stop(self, grace: float) -> None:
        """Stop serving and remove the socket, so the kubelet deregisters the driver."""
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()


SERVICE: Final = "pluginregistration.Registration"
METHODS: Final[dict[str, tuple[str, type[Message], type[Message]]]] = {
    "GetInfo": ("get_info", reg.InfoRequest, reg.PluginInfo),
    "NotifyRegistrationStatus": (
        "notify_registration_status",
        reg.RegistrationStatus,
        reg.RegistrationStatusResponse,
    ),
}
"""Method → (handler attribute, request class, response class): all that is served."""
