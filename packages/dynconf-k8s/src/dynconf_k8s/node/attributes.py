"""A CSI volume's attributes and Secrets, checked and turned into one reader of one document.

The attributes are the annotations' vocabulary (contract §5), so a volume is learned once
whichever shape delivers it: they are turned into the agent's own argument vector and parsed
by the agent's parser (:func:`dynconf_k8s.agent.flags.parse_args`), and the store's
``validate()`` runs on the result afterwards — the node agent refuses what the sidecar
refuses. A refusal is data (the contract field, the problem, the fix), so it is spoken here
as the volume attribute (:func:`field_spelling`), never by rewriting the agent's sentence.

Credentials come only from the Secrets the kubelet hands over on publish (the volume's
``nodePublishSecretRef``): keys ``token``, ``password`` and ``endpoint`` become what the
sidecar reads from ``DYNAMIC_CONFIG_AGENT_TOKEN`` / ``_PASSWORD`` / ``_ENDPOINT``. The node
agent's own environment is never consulted, so one pod's volume cannot borrow another's
credential or the node agent's.

``path`` is checked rather than trusted: absolute names and any ``..`` are refused before
anything touches the disk, because the kubelet owns the directory and a volume that could
write outside it could write into every other pod's volume on the node. The check is by
name only; the pod can still swap a directory of its volume for a symlink later, which is
why every write and delete goes through :mod:`dynconf.publish` with the target as its root
(walked without following a symlink), never through the path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from dynconf.errors import DynconfError
from dynconf.pipeline import RenderRequest
from dynconf.publish import safe_child
from dynconf.stores import StoreSpec
from dynconf_k8s.agent.flags import UsageError, output_extensions, parse_args
from dynconf_k8s.contract.registry import KEYS, REGISTRY

__all__ = [
    "DEFAULT_WATCH_SECONDS",
    "MAX_STATUS_CHARS",
    "OPTIONAL",
    "REQUIRED",
    "SECRET_KEYS",
    "DocumentKey",
    "VolumeRefused",
    "VolumeSpec",
    "parse_volume",
    "attribute_spelling",
    "field_spelling",
    "refusal_text",
]

_ROWS: Final = tuple(row for row in KEYS if row.csi)
"""The contract rows a volume takes, each under its CSI attribute name (the annotation's)."""
REQUIRED: Final = ("source", "key", "path")
OPTIONAL: Final = tuple(row.csi or "" for row in _ROWS if row.csi not in REQUIRED)
"""Every optional attribute, read off the rows; ``token-secret`` only joins the sharing
identity."""
_SPECIAL: Final = ("path",)
"""Attributes turned into arguments here: ``path`` is inside the volume."""
_FLAG_FOR: Final = {
    row.csi: row.flags[0] for row in _ROWS if row.csi and row.flags and row.csi not in _SPECIAL
}
_OPTION_ROWS: Final = tuple(row for row in _ROWS if row.store_field)
_SETTING_ROWS: Final = tuple(row for row in _ROWS if row.setting)
"""The loaded stores' setting inputs, each under its own attribute (``token-header``)."""
"""The fetch-shaping inputs: the volume's rows that set a plain StoreSpec string."""

_WATCH: Final = REGISTRY["watch-seconds"]
DEFAULT_WATCH_SECONDS: Final = int(str(_WATCH.value))
"""The resync a volume without ``watch-seconds`` gets: the row's default (a volume always
watches)."""
MAX_VALUE_CHARS: Final = 4096
"""Longest attribute value read (every real one is far shorter); longer is refused unread."""
MAX_NAME_CHARS: Final = 316
"""Longest attribute name: a Kubernetes qualified name with its DNS prefix."""
KUBELET_PREFIX: Final = "csi.storage.k8s.io/"
"""Attributes the kubelet adds itself (pod name, namespace, uid, ``ephemeral``)."""

NOT_HERE: Final = {
    "mode": "a CSI volume is published before the containers start and stays; remove it",
    "env-inject": "there is no command here to wrap; remove it and read the file",
    "metrics-port": "the metrics are the node agent's, one endpoint for the node; remove it",
    "dynamic": "CSI volumes cannot request dynamic secrets; use the sidecar for leases",
}
"""Annotation names a volume cannot take, each with why (the book's own reasons)."""

SECRET_KEYS: Final = {
    "token": "DYNAMIC_CONFIG_AGENT_TOKEN",
    "password": "DYNAMIC_CONFIG_AGENT_PASSWORD",
    "endpoint": "DYNAMIC_CONFIG_AGENT_ENDPOINT",
}
"""Secret key → the sidecar environment variable it stands for."""

MAX_STATUS_CHARS: Final = 1024
"""Longest refusal put in a gRPC status (its trailer must fit the client's metadata limit)."""


def refusal_text(message: str) -> str:
    """A refusal as the kubelet and the log see it: one line, at most 1 KiB.

    The one place a publish refusal is rendered (every :class:`VolumeRefused` passes through
    it). The node agent's own sentences carry no attribute value; this bounds what others
    (the agent's parser, a store's ``validate``) may quote, so a refusal can never grow into
    a status the client rejects or a log line of kilobytes.
    """
    line = "".join(" " if not char.isprintable() else char for char in message)
    if len(line) <= MAX_STATUS_CHARS:
        return line
    return line[: MAX_STATUS_CHARS - 1] + "…"


class VolumeRefused(Exception):
    """A volume the node agent will not publish; the message names the attribute and the fix.

    The node agent's own refusals never carry an attribute's value (a tenant's pod chooses
    them); refusals passed on from the agent's parser or a store's ``validate`` may quote a
    value, which the agent's parser cuts short and :func:`refusal_text` bounds here, at
    construction, so no caller (the gRPC status, a log line) sees more than 1 KiB.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(refusal_text(message))
        self.field = field
        """The contract field (a row's name: ``file-mode``) the agent's parser refused, when
        it was one; a test or tool compares this, never the sentence."""


def _refuse_oversized(attributes: Mapping[str, str]) -> None:
    """Refuse, by name and length only, an attribute too long for any message to quote."""
    for name, value in attributes.items():
        if len(name) > MAX_NAME_CHARS:
            raise VolumeRefused(
                f"a volume attribute name is {len(name)} characters long; names are at most "
                f"{MAX_NAME_CHARS} characters"
            )
        if len(value) > MAX_VALUE_CHARS:
            raise VolumeRefused(
                f'the volume attribute "{name}" is {len(value)} characters long; give at most '
                f"{MAX_VALUE_CHARS}"
            )


@dataclass(frozen=True, slots=True)
class DocumentKey:
    """What makes two readers one read: the store, the address, the key and the credential.

    ``options`` carries the remaining fetch-shaping attributes (:data:`_OPTION_ROWS`, the auth
    method and its inputs, the store's own): two volumes that differ there read different
    things.
    ``credential`` is a SHA-256 over the Secret values the read uses (and ``token-secret``),
    so the identity can be compared and kept without holding the credential twice; its
    ``repr`` shows a prefix only.
    """

    source: str
    endpoint: str
    key: str
    options: tuple[tuple[str, str], ...]
    credential: str

    def __repr__(self) -> str:
        return (
            f"DocumentKey(source={self.source!r}, key={self.key!r}, "
            f"credential={self.credential[:8]}…)"
        )

    def label(self) -> str:
        """A short stable name for logs: store and key, never the endpoint or credential."""
        return f"{self.source}:{self.key}#{self.credential[:8]}"


@dataclass(frozen=True)
class VolumeSpec:
    """One published volume: where its file goes, how it is rendered, what it reads."""

    target: Path
    path: str
    request: RenderRequest
    store: StoreSpec
    interval: float
    document: DocumentKey
    pod: str

    @property
    def out(self) -> Path:
        return self.request.main.path


def _refuse_unknown(attributes: Mapping[str, str]) -> None:
    known = set(REQUIRED) | set(OPTIONAL)
    for name in sorted(attributes):
        if name.startswith(KUBELET_PREFIX) or name in known:
            continue
        if name in NOT_HERE:
            raise VolumeRefused(
                f'the volume attribute "{name}" is not taken here: {NOT_HERE[name]}'
            )
        raise VolumeRefused(
            f'the volume attribute "{name}" is unknown; the node agent takes '
            f"{', '.join((*REQUIRED, *OPTIONAL))}"
        )


def check_path(path: str) -> str:
    """``path`` as a relative name inside the volume, or :class:`VolumeRefused` (value-free)."""
    pure = PurePosixPath(path)
    if (
        pure.is_absolute()
        or path.startswith(("/", "\\"))
        or ".." in pure.parts
        or ".." in path.replace("\\", "/").split("/")
        or "\x00" in path
        or not pure.parts
    ):
        raise VolumeRefused(
            'the volume attribute "path" must be a relative file name inside the volume '
            '(no leading "/", no "..", no NUL): the kubelet owns the directory'
        )
    return path


def _check_extension(path: str) -> None:
    """Refuse, value-free, a ``path`` no format writes (a volume takes no template).

    The agent's parser refuses it too, but its sentence quotes the whole target path and
    offers a template, which a volume cannot give.
    """
    known = output_extensions()
    if PurePosixPath(path).suffix.lower() not in known:
        raise VolumeRefused(
            'the volume attribute "path" has no extension a format writes; end the file name '
            f"with one of {', '.join(known)}"
        )


_ATTRIBUTE_OF: Final = {
    **{row.store_field or row.store_input or row.setting or "": row.csi for row in _ROWS
       if row.csi and (row.store_field or row.store_input or row.setting)},
    "endpoint": "endpoint",
    "key": "key",
}  # fmt: skip
"""The volume attribute that sets each store input (a StoreSpec field), read off the rows."""


def attribute_spelling(field: str) -> str:
    """A store input as a volume spells it: its attribute, or the Secret key that carries it
    (``token``, ``password``); the spelling a store's :class:`~dynconf.errors.Refusal` is
    rendered with for a publish."""
    if field in SECRET_KEYS and field != "endpoint":
        return f'the Secret key "{field}"'
    attribute = _ATTRIBUTE_OF.get(field)
    if attribute:
        return f'the volume attribute "{attribute}"'
    return f'the volume attribute "{field.removeprefix("extra.").replace("_", "-")}"'


def field_spelling(field: str) -> str:
    """A contract field (a row's name) as a volume spells it: its attribute. The spelling the
    agent's parser's :class:`~dynconf.errors.Refusal` is rendered with for a publish."""
    row = REGISTRY.get(field)
    return f'the volume attribute "{row.csi if row is not None and row.csi else field}"'


def _credential(attributes: Mapping[str, str], used: Mapping[str, str]) -> str:
    material = {
        "secrets": {name: used[name] for name in sorted(used)},
        "token-secret": attributes.get("token-secret", ""),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def parse_volume(
    target: str | Path, attributes: Mapping[str, str], secrets: Mapping[str, str]
) -> VolumeSpec:
    """Check a publish request's attributes and Secrets; the reader they describe.

    Raises :class:`VolumeRefused` for a missing required attribute, an unknown or
    sidecar-only one, a ``path`` that could leave the volume, an ``endpoint`` given both as an
    attribute and in the Secret, or anything the agent's parser refuses. The store's own
    ``validate()`` is the caller's next step (it needs the plugin registry).
    """
    _refuse_oversized(attributes)
    for name in REQUIRED:
        if not attributes.get(name, "").strip():
            raise VolumeRefused(f'the volume attribute "{name}" is required')
    _refuse_unknown(attributes)
    path = check_path(attributes["path"])
    _check_extension(path)
    target_path = Path(target)
    try:
        out = safe_child(target_path, path)
    except DynconfError:
        raise VolumeRefused(
            'the volume attribute "path" must name a file inside the volume, not the volume '
            "itself or a place a symlink leads to"
        ) from None
    if attributes.get("endpoint") and secrets.get("endpoint"):
        raise VolumeRefused(
            'the volume attribute "endpoint" and the Secret key "endpoint" both give the '
            "address; one address, one place: keep one of them"
        )

    argv = ["--out", str(out)]
    if not attributes.get(_WATCH.csi or ""):
        argv += [_WATCH.flags[0], str(DEFAULT_WATCH_SECONDS)]  # a volume always watches
    for attribute, flag in _FLAG_FOR.items():
        value = attributes.get(attribute, "")
        if value and REGISTRY[attribute].bare:
            argv += [flag] if value.strip().lower() == "true" else []
        elif value:
            argv += [flag, value]
    used = {name: secrets[name] for name in SECRET_KEYS if secrets.get(name)}
    environ = {SECRET_KEYS[name]: value for name, value in used.items()}
    try:
        settings = parse_args(argv, environ)
    except UsageError as error:
        refusal = error.refusal
        raise VolumeRefused(refusal.render(field_spelling), refusal.field) from None

    store = settings.spec
    options = tuple(
        (row.csi or "", value)
        for row in _OPTION_ROWS
        if (value := getattr(store, row.store_field or ""))
    ) + tuple((row.csi or "", store.extra[row.setting or ""]) for row in _SETTING_ROWS
              if row.setting in store.extra)  # fmt: skip
    document = DocumentKey(
        source=store.source,
        endpoint=attributes.get("endpoint", ""),
        key=store.key,
        options=options,
        credential=_credential(attributes, used),
    )
    pod = "/".join(
        part
        for part in (
            attributes.get(f"{KUBELET_PREFIX}pod.namespace"),
            attributes.get(f"{KUBELET_PREFIX}pod.name"),
        )
        if part
    )
    return VolumeSpec(
        target=target_path,
        path=path,
        # the target is the trusted root: every write below it walks without a symlink
        request=dataclasses.replace(settings.request, root=target_path),
        store=store,
        interval=float(settings.watch or DEFAULT_WATCH_SECONDS),
        document=document,
        pod=pod or "unknown",
    )
