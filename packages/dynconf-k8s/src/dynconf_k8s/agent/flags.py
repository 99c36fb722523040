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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from dynconf.budget import Budget, parse_budget
from dynconf.errors import DynconfError, Refusal
from dynconf.limits import shown
from dynconf.pipeline import RenderRequest
from dynconf.plugins import default_registry
from dynconf.render import OutputSpec, TemplateSource
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_k8s.agent.notify import NotifyTarget, NotifyUrlError, parse_notify_url
from dynconf_k8s.contract.loaded import EMBEDDED
from dynconf_k8s.contract.registry import ALSO, BOOK_KEYS, FLAG_KEYS, KEYS, REGISTRY, Key
from dynconf_k8s.contract.rules import RuleError, parse_file_mode
from dynconf_k8s.vocabulary import STORES

__all__ = [
    "output_extensions",
    "USAGE",
    "asked_for_info",
    "help_text",
    "AgentSettings",
    "UsageError",
    "flag_spelling",
    "parse_args",
]

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
    formats = default_registry().formats.values()
    return tuple(
        sorted(f".{ext}" for fmt in formats if fmt.dump is not None for ext in fmt.extensions)
    )


ONE_SHOT: Final = "--one-shot"
ALSO_FLAG: Final = "--also"
"""The flag of the ``also.<name>`` files (repeatable; no row of its own)."""
AGENT_ONLY_FLAGS: Final = frozenset({ONE_SHOT})
"""Flags of the agent's own (a run outside Kubernetes); the webhook never writes them."""
BARE_FLAGS: Final = AGENT_ONLY_FLAGS | {flag for row in KEYS if row.bare for flag in row.flags}
VALUE_FLAGS: Final = frozenset(
    {flag for row in KEYS if not row.bare for flag in row.flags} | {ALSO_FLAG}
)
"""Exactly the contract rows' flags (plus ``--also``, the ``also.<name>`` files), read off
:data:`~dynconf_k8s.contract.registry.KEYS`: a key that gains a flag is accepted here with
no edit."""
_STORE_FIELD_ROWS: Final = tuple(row for row in KEYS if row.store_field)
_SETTING_ROWS: Final = tuple(row for row in KEYS if row.setting)
"""The loaded stores' setting inputs (``--token-header``), each into ``StoreSpec.extra``."""
_STORE_BUDGET: Final = REGISTRY["store-budget"].flags[0]
_TLS_KEY: Final = REGISTRY["tls-secret"].flags[1]
"""The second flag of ``tls-secret`` (its first, ``--tls-cert``, is the row's own)."""
_JUDGED_ROWS: Final = tuple(
    row for row in KEYS if row.flags and not row.bare and row.flag_carries == "value"
)
"""The rows whose flag carries the value as the annotation (or volume attribute) wrote it: the
parser judges each by the row's own rule, the function admission runs on the same text."""

_BOOK_USAGE: Final = """\
usage: dynamic-config-agent --source STORE [--endpoint ADDR] --key KEY --out PATH [flags]

  --source S             consul | vault | config-server | firestore | git | redis | etcd | nats | s3
                         (or file, the embedded store)
  --endpoint ADDR        store address (or DYNAMIC_CONFIG_AGENT_ENDPOINT)
  --key KEY              the document's key in the store
  --out PATH             the rendered file: its extension names an output format
                         (listed below), or any name with a template
  --watch N              keep it current, resyncing every N seconds (absent: render once)
  --one-shot             render once and exit, even with --watch
  --section S            render one section of the document
  --also out=P[,section=S][,mode=M]   another file from the same fetch (repeatable)
  --template FILE | --template-inline TEXT   render through a template
  --schema FILE          JSON Schema the document must satisfy (re-read every render)
  --file-mode 0640       mode of the rendered files
  --max-document-bytes N size ceiling (default 8388608)
  --history N            keep N replaced generations (1-10)
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
  --timeout S            per-fetch deadline in whole seconds (every store)
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
_ASKING: Final = (
    "\n  -h, --help             print this text and exit (any position)\n"
    "  --version              print the agent's version and exit\n"
)


def help_text() -> str:
    """What ``--help`` prints: :data:`USAGE`, the output formats, and the two flags that ask.

    The formats are the loaded format plugins' writable extensions (:func:`output_extensions`),
    so ``.env`` and a third party's format are listed the moment they load.
    """
    formats = " ".join(output_extensions())
    return f"{USAGE}\nOutput formats (by the --out extension): {formats}\n{_ASKING}"


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


def flag_spelling(field: str) -> str:
    """A contract field (a row's name, or ``also``) as the agent's command line spells it."""
    row = REGISTRY.get(field)
    if row is not None and row.flags:
        return row.flags[0]
    return ALSO_FLAG if field == ALSO else field


class UsageError(Exception):
    """An argument the agent refuses; printed as ``dynamic-config-agent: <why>`` + usage.

    ``refusal`` is the refusal as data: its ``field`` names the contract row (``file-mode``,
    ``also``) whose flag was refused, or is ``None`` when the refusal is about the whole command
    line or the environment. The agent renders it with :func:`flag_spelling`; a caller that
    wrote the arguments — the webhook, the node agent — renders the same refusal in its own
    vocabulary (annotation key, volume attribute) and never reads the sentence. A value the
    sentence repeats goes through :func:`_quoted`, so it stays one short UTF-8 line.
    """

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        self.message = refusal.render(flag_spelling)
        super().__init__(self.message)

    @property
    def flag(self) -> str | None:
        """The refused flag as the agent spells it (``None``: the whole command line)."""
        field = self.refusal.field
        return None if field is None else flag_spelling(field)


def _refused(row: Key | str, problem: str, fix: str = "") -> UsageError:
    field = row if isinstance(row, str) else row.name
    return UsageError(Refusal(field, problem, fix))


def _of_flag(flag: str, problem: str, fix: str = "") -> UsageError:
    """A refusal about one flag: its row's field when the flag is the row's own spelling, else
    the flag named in the sentence (``--tls-key``, the second flag of ``tls-secret``)."""
    field = FLAG_KEYS.get(flag)
    if field is not None and flag_spelling(field) == flag:
        return UsageError(Refusal(field, problem, fix))
    return UsageError(Refusal(None, f"{_quoted(flag)} {problem}", fix))


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    """Everything the command line and environment decided, checked and typed.

    No field has a default of its own: each is the row's value (:attr:`Key.absent` when the
    flag is not written), so the contract table is the one home of every default.
    """

    source: str
    spec: StoreSpec
    request: RenderRequest
    watch: int | None
    metrics_addr: tuple[str, int] | None
    startup_policy: str
    on_delete: str
    on_drift: str
    max_staleness: float | None
    require_ack: bool
    events: bool
    canary: Path | None
    notify: NotifyTarget | None
    tls_reload: bool
    revoke_on_shutdown: bool
    revoke_grace: float
    pod_name: str
    pod_uid: str | None
    trust_files: tuple[str, ...]
    store_budget: Budget | None
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
    sentences; a 4,000-character flag or a control character must not reach them whole.
    """
    return shown(value)


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_NOT_UTF8: Final = ("holds bytes that are not UTF-8 text", "give it as UTF-8")


def _text(value: str, flag: str) -> str:
    """``value`` if it is text; a lone surrogate (argv bytes that are not UTF-8, decoded with
    ``surrogateescape``) has no spelling in a request, a file or a log.

    Strict UTF-8 refuses exactly the surrogate code points, so the encoder is the check; ASCII
    (nearly every flag) needs no look at all. The webhook runs this over every argument of
    every agent it injects, so it is on admission's hot path."""
    if not value.isascii() and not _encodes(value):
        raise _of_flag(flag, *_NOT_UTF8)
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
                Refusal(
                    None,
                    "--token would print the credential in the pod spec",
                    "set DYNAMIC_CONFIG_AGENT_TOKEN instead",
                )
            )
        if flag not in VALUE_FLAGS:
            raise UsageError(Refusal(None, f'unknown flag "{_quoted(flag)}"'))
        if index + 1 >= len(argv):
            raise _of_flag(flag, "needs a value")
        value = _text(argv[index + 1], flag)
        if flag == ALSO_FLAG:
            also.append(value)
        else:
            values[flag] = value
        index += 2
    return values, bare, also


def _judged(given: Mapping[str, str]) -> dict[str, Any]:
    """Each written value flag through its row's rule, and each row's :attr:`Key.absent`
    text when its flag is not written: the typed values, by row name.

    The rule is the row's (:mod:`dynconf_k8s.contract.rules`), the same function admission
    applies to the annotation and the node agent's volume attribute, so the three take and
    refuse the same texts. An embedded store (``file``) is the agent's own, no pod's.
    """
    typed: dict[str, Any] = {}
    for row in _JUDGED_ROWS:
        text = given.get(row.name, row.absent)
        if text is None:
            continue
        if row.name == "source":
            typed[row.name] = _store_name(text)
            continue
        try:
            typed[row.name] = row.rule(text)
        except RuleError as error:
            raise _refused(row, str(error)) from None
    return typed


_STORE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def _store_name(text: str) -> str:
    """A store's name, by its shape only: which stores exist is the plugin registry's to say
    at start (with why a plugin did not load), and an embedded store (``file``) is the
    agent's own besides the ones a pod may name."""
    if not _STORE_NAME.fullmatch(text):
        raise _refused("source", "is not a store name", f"use one of: {', '.join(STORES)}")
    return text


def _check_extension(path: Path, field: str, part: str = "") -> None:
    known = output_extensions()
    if path.suffix.lower() not in known:
        raise _refused(
            field,
            f"{part}has no extension a format writes",
            f"use {', '.join(known)}, or give a template, which frees the extension",
        )


_ALSO_PARTS: Final = ("out", "section", "mode")


def parse_also(text: str, default_mode: int | None) -> OutputSpec:
    """One ``--also out=<path>[,section=<s>][,mode=<octal>]`` into an output."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in _ALSO_PARTS or name in fields:
            raise _refused(
                ALSO,
                "takes parts out=, section= or mode=, each once",
                "e.g. out=/config/db.json,section=database",
            )
        fields[name] = value.strip()
    if not fields.get("out"):
        raise _refused(ALSO, "needs out=<path>", "e.g. out=/config/db.json")
    path = Path(fields["out"])
    _check_extension(path, ALSO, "out= ")
    mode = default_mode
    if "mode" in fields:
        try:
            mode = parse_file_mode(fields["mode"])
        except RuleError as error:
            raise _refused(ALSO, f"mode= {error}") from None
    return OutputSpec(path=path, section=fields.get("section") or None, mode=mode)


def _metrics_addr(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise _refused("metrics-port", "is not host:port", "e.g. 0.0.0.0:9110")
    return host or "0.0.0.0", int(port)  # noqa: S104 - the pod's port, by contract


def _store_strings(typed: Mapping[str, Any]) -> dict[str, Any]:
    """The store's plain string inputs, each from its row into its StoreSpec field."""
    return {row.store_field or "": typed.get(row.name) for row in _STORE_FIELD_ROWS}


def _store_settings(typed: Mapping[str, Any], switched: set[str]) -> dict[str, str]:
    """The store's setting inputs given as flags: a value, or ``"true"`` for a switch."""
    out: dict[str, str] = {}
    for row in _SETTING_ROWS:
        if row.bare and row.name in switched:
            out[row.setting or ""] = "true"
        elif not row.bare and row.name in typed:
            out[row.setting or ""] = str(typed[row.name])
    return out


def _by_row(values: Mapping[str, str], bare: set[str]) -> tuple[dict[str, str], set[str]]:
    """The command line by contract row: each row's own flag's text (a second flag of a row,
    ``--tls-key``, stays in ``values``), and the rows whose bare flag was written."""
    given = {
        FLAG_KEYS[flag]: text
        for flag, text in values.items()
        if flag_spelling(FLAG_KEYS[flag]) == flag
    }
    return given, {FLAG_KEYS[flag] for flag in bare if flag in FLAG_KEYS}


def _switch(name: str, switched: set[str]) -> bool:
    """A switch row's value: its bare flag turns it on, its negated flag (``--no-tls-reload``)
    off, as the row's :attr:`~Key.flag_kind` says."""
    on = name in switched
    return on if REGISTRY[name].flag_kind == "bare" else not on


def _required(given: Mapping[str, str], env: Mapping[str, str]) -> None:
    """The inputs every agent needs, refused in the contract's order."""
    source = given.get("source")
    if not source:
        raise _refused("source", "is required", f"use one of: {', '.join(STORES)}")
    address = given.get("endpoint") or env.get("DYNAMIC_CONFIG_AGENT_ENDPOINT")
    if not address and source not in EMBEDDED:
        raise _refused(
            "endpoint", "is required", "give the store's address or DYNAMIC_CONFIG_AGENT_ENDPOINT"
        )
    if not given.get("key"):
        raise _refused("key", "is required", "give the document's key in the store")
    if not given.get("path"):
        raise _refused("path", "is required", "give the file to render into")


def parse_args(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> AgentSettings:
    """Parse and check the command line against the contract; raise :class:`UsageError`."""
    env = os.environ if environ is None else environ
    values, bare, also = _pairs(argv)
    for name in _ENV_READ:
        if name in env and not env[name].isascii() and not _encodes(env[name]):
            raise UsageError(Refusal(None, f"{name} {_NOT_UTF8[0]}", _NOT_UTF8[1]))
    given, switched = _by_row(values, bare)
    _required(given, env)
    typed = _judged(given)
    source: str = typed["source"]
    endpoint = typed.get("endpoint") or env.get("DYNAMIC_CONFIG_AGENT_ENDPOINT", "")
    out = Path(typed["path"])

    if "template-configmap" in given and "template" in given:
        raise _refused("template-configmap", "and {field:template} exclude each other", "keep one")
    template: TemplateSource | None = None
    if "template-configmap" in given:
        template = TemplateSource.file(given["template-configmap"])
    elif "template" in typed:
        template = TemplateSource.inline(typed["template"])
    if template is None:
        _check_extension(out, "path")

    watch: int | None = None
    if "watch-seconds" in typed and ONE_SHOT not in bare:
        watch = max(1, typed["watch-seconds"])  # the contract: the agent floors at one second

    mode: int | None = typed.get("file-mode")
    max_bytes: int = typed["max-document-bytes"]
    outputs = [OutputSpec(path=out, section=typed.get("section"), mode=mode, template=template)]
    outputs.extend(parse_also(text, mode) for text in also)
    try:
        request = RenderRequest(
            outputs=outputs,
            schema=Path(given["schema-configmap"]) if "schema-configmap" in given else None,
            max_document_bytes=max_bytes,
            history=typed.get("history") or 0,
            meta=_switch("meta", switched),
        )
    except DynconfError as error:
        raise UsageError(Refusal(None, error.message)) from None

    timeout = typed.get("timeout")
    tls = TlsSettings(
        ca_file=given.get("ca-configmap"),
        cert_file=given.get("tls-secret"),
        key_file=values.get(_TLS_KEY),
        server_name=typed.get("tls-server-name"),
        skip_verify=_switch("tls-skip-verify", switched),
    )
    spec = StoreSpec.from_inputs(
        source=source,
        endpoint=endpoint,
        key=typed["key"],
        section=typed.get("section"),
        ssh_key=given.get("ssh-secret"),
        timeout=None if timeout is None else float(timeout),
        dynamic=_switch("dynamic", switched),
        tls=tls,
        max_bytes=max_bytes,
        extra=_store_settings(typed, switched),
        **_store_strings(typed),
    ).with_secrets_from_env(env)

    notify = None
    if "notify-http" in typed:
        try:
            notify = parse_notify_url(typed["notify-http"])
        except NotifyUrlError as error:
            raise _refused("notify-http", str(error)) from None

    events = _switch("events", switched)
    if events and not env.get("DYNAMIC_CONFIG_POD_NAME"):
        raise _refused(
            "events",
            "needs DYNAMIC_CONFIG_POD_NAME (the downward API's metadata.name) to name the pod "
            "the Events are about",
        )

    budget = typed.get("store-budget")
    trust = [f for f in (tls.ca_file, tls.cert_file, tls.key_file, spec.setting("ssh_key")) if f]
    return AgentSettings(
        source=source,
        spec=spec,
        request=request,
        watch=watch,
        metrics_addr=_metrics_addr(given["metrics-port"]) if "metrics-port" in given else None,
        startup_policy=typed["startup-policy"],
        on_delete=typed["on-delete"],
        on_drift=typed["on-drift"],
        max_staleness=typed.get("max-staleness"),
        require_ack=_switch("require-ack", switched),
        events=events,
        canary=Path(given["canary-configmap"]) if "canary-configmap" in given else None,
        notify=notify,
        tls_reload=_switch("tls-reload", switched),
        revoke_on_shutdown=_switch("revoke-on-shutdown", switched),
        revoke_grace=typed["revoke-grace"],
        pod_name=env.get("DYNAMIC_CONFIG_POD_NAME") or "unnamed",
        pod_uid=env.get("DYNAMIC_CONFIG_POD_UID") or None,
        trust_files=tuple(trust),
        store_budget=None if budget is None else parse_budget(budget, _STORE_BUDGET),
    )
