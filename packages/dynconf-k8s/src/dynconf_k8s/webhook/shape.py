"""What a review must look like before anything reads it, so admission is total.

The API server sends well-typed pods, but ``validate`` reads hand-written YAML (an unquoted
``watch-seconds: 30`` is a number) and the webhook port takes any body. Each check here
refuses one malformed field by its path — ``request.object.spec.containers[1].command`` —
instead of letting a later ``.get`` on a number raise. Only the fields admission reads are
checked, and only as far as it reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from dynconf_k8s.contract.refusals import Refusal
from dynconf_k8s.contract.registry import PREFIX
from dynconf_k8s.contract.rules import INT32_MAX

__all__ = ["check_metadata", "check_spec", "review_uid"]

_GROUPS: Final = ("containers", "initContainers")


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _malformed(where: str, value: object, wanted: str) -> Refusal:
    return Refusal(f"{where} is {_kind(value)}, and admission needs {wanted} there")


def review_uid(review: object) -> str:
    """The request's uid as a string (``""`` when there is none), whatever it was sent as."""
    request = review.get("request") if isinstance(review, Mapping) else None
    uid = request.get("uid") if isinstance(request, Mapping) else None
    return "" if uid is None else str(uid)


def check_metadata(pod: object) -> None:
    """The object, its metadata and its annotations: mappings, and our annotations strings."""
    if not isinstance(pod, Mapping):
        raise _malformed("request.object", pod, "a pod object")
    metadata = pod.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise _malformed("request.object.metadata", metadata, "an object")
    for field in ("name", "generateName", "namespace"):
        value = metadata.get(field)
        if value is not None and not isinstance(value, str):
            raise _malformed(f"request.object.metadata.{field}", value, "a string")
    annotations = metadata.get("annotations")
    if annotations is None:
        return
    if not isinstance(annotations, Mapping):
        raise _malformed("request.object.metadata.annotations", annotations, "an object")
    for key, value in annotations.items():
        if isinstance(key, str) and key.startswith(PREFIX) and not isinstance(value, str):
            raise Refusal(
                f"{key} is {_kind(value)}, and annotation values are strings — quote it "
                '(in YAML, "30" rather than 30)'
            )


def _container(where: str, container: object) -> None:
    if not isinstance(container, Mapping):
        raise _malformed(where, container, "a container object")
    if not isinstance(container.get("name"), str):
        raise _malformed(f"{where}.name", container.get("name"), "a string")
    for field in ("command", "args"):
        value = container.get(field)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        ):
            raise _malformed(f"{where}.{field}", value, "a list of strings")
    mounts = container.get("volumeMounts")
    if mounts is not None:
        if not isinstance(mounts, list):
            raise _malformed(f"{where}.volumeMounts", mounts, "a list")
        for index, mount in enumerate(mounts):
            if not isinstance(mount, Mapping):
                raise _malformed(f"{where}.volumeMounts[{index}]", mount, "an object")
    context = container.get("securityContext")
    if context is not None and not isinstance(context, Mapping):
        raise _malformed(f"{where}.securityContext", context, "an object")


def _run_as(where: str, context: object) -> None:
    if not isinstance(context, Mapping):
        return
    for field in ("runAsUser", "runAsGroup"):
        value = context.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _malformed(f"{where}.{field}", value, "a whole number")
        if not 0 <= value <= INT32_MAX:
            raise Refusal(
                f"{where}.{field} is outside 0-{INT32_MAX}, which the API server refuses; give "
                "a uid in that range"
            )


def check_spec(pod: Mapping[str, Any]) -> None:
    """The parts of the spec admission reads and patches, for a pod that asks for injection."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise _malformed("request.object.spec", spec, "a pod spec object")
    for group in _GROUPS:
        containers = spec.get(group)
        if containers is None:
            continue
        if not isinstance(containers, list):
            raise _malformed(f"request.object.spec.{group}", containers, "a list")
        for index, container in enumerate(containers):
            where = f"request.object.spec.{group}[{index}]"
            _container(where, container)
            _run_as(f"{where}.securityContext", container.get("securityContext"))
    if not spec.get("containers"):
        raise Refusal(
            "request.object.spec.containers is empty, and a pod needs at least one container "
            "for the rendered file to reach — add the application's container"
        )
    for field, wanted in (("volumes", "a list"), ("imagePullSecrets", "a list")):
        value = spec.get(field)
        if value is not None and not isinstance(value, list):
            raise _malformed(f"request.object.spec.{field}", value, wanted)
    for index, volume in enumerate(spec.get("volumes") or []):
        if not isinstance(volume, Mapping):
            raise _malformed(f"request.object.spec.volumes[{index}]", volume, "an object")
    context = spec.get("securityContext")
    if context is not None and not isinstance(context, Mapping):
        raise _malformed("request.object.spec.securityContext", context, "an object")
    _run_as("request.object.spec.securityContext", context)
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise _malformed("request.object.spec.terminationGracePeriodSeconds", grace, "a number")
