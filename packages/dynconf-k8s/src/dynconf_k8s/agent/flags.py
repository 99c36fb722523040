"""The agent's command line: ``--flag value`` pairs, parsed by hand as the contract spells them.

There is no ``--flag=value`` form and no abbreviation: the webhook writes these arguments and a
person reads them in ``kubectl describe pod``, so one spelling each. An unknown flag is refused
as ``unknown flag "<x>"`` and a flag without its value as ``<flag> needs a value``; every other
refusal is one sentence naming the fix. Secrets never arrive here: a token, a password and an
endpoint that embeds one come from ``DYNAMIC_CONFIG_AGENT_TOKEN`` / ``_PASSWORD`` /
``_ENDPOINT`` (``--token`` is refused on purpose: arguments are printed to anyone who can read
the pod).

Parsing produces :class:`AgentSettings`; the store's own ``validate()`` runs afterwards in
:mod:`dynconf_k8s.agent.main`, so the agent and the webhook refuse the same specs with the same
sentences.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from dynconf.budget import Budget, parse_budget
from dynconf.errors import DynconfError
from dynconf.limits import shown
from dynconf.pipeline import RenderRequest
from dynconf.plugins import default_registry
from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES, OutputSpec, TemplateSource
from dynconf.stores import StoreSpec, TlsSettings
from dynconf.units import parse_seconds_or_duration
from dynconf_k8s.agent.notify import NotifyTarget, NotifyUrlError, parse_notify_url
from dynconf_k8s.contract.registry import BOOK_KEYS, KEYS
from dynconf_k8s.vocabulary import ON_DELETE, ON_DRIFT, STARTUP_POLICIES, STORES

__all__ = [
    "output_extensions",
    "HELP",
    "USAGE",
    "asked_for_info",
    "AgentSettings",
    "UsageError",
    "parse_args",
]

_STORE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")

_ENV_READ: Final = (
    "DYNAMIC_CONFIG_AGENT_ENDPOINT",
    "DYNAMIC_CONFIG_AGENT_TOKEN",
    "DYNAMIC_CONFIG_AGENT_PASSWORD",
    "DYNAMIC_CONFIG_POD_NAME",
    "DYNAMIC_CONFIG_POD_UID",
)
"""The environment variables :func:`parse_args` reads (the secrets among them are never
quoted: a refusal names the variable only)."""


def output_extensions() -> tuple[str, ...]:
    """The extensions a loaded format writes, asked of the format registry (the one home).

    The book writes ``.env`` files without a template (``also.db: /config/db.env``), and a
    format plugin a third party adds is writable the moment it is loaded, with no list here.
    """
    return tuple(f".{ext}" for ext in sorted(default_registry().extensions))


AGENT_ONLY_FLAGS: Final = frozenset({"--one-shot"})
"""Flags of the agent's own (a run outside Kubernetes); the webhook never writes them."""
BARE_FLAGS: Final = AGENT_ONLY_FLAGS | {flag for row in KEYS if row.bare for flag in row.flags}
VALUE_FLAGS: Final = frozenset(
    {flag for row in KEYS if not row.bare for flag in row.flags} | {"--also"}
)
"""Exactly the contract rows' flags (plus ``--also``, the ``also.<name>`` files), read off
:data:`~dynconf_k8s.contract.registry.KEYS`: a key that gains a flag is accepted here with
no edit."""
_STORE_FIELD_ROWS: Final = tuple(row for row in KEYS if row.store_field)
_SETTING_ROWS: Final = tuple(row for row in KEYS if row.setting)
"""The loaded stores' setting inputs (``--token-header``), each into ``StoreSpec.extra``."""
TIMEOUT_STORES: Final = frozenset({"consul", "vault", "config-server", "firestore"})

_BOOK_USAGE: Final = """\
usage: dynamic-config-agent --source STORE [--endpoint ADDR] --key KEY --out PATH [flags]

  --source S             consul | vault | config-server | firestore | git | redis | etcd | nats | s3
                         (or file, the embedded store)
  --endpoint ADDR        store address (or DYNAMIC_CONFIG_AGENT_ENDPOINT)
  --key KEY              the document's key in the store
  --out PATH             the rendered file (.json .toml .yaml .yml .ini .properties,
                         any name with a template)
  --watch N              keep it current, resyncing every N seconds (absent: render once)
  --one-shot             render once and exit, even with --watch
  --section S            render one section of the document
  --also out=P[,section=S][,mode=M]   another file from the same fetch (repeatable)
  --template FILE | --template-inline TEXT   render through a template
  --schema FILE          JSON Schema the document must satisfy (re-read every render)
  --file-mode 0640       mode of the rendered files
  --max-document-bytes N size ceiling (default 8388608)
  --history N            keep N replaced generations (0-10)
  --meta                 write .<name>.meta beside each file
  --startup-policy P     allow-cached | require-fresh | best-effort
  --on-delete P          retain | remove | fail
  --on-drift P           warn | repair | fail
  --max-staleness T      readiness ceiling: seconds or a duration (90s, 15m, 6h, 1d)
  --metrics-addr H:P     metrics, /healthz, /readyz and POST /applied
  --require-ack          readiness waits for the application's POST /applied
  --notify-http URL      POST to a loopback URL after each publish
  --canary FILE          cohort percentage file
  --events               write Warning Events on this pod (needs DYNAMIC_CONFIG_POD_NAME)
  --timeout S            per-fetch deadline (consul, vault, config-server, firestore)
  --store-budget R[/B]   at most R calls a second to the store (burst B); off: unlimited
  --dynamic              vault dynamic secret (leases); --no-revoke-on-shutdown, --revoke-grace S
  --auth M  --auth-mount M  --auth-role R  --auth-username U  --auth-token-path F
  --namespace NS (vault)  --ref REF --ssh-key F (git)  --api-url URL (firestore, s3)
  --ca F  --tls-cert F --tls-key F  --tls-server-name N  --tls-skip-verify  --no-tls-reload

Secrets come from the environment only: DYNAMIC_CONFIG_AGENT_TOKEN, DYNAMIC_CONFIG_AGENT_PASSWORD,
DYNAMIC_CONFIG_AGENT_ENDPOINT.
"""


def _store_usage() -> str:
    """A line per flag the loaded stores declare (a tenth store's ``--token-header``)."""
    rows = [row for row in _SETTING_ROWS if row not in BOOK_KEYS]
    if not rows:
        return ""
    lines = [f"  {row.flags[0]:<22} {row.summary}" for row in rows]
    return "\nInputs of the loaded store plugins:\n" + "\n".join(lines) + "\n"


USAGE: Final = _BOOK_USAGE + _store_usage()
HELP: Final = USAGE + (
    "\n  -h, --help             print this text and exit (any position)\n"
    "  --version              print the agent's version and exit\n"
)
"""What ``--help`` prints: :data:`USAGE` (the contract's flags) and the two that only ask."""


def asked_for_info(argv: Sequence[str]) -> Literal["help", "version"] | None:
    """``help`` or ``version`` when the command line asks (:func:`dynconf.cli.asked_for`).

    Neither is a contract flag: the webhook never writes them, and a run that asks starts
    nothing, so they are answered before the registry, the environment or any flag is read.
    """
    if list(argv[:1]) == ["help"]:
        return "help"
    if not {"-h", "--help", "--version"} & set(argv):
        return None  # the usual start: the init agent's imports stay as few as they are
    from dynconf.cli import asked_for

    return asked_for(argv, VALUE_FLAGS)


class UsageError(Exception):
    """An argument the agent refuses; printed as ``dynamic-config-agent: <why>`` + usage.

    ``flag`` names the flag refused (``None`` when the refusal is about the whole command
    line), so a caller that wrote the arguments — the webhook, the node agent — can say which
    of its own inputs produced it without reading the sentence. A value the sentence repeats
    goes through :func:`_quoted`, so the sentence stays one short UTF-8 line whatever the
    value was.
    """

    def __init__(self, message: str, flag: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.flag = flag


def _store_budget(values: Mapping[str, str]) -> Budget | None:
    if "--store-budget" not in values:
        return None
    try:
        return parse_budget(values["--store-budget"], "--store-budget")
    except ValueError as error:
        raise UsageError(str(error), "--store-budget") from None


@dataclass(frozen=True)
class AgentSettings:
    """Everything the command line and environment decided, checked and typed."""

    source: str
    spec: StoreSpec
    request: RenderRequest
    watch: int | None = None
    metrics_addr: tuple[str, int] | None = None
    startup_policy: str = "allow-cached"
    on_delete: str = "retain"
    on_drift: str = "warn"
    max_staleness: float | None = None
    require_ack: bool = False
    events: bool = False
    canary: Path | None = None
    notify: NotifyTarget | None = None
    tls_reload: bool = True
    revoke_on_shutdown: bool = True
    revoke_grace: float = 5.0
    pod_name: str = "unnamed"
    pod_uid: str | None = None
    trust_files: tuple[str, ...] = field(default=())
    store_budget: Budget | None = None
    """The ceiling on calls to the store (``--store-budget``); ``None``: unlimited."""

    @property
    def watching(self) -> bool:
        return self.watch is not None

    @property
    def dynamic(self) -> bool:
        return self.spec.dynamic


def _quoted(value: str) -> str:
    """A value as a refusal repeats it: one line, UTF-8-safe, cut past 200 characters.

    The webhook, the node agent and a person reading ``kubectl logs`` all receive these
    sentences; a 4,000-character path or a control character must not reach them whole.
    """
    return shown(value)


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: str, name: str, flag: str | None) -> str:
    """``value`` if it is text; a lone surrogate (argv or environment bytes that are not
    UTF-8, decoded with ``surrogateescape``) has no spelling in a request, a file or a log.

    Strict UTF-8 refuses exactly the surrogate code points, so the encoder is the check; ASCII
    (nearly every flag) needs no look at all. The webhook runs this over every argument of
    every agent it injects, so it is on admission's hot path."""
    if not value.isascii() and not _encodes(value):
        raise UsageError(f"{name} holds bytes that are not UTF-8 text; give it as UTF-8", flag)
    return value


def _pairs(argv: Sequence[str]) -> tuple[dict[str, str], set[str], list[str]]:
    values: dict[str, str] = {}
    bare: set[str] = set()
    also: list[str] = []
    index = 0
    while index < len(argv):
        flag = argv[index]
        if flag in BARE_FLAGS:
            bare.add(flag)
            index += 1
            continue
        if flag == "--token":
            raise UsageError(
                "--token would print the credential in the pod spec; set "
                "DYNAMIC_CONFIG_AGENT_TOKEN instead",
                flag,
            )
        if flag not in VALUE_FLAGS:
            raise UsageError(f'unknown flag "{_quoted(flag)}"', flag)
        if index + 1 >= len(argv):
            raise UsageError(f"{flag} needs a value", flag)
        value = _text(argv[index + 1], flag, flag)
        if flag == "--also":
            also.append(value)
        else:
            values[flag] = value
        index += 2
    return values, bare, also


def _base(flag: str) -> str:
    """The flag of a part (``--also mode`` → ``--also``)."""
    return flag.split(" ", 1)[0]


def parse_mode(text: str, flag: str = "--file-mode") -> int:
    """An octal permission (``0640``, ``0o640``, ``640``): at most 0777 and owner-readable."""
    digits = text.strip().lower().removeprefix("0o")
    try:
        mode = int(digits, 8)
    except ValueError:
        raise UsageError(f"{flag} takes an octal mode such as 0640", _base(flag)) from None
    if mode > 0o777:
        raise UsageError(
            f"{flag} {_quoted(text)} is past 0777; give permission bits only", _base(flag)
        )
    if not mode & 0o400:
        raise UsageError(
            f"{flag} {_quoted(text)} leaves the owner unable to read the file; add 0400",
            _base(flag),
        )
    return mode


def _whole(value: str, flag: str, *, message: str | None = None) -> int:
    """A whole number in ASCII digits (``int()`` alone also takes fullwidth or Arabic ones)."""
    try:
        if not value.isascii():
            raise ValueError
        number = int(value.strip())
    except ValueError:
        raise UsageError(message or f"{flag} takes a whole number", flag) from None
    return number


def _seconds(value: str, flag: str) -> float:
    try:
        seconds = parse_seconds_or_duration(value.strip(), path=flag)
    except DynconfError:
        raise UsageError(
            f"{flag} takes whole seconds or a duration such as 90s, 15m, 6h or 1d", flag
        ) from None
    if seconds <= 0:
        raise UsageError(f"{flag} must not be 0", flag)
    return seconds


def _choice(values: Mapping[str, str], flag: str, allowed: Sequence[str], default: str) -> str:
    chosen = values.get(flag, default)
    if chosen not in allowed:
        raise UsageError(f"{flag} {_quoted(chosen)} is not one of: {' | '.join(allowed)}", flag)
    return chosen


def _check_extension(path: Path, flag: str) -> None:
    known = output_extensions()
    if path.suffix.lower() not in known:
        raise UsageError(
            f"{flag} {_quoted(str(path))} has no extension a format writes; use "
            f"{', '.join(known)}, or give a template, which frees the extension",
            _base(flag),
        )


def parse_also(text: str, default_mode: int | None) -> OutputSpec:
    """One ``--also out=<path>[,section=<s>][,mode=<octal>]`` into an output."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in ("out", "section", "mode") or name in fields:
            raise UsageError(
                f"--also {_quoted(text)}: each part is out=, section= or mode=, once; e.g. "
                "out=/config/db.json,section=database",
                "--also",
            )
        fields[name] = value.strip()
    if not fields.get("out"):
        raise UsageError(f"--also {_quoted(text)} needs out=<path>", "--also")
    path = Path(fields["out"])
    _check_extension(path, "--also out")
    mode = parse_mode(fields["mode"], "--also mode") if "mode" in fields else default_mode
    return OutputSpec(path=path, section=fields.get("section") or None, mode=mode)


def _metrics_addr(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise UsageError(
            f"--metrics-addr {_quoted(text)} is not host:port; e.g. 0.0.0.0:9110",
            "--metrics-addr",
        )
    return host or "0.0.0.0", int(port)  # noqa: S104 - the pod's port, by contract


def _store_strings(values: Mapping[str, str]) -> dict[str, Any]:
    """The store's plain string inputs, each from its row's flag into its StoreSpec field."""
    return {row.store_field or "": values.get(row.flags[0]) for row in _STORE_FIELD_ROWS}


def _store_settings(values: Mapping[str, str], bare: set[str]) -> dict[str, str]:
    """The store's setting inputs given as flags: a value, or ``"true"`` for a switch."""
    out: dict[str, str] = {}
    for row in _SETTING_ROWS:
        flag = row.flags[0]
        if row.bare and flag in bare:
            out[row.setting or ""] = "true"
        elif not row.bare and flag in values:
            out[row.setting or ""] = values[flag]
    return out


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> AgentSettings:
    """Parse and check the command line against the contract; raise :class:`UsageError`."""
    env = os.environ if environ is None else environ
    values, bare, also = _pairs(argv)
    for name in _ENV_READ:
        if name in env:
            _text(env[name], name, None)

    source = values.get("--source")
    if not source:
        raise UsageError(f"--source is required; one of: {', '.join(STORES)}", "--source")
    if not _STORE_NAME.fullmatch(source):
        raise UsageError(
            f'--source "{_quoted(source)}" is not a store name; use one of: {", ".join(STORES)}',
            "--source",
        )
    endpoint = values.get("--endpoint") or env.get("DYNAMIC_CONFIG_AGENT_ENDPOINT", "")
    if not endpoint and source != "file":
        raise UsageError("--endpoint is required (or DYNAMIC_CONFIG_AGENT_ENDPOINT)", "--endpoint")
    key = values.get("--key")
    if not key:
        raise UsageError("--key is required: the document's key in the store", "--key")
    out_text = values.get("--out")
    if not out_text:
        raise UsageError("--out is required: the file to render into", "--out")
    out = Path(out_text)

    if "--template" in values and "--template-inline" in values:
        raise UsageError(
            "--template and --template-inline exclude each other; keep one", "--template"
        )
    template: TemplateSource | None = None
    if "--template" in values:
        template = TemplateSource.file(values["--template"])
    elif "--template-inline" in values:
        template = TemplateSource.inline(values["--template-inline"])
    if template is None:
        _check_extension(out, "--out")

    watch: int | None = None
    if "--watch" in values:
        watch = max(1, _whole(values["--watch"], "--watch", message="--watch takes whole seconds"))
    if "--one-shot" in bare:
        watch = None

    mode = parse_mode(values["--file-mode"]) if "--file-mode" in values else None
    max_bytes = DEFAULT_MAX_DOCUMENT_BYTES
    if "--max-document-bytes" in values:
        max_bytes = _whole(values["--max-document-bytes"], "--max-document-bytes")
        if max_bytes < 1:
            raise UsageError(
                "--max-document-bytes must be a positive number of bytes", "--max-document-bytes"
            )
    history = 0
    if "--history" in values:
        history = _whole(values["--history"], "--history")
        if not 0 <= history <= 10:
            raise UsageError("--history keeps 0 to 10 generations (0 = off)", "--history")

    outputs = [
        OutputSpec(path=out, section=values.get("--section") or None, mode=mode, template=template)
    ]
    outputs.extend(parse_also(text, mode) for text in also)
    try:
        request = RenderRequest(
            outputs=outputs,
            schema=Path(values["--schema"]) if "--schema" in values else None,
            max_document_bytes=max_bytes,
            history=history,
            meta="--meta" in bare,
        )
    except DynconfError as error:
        raise UsageError(error.message) from None

    timeout: float | None = None
    if "--timeout" in values:
        if source not in TIMEOUT_STORES:
            raise UsageError(
                f"--timeout is for consul, vault, config-server and firestore; remove it for "
                f"a {source} source",
                "--timeout",
            )
        timeout = _seconds(values["--timeout"], "--timeout")

    tls = TlsSettings(
        ca_file=values.get("--ca"),
        cert_file=values.get("--tls-cert"),
        key_file=values.get("--tls-key"),
        server_name=values.get("--tls-server-name"),
        skip_verify="--tls-skip-verify" in bare,
    )
    spec = StoreSpec.from_inputs(
        source=source,
        endpoint=endpoint,
        key=key,
        section=values.get("--section") or None,
        ssh_key=values.get("--ssh-key"),
        timeout=timeout,
        dynamic="--dynamic" in bare,
        tls=tls,
        max_bytes=max_bytes,
        extra=_store_settings(values, bare),
        **_store_strings(values),
    ).with_secrets_from_env(env)

    notify = None
    if "--notify-http" in values:
        try:
            notify = parse_notify_url(values["--notify-http"])
        except NotifyUrlError as error:
            raise UsageError(f"--notify-http {error}", "--notify-http") from None

    pod_name = env.get("DYNAMIC_CONFIG_POD_NAME") or "unnamed"
    if "--events" in bare and not env.get("DYNAMIC_CONFIG_POD_NAME"):
        raise UsageError(
            "--events needs DYNAMIC_CONFIG_POD_NAME (the downward API's metadata.name) to "
            "name the pod the Events are about",
            "--events",
        )

    trust = [f for f in (tls.ca_file, tls.cert_file, tls.key_file, spec.setting("ssh_key")) if f]
    return AgentSettings(
        source=source,
        spec=spec,
        request=request,
        watch=watch,
        metrics_addr=_metrics_addr(values["--metrics-addr"])
        if "--metrics-addr" in values
        else None,
        startup_policy=_choice(values, "--startup-policy", STARTUP_POLICIES, "allow-cached"),
        on_delete=_choice(values, "--on-delete", ON_DELETE, "retain"),
        on_drift=_choice(values, "--on-drift", ON_DRIFT, "warn"),
        max_staleness=_seconds(values["--max-staleness"], "--max-staleness")
        if "--max-staleness" in values
        else None,
        require_ack="--require-ack" in bare,
        events="--events" in bare,
        canary=Path(values["--canary"]) if "--canary" in values else None,
        notify=notify,
        tls_reload="--no-tls-reload" not in bare,
        revoke_on_shutdown="--no-revoke-on-shutdown" not in bare,
        revoke_grace=_seconds(values["--revoke-grace"], "--revoke-grace")
        if "--revoke-grace" in values
        else 5.0,
        pod_name=pod_name,
        pod_uid=env.get("DYNAMIC_CONFIG_POD_UID") or None,
        trust_files=tuple(trust),
        store_budget=_store_budget(values),
    )
