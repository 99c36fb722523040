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

from dynconf.errors import Refusal
from dynconf.stores import TLS_INPUTS, StoreSpec, format_from_key, redact_url

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


def parse_url(url: str) -> tuple[RedisAddress | None, list[Refusal]]:
    """The address in ``redis://[user[:password]@]host[:port][/db]`` or the refusals."""
    shown = shown_url(url)
    if not url:
        return None, [
            Refusal("endpoint", "redis needs {field} (or endpoint-secret)",
                    "a URL such as redis://redis.infra.svc:6379/0")
        ]  # fmt: skip
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, [
            _about_url(f"redis endpoint {shown} is not a URL", "write "
                       "redis://[user:password@]host:port/db and percent-encode special "
                       "characters in the password")
        ]  # fmt: skip
    problems: list[Refusal] = []
    if parts.scheme not in ("redis", "rediss"):
        problems.append(
            _about_url(f"redis endpoint {shown} must start with redis:// (plain) or rediss:// "
                       "(TLS)")
        )  # fmt: skip
    if not parts.hostname:
        problems.append(_about_url(f"redis endpoint {shown} has no host",
                                   "write redis://host:port/db"))  # fmt: skip
    db, db_problems = _database(parts.path, parts.query, shown)
    problems.extend(db_problems)
    if parts.fragment:
        problems.append(
            _about_url(f"redis endpoint {shown} has a #fragment",
                       "percent-encode '#' in the password as %23")
        )  # fmt: skip
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


def _about_url(problem: str, fix: str = "") -> Refusal:
    """A refusal of the URL, which names itself in words (``redis endpoint <url>``)."""
    return Refusal("endpoint", problem, fix, words=True)


def _database(path: str, query: str, shown: str) -> tuple[int, list[Refusal]]:
    """The database index from ``/N`` or ``?db=N`` (default 0)."""
    problems: list[Refusal] = []
    texts: list[str] = []
    if path not in ("", "/"):
        texts.append(path.strip("/"))
    if query:
        options = parse_qs(query, keep_blank_values=True)
        unknown = sorted(set(options) - {"db"})
        if unknown:
            problems.append(
                _about_url(f"redis endpoint {shown} has query options {', '.join(unknown)}",
                           "only db= is understood, remove the others")
            )  # fmt: skip
        texts.extend(options.get("db", []))
    if len(set(texts)) > 1:
        problems.append(_about_url(f"redis endpoint {shown} names two database indexes",
                                   "keep one"))  # fmt: skip
    text = texts[0] if texts else "0"
    if not text.isdigit():
        problems.append(
            _about_url(f"redis endpoint {shown} has database index {text!r}",
                       "it must be a number such as /0")
        )  # fmt: skip
        return 0, problems
    return int(text), problems


def spec_refusals(spec: StoreSpec) -> list[Refusal]:
    """Every redis-specific refusal for ``spec`` (the shared ones live in the base)."""
    refusals: list[Refusal] = []
    if not spec.key:
        refusals.append(Refusal("key", "redis needs {field}", "the key that holds the document"))
    elif "," in spec.key:
        refusals.append(
            Refusal("key", "redis reads one key per source", "merge several documents with a "
                    "template or the config server", words=True)
        )  # fmt: skip
    elif format_from_key(spec.key) is None and "format" not in spec.extra:
        refusals.append(
            Refusal("key", f"the redis key {spec.key} has no extension naming its format",
                    "name the key with .json, .toml, .yaml, .ini, .properties or .env",
                    words=True)
        )  # fmt: skip
    address, problems = parse_url(spec.endpoint)
    refusals.extend(problems)
    if address is not None and not address.tls and spec.tls.configured:
        refusals.append(
            Refusal("tls", f"TLS settings ({TLS_INPUTS}) on a redis:// URL would leave the "
                    "connection unencrypted", "use rediss:// or remove them", words=True)
        )  # fmt: skip
    if spec.tls.server_name:
        refusals.append(
            Refusal("tls.server_name", "{field} cannot be honoured by the redis client (it "
                    "verifies the URL's host)", "connect with the host name the certificate "
                    "names")
        )  # fmt: skip
    if spec.tls.skip_verify:
        refusals.append(
            Refusal("tls.skip_verify", "{field} is refused for redis: verification cannot be "
                    "turned off", "give the private CA with {field:tls.ca_file}")
        )  # fmt: skip
    for name, said in (
        ("token", "token"),
        ("password", "password slot"),
        ("auth_username", "{field}"),
        ("auth_role", "{field}"),
        ("auth_mount", "{field}"),
        ("auth_token_path", "{field}"),
    ):
        if getattr(spec, name):
            refusals.append(
                Refusal(name, f"redis takes no {said}", "its credentials ride in the URL "
                        "(redis://user:password@host:port/db), delivered through "
                        "endpoint-secret", words=True)
            )  # fmt: skip
    return refusals
