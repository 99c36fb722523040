"""The config server's one TOML file, validated whole at start.

Everything lives under ``[server]``, except that the Kubernetes grants may also be written
as a top-level ``[kubernetes]`` table (the book's spelling; ``[server.kubernetes]`` is the
upstream code's): one model under two names, and a file that sets both is refused. Every
refusal names the key and the fix; all of them
are collected and reported together (a server that refuses one mistake per restart wastes an
operator's afternoon). Client tokens are never quoted, only the client's name.

Relative paths are taken from the configuration file's directory.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dynconf.errors import BackendError, Origin
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_configserver.names import is_name

__all__ = [
    "MIN_TOKEN_BYTES",
    "ClientSettings",
    "KubernetesSettings",
    "SectionSettings",
    "Settings",
    "SettingsError",
    "StoreSettings",
    "TlsServerSettings",
    "load_settings",
    "parse_settings",
]

MIN_TOKEN_BYTES: Final = 32
IN_CLUSTER_TOKEN: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105
IN_CLUSTER_CA: Final = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

_SERVER_KEYS: Final = frozenset({
    "bind", "insecure", "allow_anonymous", "max_stream_connections", "max_streams_per_client",
    "metrics_token", "store_interval", "file_poll_seconds", "keepalive_seconds", "sections",
    "clients", "tls", "kubernetes",
})  # fmt: skip
_SECTION_KEYS: Final = frozenset(
    {"application", "profile", "files", "env_prefix", "whole_document", "stores"}
)
_STORE_KEYS: Final = frozenset({
    "source", "endpoint", "key", "section", "auth", "auth_mount", "auth_role", "auth_username",
    "auth_token_path", "timeout", "token_file",
    "password_file", "token_env", "password_env", "ca", "tls_cert", "tls_key",
    "tls_server_name", "settings",
})  # fmt: skip
_TOML_KEY: Final = {
    "tls.ca_file": "ca", "tls.cert_file": "tls_cert", "tls.key_file": "tls_key",
    "tls.server_name": "tls_server_name", "token": "token_file", "password": "password_file",
}  # fmt: skip
"""The store table's key for each StoreSpec input whose key is not the field's own name."""


def _store_key(where: str, field: str) -> str:
    """A store input as the settings file spells it (``[stores.x].auth_role``), for the
    store's :class:`~dynconf.errors.Refusal`; a setting is a key of its ``settings`` table."""
    if field.startswith("extra."):
        return f"{where}.settings.{field.removeprefix('extra.')}"
    return f"{where}.{_TOML_KEY.get(field, field)}"


_STRING_FIELDS: Final = (
    "endpoint", "key", "section", "auth", "auth_mount", "auth_role", "auth_username",
    "auth_token_path",
)  # fmt: skip
"""The common string inputs; a store's own (git's ``ref``, s3's ``api_url``, a tenth
store's) are its declared setting inputs, taken under their own names."""
_PLACEHOLDER: Final = "<from file>"
_CLIENT_KEYS: Final = frozenset({"name", "token", "applications"})
_TLS_KEYS: Final = frozenset({"certificate", "key", "client_ca"})
_KUBE_KEYS: Final = frozenset({"api_server", "ca", "token_path", "audience", "grants"})
_GRANT_KEYS: Final = frozenset({"service_account", "applications"})


class SettingsError(BackendError):
    """The configuration file is refused; ``reasons`` holds every sentence."""

    def __init__(self, reasons: list[str], origin: Origin) -> None:
        super().__init__("; ".join(reasons), origin=origin)
        self.reasons = reasons


@dataclass(frozen=True)
class StoreSettings:
    """One store merged into a section: the spec, with secrets read from files or the env."""

    spec: StoreSpec
    token_file: Path | None = None
    password_file: Path | None = None

    def resolved_spec(self) -> StoreSpec:
        """The spec with the token/password files read now (re-read at every rebuild)."""
        from dataclasses import replace

        from dynconf.stores import credential_from_file

        spec = self.spec
        if self.token_file is not None:
            spec = replace(spec, token=credential_from_file(self.token_file))
        if self.password_file is not None:
            spec = replace(spec, password=credential_from_file(self.password_file))
        return spec


@dataclass(frozen=True)
class SectionSettings:
    application: str
    profile: str
    files: tuple[Path, ...] = ()
    env_prefix: str | None = None
    whole_document: bool = False
    stores: tuple[StoreSettings, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.application}/{self.profile}"


@dataclass(frozen=True)
class ClientSettings:
    name: str
    token: str | None = field(repr=False)
    applications: frozenset[str]


@dataclass(frozen=True)
class TlsServerSettings:
    certificate: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True)
class KubernetesSettings:
    api_server: str
    ca: Path
    token_path: Path
    audience: str | None
    grants: Mapping[str, frozenset[str]]
    """``namespace:serviceaccount`` → applications it may read."""


@dataclass(frozen=True)
class Settings:
    bind_host: str
    bind_port: int
    sections: tuple[SectionSettings, ...]
    clients: tuple[ClientSettings, ...] = ()
    insecure: bool = False
    allow_anonymous: bool = False
    max_stream_connections: int = 4096
    max_streams_per_client: int = 1024
    """Open streams one caller (a client token, a service account) may hold; by default a
    quarter of ``max_stream_connections``, so one tenant cannot take every slot."""
    metrics_token: str | None = field(default=None, repr=False)
    """The bearer ``/metrics`` answers to (its own credential, no tenant's); unset: no
    metrics are served."""
    store_interval: float = 30.0
    file_poll_seconds: float = 1.0
    keepalive_seconds: float = 15.0
    tls: TlsServerSettings | None = None
    kubernetes: KubernetesSettings | None = None


def load_settings(path: str | os.PathLike[str]) -> Settings:
    """Read and validate the file; :class:`SettingsError` carries every refusal."""
    origin = Origin.file(str(path))
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(
            [f"the configuration file cannot be read ({exc.strerror}); check the path"], origin
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(
            [f"the configuration file is not valid TOML ({type(exc).__name__}); fix its syntax"],
            origin,
        ) from None
    return parse_settings(raw, base=Path(path).resolve().parent, origin=origin)


def parse_settings(
    raw: Mapping[str, Any],
    *,
    base: Path,
    origin: Origin | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Validate a parsed document (the ``[server]`` table) into :class:`Settings`."""
    return _Parser(base, os.environ if environ is None else environ).run(
        raw, origin or Origin.inline()
    )


class _Parser:
    def __init__(self, base: Path, environ: Mapping[str, str]) -> None:
        self.base = base
        self.environ = environ
        self.refusals: list[str] = []

    def refuse(self, reason: str) -> None:
        self.refusals.append(reason)

    def path(self, where: str, value: Any, *, must_exist: bool = True) -> Path | None:
        if not isinstance(value, str) or not value:
            self.refuse(f"{where} must be a file path")
            return None
        path = Path(value)
        path = path if path.is_absolute() else self.base / path
        if must_exist and not path.is_file():
            self.refuse(f"{where} names {path}, which is not a readable file; fix the path")
        return path

    def unknown(self, where: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
        for key in sorted(set(table) - allowed):
            self.refuse(f"{where}.{key} is not a setting; use one of: {', '.join(sorted(allowed))}")

    def table(self, where: str, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.refuse(f"{where} must be a table")
            return {}
        return value

    def tables(self, where: str, value: Any) -> list[Mapping[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            self.refuse(f"{where} must be an array of tables ([[{where}]])")
            return []
        return value

    def names(self, where: str, value: Any) -> frozenset[str]:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            self.refuse(f"{where} must be a non-empty list of application names")
            return frozenset()
        bad = [v for v in value if not is_name(v)]
        if bad:
            self.refuse(f"{where} holds names that are not application names: {', '.join(bad)}")
        return frozenset(value)

    def number(self, where: str, value: Any, default: float, *, minimum: float = 0) -> float:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            self.refuse(f"{where} must be a number of at least {minimum:g}")
            return default
        return float(value)

    def run(self, raw: Mapping[str, Any], origin: Origin) -> Settings:
        for key in sorted(set(raw) - {"server", "kubernetes"}):
            self.refuse(f"`{key}` is not a setting; every setting lives under [server]")
        server = self.table("server", raw.get("server", {}))
        self.unknown("server", server, _SERVER_KEYS)
        host, port = self.bind(server.get("bind", "127.0.0.1:8888"))
        insecure = server.get("insecure", False) is True
        allow_anonymous = server.get("allow_anonymous", False) is True
        tls = self.tls(server.get("tls")) if "tls" in server else None
        loopback = host is None or ipaddress.ip_address(host).is_loopback
        if not loopback and tls is None and not insecure:
            self.refuse(
                f"server.bind {host} is not loopback and there is no [server.tls]; add TLS, "
                "or set insecure = true when a TLS terminator sits in front"
            )
        if insecure and tls is not None:
            self.refuse("server.insecure contradicts [server.tls]; remove one of them")
        sections = self.sections(server.get("sections"))
        clients = self.clients(server.get("clients"), allow_anonymous, sections)
        kubernetes = self.kubernetes_table(raw, server)
        metrics_token = self.metrics_token(server.get("metrics_token"), clients)
        max_streams = int(self.number(
            "server.max_stream_connections", server.get("max_stream_connections"), 4096, minimum=1
        ))  # fmt: skip
        per_client = int(self.number(
            "server.max_streams_per_client", server.get("max_streams_per_client"),
            max(1, max_streams // 4), minimum=1,
        ))  # fmt: skip
        if per_client > max_streams:
            self.refuse(
                f"server.max_streams_per_client {per_client} is above "
                f"server.max_stream_connections {max_streams}; lower it (a quarter is the default)"
            )
        if not clients and kubernetes is None:
            self.refuse(
                "nobody may read: add [[server.clients]] with tokens, or [server.kubernetes] "
                "(or [kubernetes]) grants"
            )
        settings = Settings(
            bind_host=host or "127.0.0.1",
            bind_port=port or 8888,
            sections=tuple(sections),
            clients=tuple(clients),
            insecure=insecure,
            allow_anonymous=allow_anonymous,
            max_stream_connections=max_streams,
            max_streams_per_client=per_client,
            metrics_token=metrics_token,
            store_interval=self.number(
                "server.store_interval", server.get("store_interval"), 30.0, minimum=0.1
            ),
            file_poll_seconds=self.number(
                "server.file_poll_seconds", server.get("file_poll_seconds"), 1.0, minimum=0.05
            ),
            keepalive_seconds=self.number(
                "server.keepalive_seconds", server.get("keepalive_seconds"), 15.0, minimum=0.05
            ),
            tls=tls,
            kubernetes=kubernetes,
        )  # fmt: skip
        if self.refusals:
            raise SettingsError(self.refusals, origin)
        return settings

    def bind(self, value: Any) -> tuple[str | None, int | None]:
        text = value if isinstance(value, str) else ""
        host, _, port = text.rpartition(":")
        host = host.strip("[]")
        try:
            ipaddress.ip_address(host)
            number = int(port)
            if not 0 <= number <= 65535:
                raise ValueError(port)
        except ValueError:
            self.refuse(
                f"server.bind must be a literal address:port such as 127.0.0.1:8888 or "
                f"[::1]:8888 (got {text!r})"
            )
            return None, None
        return host, number

    def tls(self, value: Any) -> TlsServerSettings | None:
        table = self.table("server.tls", value)
        self.unknown("server.tls", table, _TLS_KEYS)
        certificate = self.path("server.tls.certificate", table.get("certificate"))
        key = self.path("server.tls.key", table.get("key"))
        client_ca = (
            self.path("server.tls.client_ca", table["client_ca"]) if "client_ca" in table else None
        )
        if key is not None and key.is_file() and key.stat().st_mode & 0o077:
            self.refuse(f"server.tls.key {key} is readable by group or others; chmod 600 it")
        if certificate is None or key is None:
            return None
        return TlsServerSettings(certificate, key, client_ca)

    def sections(self, value: Any) -> list[SectionSettings]:
        found: list[SectionSettings] = []
        seen: set[tuple[str, str]] = set()
        items = self.tables("server.sections", value)
        if not items:
            self.refuse("there are no [[server.sections]]; add one per <application>/<profile>")
        for index, table in enumerate(items):
            where = f"server.sections[{index}]"
            self.unknown(where, table, _SECTION_KEYS)
            application, profile = table.get("application"), table.get("profile")
            if not isinstance(application, str) or not is_name(application):
                self.refuse(f"{where}.application must be a name (letters, digits, `.`, `_`, `-`)")
                continue
            if not isinstance(profile, str) or not is_name(profile):
                self.refuse(f"{where}.profile must be a name (letters, digits, `.`, `_`, `-`)")
                continue
            if (application, profile) in seen:
                self.refuse(f"{where} repeats {application}/{profile}; merge the two sections")
            seen.add((application, profile))
            files_value = table.get("files", [])
            if not isinstance(files_value, list):
                self.refuse(f"{where}.files must be a list of file paths")
                files_value = []
            files = [self.path(f"{where}.files[{i}]", f) for i, f in enumerate(files_value)]
            env_prefix = table.get("env_prefix")
            if env_prefix is not None and (not isinstance(env_prefix, str) or not env_prefix):
                self.refuse(f"{where}.env_prefix must be a non-empty string such as APP_")
                env_prefix = None
            stores = [
                self.store(f"{where}.stores[{i}]", s)
                for i, s in enumerate(self.tables(f"{where}.stores", table.get("stores")))
            ]
            if not files and not stores and env_prefix is None:
                self.refuse(f"{where} reads nothing; give it files, stores or an env_prefix")
            found.append(SectionSettings(
                application=application,
                profile=profile,
                files=tuple(p for p in files if p is not None),
                env_prefix=env_prefix,
                whole_document=table.get("whole_document", False) is True,
                stores=tuple(s for s in stores if s is not None),
            ))  # fmt: skip
        return found

    def store(self, where: str, table: Mapping[str, Any]) -> StoreSettings | None:
        from dynconf.errors import MissingError
        from dynconf.plugins import default_registry
        from dynconf.stores import setting_inputs

        source = table.get("source")
        store_type = None
        if isinstance(source, str):
            try:
                store_type = default_registry().store(source)
            except MissingError as exc:
                self.refuse(f"{where}: {exc.message}")
        own = tuple(d.name for d in setting_inputs(store_type)) if store_type else ()
        self.unknown(where, table, _STORE_KEYS | set(own))
        if not isinstance(source, str):
            self.refuse(f"{where}.source must name an installed store (consul, vault, …)")
            return None
        if store_type is None:
            return None
        strings = {k: table[k] for k in (*_STRING_FIELDS, *own) if k in table}
        for key, value in strings.items():
            if not isinstance(value, str):
                self.refuse(f"{where}.{key} must be a string")
        settings = table.get("settings", {})
        if not isinstance(settings, Mapping) or not all(
            isinstance(v, str) for v in settings.values()
        ):
            self.refuse(f"{where}.settings must be a table of strings")
            settings = {}
        token_file = (
            self.path(f"{where}.token_file", table["token_file"]) if "token_file" in table else None
        )
        password_file = (
            self.path(f"{where}.password_file", table["password_file"])
            if "password_file" in table else None
        )  # fmt: skip
        token = self.environ.get(table["token_env"]) if "token_env" in table else None
        if "token_env" in table and token is None:
            self.refuse(f"{where}.token_env names {table['token_env']}, which is not set")
        password = self.environ.get(table["password_env"]) if "password_env" in table else None
        if "password_env" in table and password is None:
            self.refuse(f"{where}.password_env names {table['password_env']}, which is not set")
        ca_path = self.path(f"{where}.ca", table["ca"]) if "ca" in table else None
        cert = self.path(f"{where}.tls_cert", table["tls_cert"]) if "tls_cert" in table else None
        key_path = self.path(f"{where}.tls_key", table["tls_key"]) if "tls_key" in table else None
        timeout = table.get("timeout")
        spec = StoreSpec.from_inputs(
            source=source,
            endpoint=str(strings.get("endpoint", "")),
            key=str(strings.get("key", "")),
            **{k: str(v) for k, v in strings.items() if k not in ("endpoint", "key")},
            timeout=float(timeout) if isinstance(timeout, int | float) else None,
            tls=TlsSettings(
                ca_file=str(ca_path) if ca_path else None,
                cert_file=str(cert) if cert else None,
                key_file=str(key_path) if key_path else None,
                server_name=table.get("tls_server_name"),
            ),
            token=token or (_PLACEHOLDER if token_file else None),
            password=password or (_PLACEHOLDER if password_file else None),
            extra=dict(settings),
        )
        for refusal in store_type.refusals(spec):
            self.refuse(f"{where}: {refusal.render(lambda name: _store_key(where, name))}")
        return StoreSettings(
            spec=spec if not (token_file or password_file) else _without_placeholders(spec),
            token_file=token_file,
            password_file=password_file,
        )

    def clients(
        self, value: Any, allow_anonymous: bool, sections: list[SectionSettings]
    ) -> list[ClientSettings]:
        served = {s.application for s in sections}
        found: list[ClientSettings] = []
        names: set[str] = set()
        tokens: set[str] = set()
        for index, table in enumerate(self.tables("server.clients", value)):
            where = f"server.clients[{index}]"
            self.unknown(where, table, _CLIENT_KEYS)
            name = table.get("name")
            if not isinstance(name, str) or not name:
                self.refuse(f"{where}.name must name the client (it appears in the audit log)")
                continue
            where = f"server.clients `{name}`"
            if name in names:
                self.refuse(f"{where} is named twice; client names are unique")
            names.add(name)
            token = table.get("token")
            if token is None:
                if not allow_anonymous:
                    self.refuse(
                        f"{where} has no token; give it one of at least {MIN_TOKEN_BYTES} "
                        "bytes, or set server.allow_anonymous = true for an anonymous client"
                    )
            elif not isinstance(token, str) or len(token.encode()) < MIN_TOKEN_BYTES:
                self.refuse(
                    f"{where} has a token shorter than {MIN_TOKEN_BYTES} bytes; generate one "
                    "with `openssl rand -hex 32`"
                )
            elif token in tokens:
                self.refuse(f"{where} reuses another client's token; give each client its own")
            else:
                tokens.add(token)
            applications = self.names(f"{where}.applications", table.get("applications"))
            for application in sorted(applications - served):
                self.refuse(f"{where} may read {application}, but no section serves it")
            found.append(ClientSettings(name, token if isinstance(token, str) else None,
                                        applications))  # fmt: skip
        if sum(1 for c in found if c.token is None) > 1:
            self.refuse("more than one client has no token; keep one anonymous client")
        return found

    def metrics_token(self, value: Any, clients: list[ClientSettings]) -> str | None:
        """The ``/metrics`` bearer: long, and no client's token (a tenant must not scrape)."""
        if value is None:
            return None
        if not isinstance(value, str) or len(value.encode()) < MIN_TOKEN_BYTES:
            self.refuse(
                f"server.metrics_token is shorter than {MIN_TOKEN_BYTES} bytes; generate one "
                "with `openssl rand -hex 32`"
            )
            return None
        if any(c.token == value for c in clients):
            self.refuse(
                "server.metrics_token is also a client's token; give the scraper its own, so "
                "no tenant can read every tenant's counters"
            )
            return None
        return value

    def kubernetes_table(
        self, raw: Mapping[str, Any], server: Mapping[str, Any]
    ) -> KubernetesSettings | None:
        """The grants from ``[server.kubernetes]`` or the top-level ``[kubernetes]``, not both."""
        if "kubernetes" in raw and "kubernetes" in server:
            self.refuse(
                "the Kubernetes grants are set twice, as [kubernetes] and as "
                "[server.kubernetes]; they are one table under two names, so keep one"
            )
            return None
        if "kubernetes" in raw:
            return self.kubernetes(raw["kubernetes"], "kubernetes")
        if "kubernetes" in server:
            return self.kubernetes(server["kubernetes"], "server.kubernetes")
        return None

    def kubernetes(self, value: Any, name: str) -> KubernetesSettings | None:
        """One grants table; ``name`` is the spelling the file used (refusals quote it)."""
        table = self.table(name, value)
        self.unknown(name, table, _KUBE_KEYS)
        api_server = table.get("api_server")
        if api_server is None:
            host = self.environ.get("KUBERNETES_SERVICE_HOST")
            port = self.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                self.refuse(
                    f"{name} needs api_server outside a cluster "
                    "(KUBERNETES_SERVICE_HOST is not set)"
                )
            api_server = f"https://{host}:{port}" if host else ""
        elif not isinstance(api_server, str) or not api_server.startswith("https://"):
            self.refuse(f"{name}.api_server must be an https:// URL")
        ca = self.path(f"{name}.ca", table.get("ca", IN_CLUSTER_CA))
        token_path = self.path(f"{name}.token_path", table.get("token_path", IN_CLUSTER_TOKEN))
        audience = table.get("audience")
        if audience is not None and (not isinstance(audience, str) or not audience):
            self.refuse(f"{name}.audience must be a non-empty string")
        grants: dict[str, frozenset[str]] = {}
        items = self.tables(f"{name}.grants", table.get("grants"))
        if not items:
            self.refuse(f"[{name}] has no grants; add [[{name}.grants]]")
        for index, grant in enumerate(items):
            where = f"{name}.grants[{index}]"
            self.unknown(where, grant, _GRANT_KEYS)
            account = grant.get("service_account")
            namespace, colon, name = str(account).partition(":")
            if not isinstance(account, str) or not colon or not namespace or not name:
                self.refuse(f"{where}.service_account must be namespace:serviceaccount")
                continue
            applications = self.names(f"{where}.applications", grant.get("applications"))
            grants[account] = grants.get(account, frozenset()) | applications
        if ca is None or token_path is None:
            return None
        return KubernetesSettings(
            api_server=str(api_server).rstrip("/"),
            ca=ca,
            token_path=token_path,
            audience=audience if isinstance(audience, str) else None,
            grants=grants,
        )


def _without_placeholders(spec: StoreSpec) -> StoreSpec:
    """Drop the stand-ins used only so ``validate`` sees that a file supplies the secret."""
    from dataclasses import replace

    return replace(
        spec,
        token=None if spec.token == _PLACEHOLDER else spec.token,
        password=None if spec.password == _PLACEHOLDER else spec.password,
    )
