"""The Redis URL and the spec rules that need no client library.

Redis is the store whose credentials travel in the URL (``requirepass`` and ACL users have
no other place), so the URL is parsed here, once, and every message shows it redacted: a
lone name in the userinfo is the ACL *username* (stores contract §1.4), a password is never
shown, even when the URL does not parse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit

from dynconf.stores import StoreSpec, format_from_key, redact_url

__all__ = ["DEFAULT_PORT", "RedisAddress", "parse_url", "shown_url", "spec_refusals"]

DEFAULT_PORT: Final = 6379


def shown_url(url: str) -> str:
    """The URL as it may appear in a message or a log: the password hidden."""
    return redact_url(url, lone_is_username=True)


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """Where and as whom to connect; ``repr`` never shows the password."""

    tls: bool
    host: str
    port: int
    db: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def parse_url(url: str) -> tuple[RedisAddress | None, list[str]]:
    """The address in ``redis://[user[:password]@]host[:port][/db]`` or the refusals."""
    shown = shown_url(url)
    if not url:
        return None, [
            "redis needs --endpoint (or endpoint-secret): a URL such as "
            "redis://redis.infra.svc:6379/0"
        ]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, [
            f"redis endpoint {shown} is not a URL; write redis://[user:password@]host:port/db "
            "and percent-encode special characters in the password"
        ]
    problems: list[str] = []
    if parts.scheme not in ("redis", "rediss"):
        problems.append(
            f"redis endpoint {shown} must start with redis:// (plain) or rediss:// (TLS)"
        )
    if not parts.hostname:
        problems.append(f"redis endpoint {shown} has no host; write redis://host:port/db")
    db, db_problems = _database(parts.path, parts.query, shown)
    problems.extend(db_problems)
    if parts.fragment:
        problems.append(
            f"redis endpoint {shown} has a #fragment; percent-encode '#' in the password as %23"
        )
    if problems or parts.hostname is None:
        return None, problems
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return (
        RedisAddress(
            tls=parts.scheme == "rediss",
            host=parts.hostname,
            port=port or DEFAULT_PORT,
            db=db,
            username=username,
            password=password,
        ),
        [],
    )


def _database(path: str, query: str, shown: str) -> tuple[int, list[str]]:
    """The database index from ``/N`` or ``?db=N`` (default 0)."""
    problems: list[str] = []
    texts: list[str] = []
    if path not in ("", "/"):
        texts.append(path.strip("/"))
    if query:
        options = parse_qs(query, keep_blank_values=True)
        unknown = sorted(set(options) - {"db"})
        if unknown:
            problems.append(
                f"redis endpoint {shown} has query options {', '.join(unknown)}; only db= is "
                "understood, remove the others"
            )
        texts.extend(options.get("db", []))
    if len(set(texts)) > 1:
        problems.append(f"redis endpoint {shown} names two database indexes; keep one")
    text = texts[0] if texts else "0"
    if not text.isdigit():
        problems.append(
            f"redis endpoint {shown} has database index {text!r}; it must be a number such as /0"
        )
        return 0, problems
    return int(text), problems


def spec_refusals(spec: StoreSpec) -> list[str]:
    """Every redis-specific refusal for ``spec`` (the shared ones live in the base)."""
    refusals: list[str] = []
    if not spec.key:
        refusals.append("redis needs --key: the key that holds the document")
    elif "," in spec.key:
        refusals.append(
            "redis reads one key per source; merge several documents with a template or the "
            "config server"
        )
    elif format_from_key(spec.key) is None and "format" not in spec.extra:
        refusals.append(
            f"the redis key {spec.key} has no extension naming its format; name the key "
            "with .json, .toml, .yaml, .ini, .properties or .env"
        )
    address, problems = parse_url(spec.endpoint)
    refusals.extend(problems)
    if address is not None and not address.tls and spec.tls.configured:
        refusals.append(
            "TLS settings (--ca, --tls-*) on a redis:// URL would leave the connection "
            "unencrypted; use rediss:// or remove them"
        )
    if spec.tls.server_name:
        refusals.append(
            "--tls-server-name cannot be honoured by the redis client (it verifies the URL's "
            "host); connect with the host name the certificate names"
        )
    if spec.tls.skip_verify:
        refusals.append(
            "--tls-skip-verify is refused for redis: verification cannot be turned off; give "
            "the private CA with --ca"
        )
    for value, flag in (
        (spec.token, "token"),
        (spec.password, "password slot"),
        (spec.auth_username, "--auth-username"),
        (spec.auth_role, "--auth-role"),
        (spec.auth_mount, "--auth-mount"),
        (spec.auth_token_path, "--auth-token-path"),
    ):
        if value:
            refusals.append(
                f"redis takes no {flag}; its credentials ride in the URL "
                "(redis://user:password@host:port/db), delivered through endpoint-secret"
            )
    return refusals
