"""The git store's grammar: endpoints, refs and keys, each parsed or refused with the fix.

Everything here is pure (no I/O, no client library) so ``validate`` can run in the webhook
at admission as cheaply as in the agent at start.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final
from urllib.parse import urlsplit

from dynconf.errors import Refusal
from dynconf.stores import redact_url

__all__ = [
    "Endpoint",
    "EndpointKind",
    "Ref",
    "RefKind",
    "key_refusal",
    "parse_endpoint",
    "parse_ref",
    "shown_endpoint",
]


class EndpointKind(StrEnum):
    """How git reaches the repository; decides which auth methods and TLS settings apply."""

    HTTPS = "https"
    HTTP = "http"
    SSH = "ssh"
    GIT = "git"
    LOCAL = "local"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A repository address git understands, without credentials in it."""

    kind: EndpointKind
    url: str
    """What is handed to git (the endpoint as written; a local path stays a path)."""
    host: str | None

    @property
    def loopback(self) -> bool:
        """True for 127.0.0.0/8, ::1 and localhost: plain http may carry a token there."""
        if self.host is None:
            return False
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


_SCP_LIKE: Final = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>.+)$"
)


def shown_endpoint(text: str) -> str:
    """The endpoint as it may appear in a message: userinfo hidden (a lone name too)."""
    return redact_url(text)


def parse_endpoint(text: str) -> Endpoint | Refusal:
    """The endpoint, or the refusal naming the fix (the URL redacted in it).

    Accepted: ``https://host/org/repo.git``, ``http://…`` (meant for loopback tests and
    in-cluster mirrors), ``ssh://[user@]host[:port]/path``, scp-like ``git@host:org/repo.git``,
    ``git://host/repo`` (the git daemon, anonymous only), and an absolute local path or
    ``file://`` URL. Credentials inside an http(s) URL are refused: they would land in the
    process list and in every error git prints; the token slot carries them instead.
    """
    shown = shown_endpoint(text)
    if not text:
        return Refusal("endpoint", "git needs {field} (or DYNAMIC_CONFIG_AGENT_ENDPOINT)",
                       "the repository, e.g. https://github.com/acme/config.git or "
                       "git@github.com:acme/config.git")  # fmt: skip
    if any(ch.isspace() for ch in text) or text.startswith("-"):
        return _about(
            f"the git endpoint {shown} has whitespace or starts with `-`",
            "write a URL, git@host:org/repo.git, or an absolute path",
        )
    scheme, sep, rest = text.partition("://")
    if not sep:
        if text.startswith("/"):
            return Endpoint(EndpointKind.LOCAL, text, None)
        match = _SCP_LIKE.match(text)
        if match is None or "/" in match.group("host"):
            return _about(f"the git endpoint {shown} is neither a URL nor "
                          "git@host:org/repo.git nor an absolute path", "a relative path is "
                          "refused because the agent's working directory is not yours to "
                          "rely on")  # fmt: skip
        return Endpoint(EndpointKind.SSH, text, match.group("host"))
    scheme = scheme.lower()
    if scheme == "file":
        if not rest.startswith("/"):
            return _about(f"the git endpoint {shown} must be file:///absolute/path")
        return Endpoint(EndpointKind.LOCAL, text, None)
    kinds = {"https": EndpointKind.HTTPS, "http": EndpointKind.HTTP, "ssh": EndpointKind.SSH,
             "git": EndpointKind.GIT}  # fmt: skip
    kind = kinds.get(scheme)
    if kind is None:
        return _about(
            f"the git endpoint {shown} has the scheme {scheme}://",
            "use https://, http://, ssh://, git://, git@host:org/repo.git or an absolute path",
        )
    authority = rest.split("/", 1)[0]
    userinfo = authority.rpartition("@")[0] if "@" in authority else ""
    if userinfo and (kind is not EndpointKind.SSH or ":" in userinfo):
        return _about(f"the git endpoint {shown} carries credentials", "remove them from the "
                      "URL and pass the token as {field:token} ({field:auth=token}, "
                      "{field:auth_username} for a host that reads the name)")  # fmt: skip
    try:
        parts = urlsplit(text)
        _port = parts.port
    except ValueError:
        return _about(
            f"the git endpoint {shown} does not parse as a URL", "write scheme://host[:port]/path"
        )
    if not parts.hostname:
        return _about(f"the git endpoint {shown} names no host")
    if parts.path in ("", "/"):
        return _about(f"the git endpoint {shown} names no repository path", "e.g. /acme/config.git")
    if parts.query or parts.fragment:
        return _about(f"the git endpoint {shown} has a query or fragment", "remove it")
    return Endpoint(kind, text, parts.hostname)


def _about(problem: str, fix: str = "") -> Refusal:
    """A refusal of the endpoint, which names itself in words (``the git endpoint <url>``)."""
    return Refusal("endpoint", problem, fix, words=True)


def _about_key(problem: str, fix: str) -> Refusal:
    """A refusal of the key, which names itself in words (``the git key <path>``)."""
    return Refusal("key", problem, fix, words=True)


class RefKind(StrEnum):
    BRANCH = "branch"
    TAG = "tag"
    COMMIT = "commit"


@dataclass(frozen=True, slots=True)
class Ref:
    """What to read: a branch or tag (followed) or one commit (fixed forever)."""

    kind: RefKind
    name: str

    @property
    def remote_name(self) -> str:
        """The full ref name to ask ``ls-remote`` about (empty for a commit)."""
        if self.kind is RefKind.BRANCH:
            return f"refs/heads/{self.name}"
        if self.kind is RefKind.TAG:
            return f"refs/tags/{self.name}"
        return ""

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


DEFAULT_BRANCH: Final = "main"
_HEX: Final = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_BAD_REF: Final = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^/|/$|\.lock$|^\.|/\.|\.$|^-")


def parse_ref(text: str | None) -> Ref | Refusal:
    """``main`` | ``branch:x`` | ``tag:x`` | ``commit:<40 or 64 hex>``; default branch main."""
    if text is None or text == "":
        return Ref(RefKind.BRANCH, DEFAULT_BRANCH)
    prefix, colon, name = text.partition(":")
    if colon and prefix in ("branch", "tag", "commit"):
        kind = RefKind(prefix)
    elif colon:
        return Refusal(
            "ref",
            f"{{field}} {text} has an unknown prefix {prefix}:",
            "write a branch (main or branch:main), tag:v1.4, or commit:<40-hex sha>",
        )
    else:
        kind, name = RefKind.BRANCH, text
    if kind is RefKind.COMMIT:
        if not _HEX.match(name):
            return Refusal("ref", f"{{field}} {text} needs the full commit id (40 or 64 "
                           "lowercase hex)", "an abbreviated id could name another commit "
                           "tomorrow")  # fmt: skip
        return Ref(kind, name)
    if not name or _BAD_REF.search(name) or name.startswith("refs/"):
        return Refusal("ref", f"{{field}} {text} is not a valid {kind} name", "write the short "
                       "name (main, v1.4) without refs/, spaces or ~^:?*[\\")  # fmt: skip
    return Ref(kind, name)


def key_refusal(key: str) -> Refusal | None:
    """Why a tree path cannot be a key (absolute, ``..``/``.``, empty parts), or None."""
    if not key:
        return Refusal(
            "key",
            "git needs {field}",
            "the file's path inside the repository, e.g. billing/prod.yaml",
        )
    if key.startswith("/"):
        return _about_key(
            f"the git key {key} is absolute",
            "write the path inside the repository without the leading /",
        )
    if "\x00" in key or "\\" in key:
        return _about_key(
            f"the git key {key!r} holds a NUL or backslash", "write a /-separated tree path"
        )
    if key.endswith("/"):
        return _about_key(
            f"the git key {key} is a folder", "name the one file that holds the document"
        )
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return _about_key(
            f"the git key {key} has an empty, `.` or `..` part",
            "write the plain path inside the repository (the store never reads outside the tree)",
        )
    if parts[0] == ".git":
        return _about_key(f"the git key {key} points into .git", "name a file of the tree")
    return None
