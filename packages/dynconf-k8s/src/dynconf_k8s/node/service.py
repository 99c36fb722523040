"""The CSI Identity and Node services: what the kubelet calls, answered from the node's documents.

Identity answers the driver name ``config.dynamic-config.rs``, no capabilities (there is no
controller: an inline volume needs none) and a ready ``Probe``. Node answers its id, no
capabilities and no volume limit, and does the work in ``NodePublishVolume`` /
``NodeUnpublishVolume``: publish checks the attributes, the store's ``validate()``, then
renders the file *before* it returns — the kubelet starts no container until every volume is
published, so an application never sees a missing file. Anything else the CSI spec defines
answers UNIMPLEMENTED, because it is not registered.

The services are registered from one table (:data:`METHODS`) of the generated message
classes, without generated service stubs: the table is the single list of what is served.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import grpc
from google.protobuf.message import Message

from dynconf.budget import Budget, ledger
from dynconf.cli import distribution_version
from dynconf.errors import DynconfError
from dynconf.follow import StoreDriver
from dynconf.plugins import Registry
from dynconf.stores import StoreType
from dynconf.tracing import Span, Tracing
from dynconf_k8s.agent.main import store_type
from dynconf_k8s.node._generated import csi_pb2 as csi
from dynconf_k8s.node.attributes import (
    VolumeRefused,
    VolumeSpec,
    attribute_spelling,
    parse_volume,
    refusal_text,
)
from dynconf_k8s.node.records import RecordStore
from dynconf_k8s.node.registration import RegistrationSettings
from dynconf_k8s.node.shared import Documents, PublishFailed, remove_published

__all__ = ["DRIVER_NAME", "METHODS", "NodeAgent", "NodeSettings", "generic_handlers"]

DRIVER_NAME: Final = "config.dynamic-config.rs"

log = logging.getLogger("dynconf_k8s.node")


@dataclass(frozen=True)
class NodeSettings:
    """What the node agent was started with."""

    node_id: str
    socket: Path
    state_dir: Path
    metrics_addr: tuple[str, int] | None = None
    allow_file_source: bool = False
    """The embedded ``file`` store reads any path on the node as root: tests and demos only."""
    registration: RegistrationSettings | None = None
    """Serve the kubelet's plugin registration too (``--kubelet-registration-path``)."""
    store_budgets: Mapping[str, Budget] = field(default_factory=dict)
    """One budget per store, shared by every volume reading it (the budgets variable)."""


class NodeAgent:
    """Publish and unpublish volumes against the shared documents, and remember them."""

    def __init__(
        self,
        settings: NodeSettings,
        registry: Registry,
        documents_factory: Callable[[Callable[[VolumeSpec], StoreDriver]], Documents],
        *,
        lock_path: str | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.lock_path = lock_path
        self.tracing = tracing or Tracing()
        self.records = RecordStore(settings.state_dir)
        self.documents = documents_factory(self._build)
        self.ready = False

    # ------------------------------------------------------------------ stores
    def _store(self, volume: VolumeSpec) -> StoreType:
        try:
            return store_type(self.registry, volume.store.source, self.lock_path)
        except DynconfError as error:
            raise VolumeRefused(str(error)) from None

    def _build(self, volume: VolumeSpec) -> StoreDriver:
        spec = replace(volume.store, state_dir=str(self.store_state_dir))
        store = self._store(volume)
        return StoreDriver.built(lambda: store.build(spec), calls=ledger().for_spec(spec))

    @property
    def store_state_dir(self) -> Path:
        """``<state-dir>/stores``: the state a store keeps (git's clones), lent by the node agent.

        The node agent's root file system is read-only and its home unwritable; its state
        directory (a hostPath the DaemonSet mounts) is where it may write. Stores key what
        they keep there by endpoint and credential, so documents never share a clone across
        credentials.
        """
        return self.settings.state_dir / "stores"

    def check(
        self, target: str, attributes: Mapping[str, str], secrets: Mapping[str, str]
    ) -> VolumeSpec:
        """The volume a publish describes, refused with :class:`VolumeRefused` if it cannot be."""
        volume = parse_volume(target, attributes, secrets)
        if volume.store.source == "file" and not self.settings.allow_file_source:
            raise VolumeRefused(
                'the volume attribute "source" is "file": the node agent runs as root and a file '
                "key could name any path on the node; use one of the nine stores"
            )
        refusals = self._store(volume).refusals(volume.store)
        if refusals:
            raise VolumeRefused("; ".join(r.render(attribute_spelling) for r in refusals))
        return volume

    # ------------------------------------------------------------------ publish
    async def publish(
        self,
        volume_id: str,
        target: str,
        attributes: Mapping[str, str],
        secrets: Mapping[str, str],
    ) -> None:
        """Render the volume's file into ``target`` and watch its document; idempotent.

        One ``publish`` span: the pod, the document's label and the file — never an
        attribute's value beyond those names, never a secret.
        """
        with self.tracing.span("publish") as span:
            try:
                await self._publish(volume_id, target, attributes, secrets, span)
            except PublishFailed as error:
                span.set(outcome=error.code)
                raise
            span.set(outcome="published")

    async def _publish(
        self,
        volume_id: str,
        target: str,
        attributes: Mapping[str, str],
        secrets: Mapping[str, str],
        span: Span,
    ) -> None:
        try:
            volume = self.check(target, attributes, secrets)
        except VolumeRefused as error:
            raise PublishFailed("INVALID_ARGUMENT", str(error)) from None
        span.set(pod=volume.pod, document=volume.document.label(), file=volume.path)
        existing = self.documents.reader_of(volume.target)
        if existing is not None and existing.volume == volume:
            return
        created = not volume.target.exists()
        try:
            volume.target.mkdir(mode=0o755, parents=True, exist_ok=True)
        except OSError as error:
            raise PublishFailed(
                "INTERNAL", f"creating the target directory: {error.strerror}"
            ) from None
        try:
            await self.documents.claim(volume)
        except PublishFailed:
            if created:
                await anyio.to_thread.run_sync(remove_published, None, volume.target)
            raise
        try:
            await anyio.to_thread.run_sync(
                self.records.save, volume_id, volume.target, dict(attributes), dict(secrets)
            )
        except (OSError, DynconfError) as error:
            # the file is published; only a restart would lose track of it
            log.warning("record_not_saved", extra={"target": target, "error": str(error)})
        log.info(
            "volume_published",
            extra={
                "pod": volume.pod,
                "document": volume.document.label(),
                "file": volume.path,
                "documents": self.documents.documents,
                "readers": self.documents.readers,
            },
        )

    async def unpublish(self, target: str) -> None:
        """Drop the reader, stop the watch with the last one, delete what was written."""
        with self.tracing.span("unpublish") as span:
            await self._unpublish(target, span)

    async def _unpublish(self, target: str, span: Span) -> None:
        path = Path(target)
        reader = self.documents.reader_of(path)
        if reader is not None:
            span.set(pod=reader.volume.pod, document=reader.volume.document.label())
        span.set(known=reader is not None)
        await self.documents.release(path)
        volume = reader.volume if reader is not None else None
        await anyio.to_thread.run_sync(remove_published, volume, path)
        await anyio.to_thread.run_sync(self.records.remove, path)
        if reader is not None:
            log.info(
                "volume_unpublished",
                extra={
                    "pod": reader.volume.pod,
                    "documents": self.documents.documents,
                    "readers": self.documents.readers,
                },
            )

    async def restore(self) -> int:
        """Claim again every volume recorded before a restart whose target is still there."""
        restored = 0
        for record in await anyio.to_thread.run_sync(lambda: list(self.records.load())):
            target = Path(record.target)
            if not target.is_dir():
                await anyio.to_thread.run_sync(self.records.remove, target)
                log.info("volume_gone", extra={"target": record.target})
                continue
            try:
                volume = self.check(record.target, record.attributes, record.secrets)
                await self.documents.claim(volume, resume=True)
            except (VolumeRefused, PublishFailed) as error:
                log.warning(
                    "volume_not_restored", extra={"target": record.target, "reason": str(error)}
                )
                continue
            except Exception as error:  # one record must not crash-loop the node's restarts
                log.warning(
                    "volume_not_restored",
                    extra={"target": record.target, "reason": type(error).__name__},
                )
                continue
            restored += 1
        log.info(
            "volumes_restored",
            extra={
                "volumes": restored,
                "documents": self.documents.documents,
                "readers": self.documents.readers,
            },
        )
        return restored


# ---------------------------------------------------------------------- gRPC
Handler = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Message]]


def _code(name: str) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, name, grpc.StatusCode.INTERNAL)


class _Services:
    """The handlers, bound to one :class:`NodeAgent`."""

    def __init__(self, agent: NodeAgent) -> None:
        self.agent = agent

    async def get_plugin_info(
        self, request: csi.GetPluginInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> csi.GetPluginInfoResponse:
        return csi.GetPluginInfoResponse(
            name=DRIVER_NAME, vendor_version=distribution_version("dynconf-k8s")
        )

    async def get_plugin_capabilities(
        self,
        request: csi.GetPluginCapabilitiesRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> csi.GetPluginCapabilitiesResponse:
        return csi.GetPluginCapabilitiesResponse()

    async def probe(
        self, request: csi.ProbeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> csi.ProbeResponse:
        return csi.ProbeResponse()

    async def node_get_info(
        self, request: csi.NodeGetInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> csi.NodeGetInfoResponse:
        return csi.NodeGetInfoResponse(node_id=self.agent.settings.node_id, max_volumes_per_node=0)

    async def node_get_capabilities(
        self,
        request: csi.NodeGetCapabilitiesRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> csi.NodeGetCapabilitiesResponse:
        return csi.NodeGetCapabilitiesResponse()

    async def node_publish_volume(
        self,
        request: csi.NodePublishVolumeRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> csi.NodePublishVolumeResponse:
        if not request.volume_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "volume_id is required")
        if not request.target_path:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "target_path is required")
        if not request.HasField("volume_capability"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "volume_capability is required")
        if request.volume_capability.HasField("block"):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "a config volume is a directory of files: request a mount volume, not a block one",
            )
        try:
            await self.agent.publish(
                request.volume_id,
                request.target_path,
                dict(request.volume_context),
                dict(request.secrets),
            )
        except PublishFailed as error:
            reason = refusal_text(error.message)
            log.warning(
                "publish_refused",
                extra={
                    "target": refusal_text(request.target_path),
                    "code": error.code,
                    "reason": reason,
                },
            )
            await context.abort(_code(error.code), reason)
        return csi.NodePublishVolumeResponse()

    async def node_unpublish_volume(
        self,
        request: csi.NodeUnpublishVolumeRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> csi.NodeUnpublishVolumeResponse:
        if not request.volume_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "volume_id is required")
        if not request.target_path:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "target_path is required")
        await self.agent.unpublish(request.target_path)
        return csi.NodeUnpublishVolumeResponse()


METHODS: Final[dict[str, dict[str, tuple[str, type[Message], type[Message]]]]] = {
    "csi.v1.Identity": {
        "GetPluginInfo": ("get_plugin_info", csi.GetPluginInfoRequest, csi.GetPluginInfoResponse),
        "GetPluginCapabilities": (
            "get_plugin_capabilities",
            csi.GetPluginCapabilitiesRequest,
            csi.GetPluginCapabilitiesResponse,
        ),
        "Probe": ("probe", csi.ProbeRequest, csi.ProbeResponse),
    },
    "csi.v1.Node": {
        "NodePublishVolume": (
            "node_publish_volume",
            csi.NodePublishVolumeRequest,
            csi.NodePublishVolumeResponse,
        ),
        "NodeUnpublishVolume": (
            "node_unpublish_volume",
            csi.NodeUnpublishVolumeRequest,
            csi.NodeUnpublishVolumeResponse,
        ),
        "NodeGetCapabilities": (
            "node_get_capabilities",
            csi.NodeGetCapabilitiesRequest,
            csi.NodeGetCapabilitiesResponse,
        ),
        "NodeGetInfo": ("node_get_info", csi.NodeGetInfoRequest, csi.NodeGetInfoResponse),
    },
}
"""Service → method → (handler attribute, request class, response class): all that is served."""


def generic_handlers(agent: NodeAgent) -> list[grpc.GenericRpcHandler]:
    """The gRPC handlers for every method in :data:`METHODS`, bound to ``agent``."""
    services = _Services(agent)
    handlers: list[grpc.GenericRpcHandler] = []
    for service, methods in METHODS.items():
        table = {
            name: grpc.unary_unary_rpc_method_handler(
                getattr(services, attribute),
                request_deserializer=request.FromString,
                response_serializer=response.SerializeToString,
            )
            for name, (attribute, request, response) in methods.items()
        }
        handlers.append(grpc.method_handlers_generic_handler(service, table))
    return handlers
