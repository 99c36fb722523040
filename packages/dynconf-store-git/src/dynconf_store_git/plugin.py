"""The ``git`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. Building imports GitPython; discovery does not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from dynconf.errors import BackendError, Origin, Refusal
from dynconf.plugins import hookimpl
from dynconf.store_http import USE_PROXY, HttpPolicy
from dynconf.stores import (
    SETTING,
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
    format_refusals,
)
from dynconf_store_git.endpoint import (
    Endpoint,
    EndpointKind,
    key_refusal,
    parse_endpoint,
    parse_ref,
    shown_endpoint,
)

if TYPE_CHECKING:
    from dynconf_store_git.source import GitSource

__all__ = ["GIT_STORE", "GitStoreType", "dynconf_stores"]

SYSTEM_KNOWN_HOSTS: Final = "/etc/ssh/ssh_known_hosts"
"""The image's own host-key pins (where the book's custom agent image writes its line).
Defined here, not in the transport that reads it, so discovery imports no transport."""

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

AUTH_METHODS: Final[Mapping[str, AuthMethod]] = {
    "anonymous": AuthMethod("anonymous", (), "a public repository; no credential is sent"),
    "token": AuthMethod(
        "token",
        (),
        "HTTP basic auth with the token as the password (username x-access-token unless "
        "--auth-username); the token from the token slot or --auth-token-path",
    ),
    "ssh": AuthMethod("ssh", (), "ssh with whatever the ssh agent (SSH_AUTH_SOCK) offers"),
    "ssh-key": AuthMethod(
        "ssh-key", ("ssh_key",), "ssh with one private key file, offered with IdentitiesOnly=yes"
    ),
}

SETTINGS: Final = ("cache_dir", "cache_max_bytes", "format", "known_hosts", "max_bytes",
                   USE_PROXY)  # fmt: skip
"""The ``extra`` keys a git spec accepts."""
KNOWN_HOSTS_KEY: Final = "known_hosts"
"""The file beside the ssh key (the ssh-secret Secret's key) that pins the host's key."""


def effective_auth(spec: StoreSpec) -> str:
    """``--auth``, else ``ssh-key`` with a key, ``token`` with a token, else ``anonymous``."""
    if spec.auth:
        return spec.auth
    if spec.setting("ssh_key"):
        return "ssh-key"
    if spec.token or spec.auth_token_path:
        return "token"
    return "anonymous"


class GitStoreType(StoreTypeBase):
    """Git: one file of a ref's tree; the ref advertisement as the conditional watch."""

    constructor = "dynconf_store_git.remote:Git"
    """The typed Python constructor (``from dynconf.remote import Git``)."""

    name = "git"
    settings = SETTINGS
    inputs = (
        StoreInput("ref", summary="branch:x, tag:x, commit:sha or a branch"),
        StoreInput("ssh_key", "path", summary="a deploy key file (the path of a mounted Secret)"),
    )
    capability = WatchCapability.CONDITIONAL
    auth_methods = AUTH_METHODS
    default_auth = "anonymous"
    system_known_hosts: str = SYSTEM_KNOWN_HOSTS
    """The image's host-key file (an attribute so a test can point it elsewhere)."""

    def credential_hint(self) -> str:
        return "a token (HTTP basic auth) or an ssh key"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        endpoint = parse_endpoint(spec.endpoint)
        if isinstance(endpoint, Refusal):
            refusals.append(endpoint)
        ref = parse_ref(spec.setting("ref"))
        if isinstance(ref, Refusal):
            refusals.append(ref)
        refusals.extend(self._key_refusals(spec))
        refusals.extend(self._setting_refusals(spec))
        if not isinstance(endpoint, Refusal):
            refusals.extend(self._auth_refusals(spec, endpoint))
            refusals.extend(self._tls_refusals(spec, endpoint))
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(
                Refusal("timeout", "{field} must be a positive number of seconds for git")
            )
        return refusals

    @staticmethod
    def _key_refusals(spec: StoreSpec) -> list[Refusal]:
        refusal = key_refusal(spec.key)
        if refusal:
            return [refusal]
        return format_refusals(
            "git", spec.key, spec.extra.get("format"), noun="file", example="yaml"
        )

    @staticmethod
    def _setting_refusals(spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        for name in ("max_bytes", "cache_max_bytes"):
            value = spec.extra.get(name)
            if value is not None and (not value.isdigit() or int(value) < 1024):
                refusals.append(
                    Refusal(f"{SETTING}{name}", f"{name}={value} must be a whole number of "
                            "bytes, at least 1024", words=True)
                )  # fmt: skip
        for name in ("cache_dir", "known_hosts"):
            value = spec.extra.get(name)
            if value is not None and not value.startswith("/"):
                refusals.append(
                    Refusal(f"{SETTING}{name}", f"{name}={value} must be an absolute path",
                            words=True)
                )  # fmt: skip
        return refusals

    @staticmethod
    def _auth_refusals(spec: StoreSpec, endpoint: Endpoint) -> list[Refusal]:
        refusals: list[Refusal] = []
        method = effective_auth(spec)
        over_ssh = endpoint.kind is EndpointKind.SSH
        for name in ("auth_role", "auth_mount"):
            if getattr(spec, name):
                refusals.append(Refusal(name, "git takes no {field}", "remove it"))
        if method in ("ssh", "ssh-key") and not over_ssh:
            refusals.append(
                Refusal("auth", f"{{field:auth={method}}} needs an ssh endpoint (ssh://… or "
                        f"git@host:org/repo.git); {shown_endpoint(spec.endpoint)} is "
                        f"{endpoint.kind}", words=True)
            )  # fmt: skip
        if method == "token":
            if endpoint.kind not in (EndpointKind.HTTPS, EndpointKind.HTTP):
                refusals.append(
                    Refusal("auth", "{field:auth=token} is HTTP basic auth and needs an "
                            "https:// endpoint", "use {field:auth=ssh-key} for an ssh endpoint",
                            words=True)
                )  # fmt: skip
            elif endpoint.kind is EndpointKind.HTTP and not endpoint.loopback:
                refusals.append(
                    Refusal("auth", "{field:auth=token} over plain http:// would send the token "
                            "in clear text", "use https:// (plain http is accepted for "
                            "loopback hosts only)", words=True)
                )  # fmt: skip
            if not spec.token and not spec.auth_token_path:
                refusals.append(
                    Refusal("token", "git auth token needs {field} or a token file "
                            "({field:auth_token_path})")
                )  # fmt: skip
        elif spec.token or spec.auth_token_path:
            refusals.append(
                Refusal("token", f"{{field:auth={method}}} sends no token, but a token is set",
                        "use {field:auth=token}, or remove the token", words=True)
            )  # fmt: skip
        if spec.auth_username and method != "token":
            refusals.append(
                Refusal("auth_username", "{field} names the basic-auth user of "
                        "{field:auth=token}", "add {field:auth=token} or remove it")
            )  # fmt: skip
        if spec.setting("ssh_key") and method != "ssh-key":
            refusals.append(
                Refusal("ssh_key", f"{{field}} is for {{field:auth=ssh-key}}, not "
                        f"{{field:auth={method}}}", "remove one")
            )  # fmt: skip
        if spec.extra.get("known_hosts") and not over_ssh:
            refusals.append(Refusal(f"{SETTING}known_hosts", "{field} is for ssh endpoints",
                                    "remove it"))  # fmt: skip
        if (
            method in ("anonymous", "ssh")
            and endpoint.kind is EndpointKind.HTTP
            and (not endpoint.loopback)
        ):
            refusals.append(
                Refusal("endpoint", "plain http:// to a non-loopback host can be tampered with "
                        "on the way", "use https:// (plain http is accepted for loopback hosts "
                        "only)", words=True)
            )  # fmt: skip
        return refusals

    @staticmethod
    def _tls_refusals(spec: StoreSpec, endpoint: Endpoint) -> list[Refusal]:
        refusals: list[Refusal] = []
        tls = spec.tls
        if tls.configured and endpoint.kind is not EndpointKind.HTTPS:
            refusals.append(
                Refusal("tls", "TLS settings ({field:tls.ca_file}, "
                        "{field:tls.cert_file+tls.key_file}, {field:tls.skip_verify}) apply to "
                        f"https:// git endpoints only; {shown_endpoint(spec.endpoint)} is "
                        f"{endpoint.kind}", "remove them (ssh trusts through known_hosts)",
                        words=True)
            )  # fmt: skip
        if tls.server_name:
            refusals.append(
                Refusal("tls.server_name", "{field} cannot be honoured by git's HTTP client (it "
                        "has no server-name override)", "reach the host by the name on its "
                        "certificate")
            )  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        ref = parse_ref(spec.setting("ref"))
        shown_ref = spec.setting("ref") if isinstance(ref, Refusal) else str(ref)
        return f"git {shown_endpoint(spec.endpoint)} {shown_ref}:{spec.key}"

    def pinned_hosts(self, spec: StoreSpec) -> str | None:
        """The known_hosts file that pins an ssh server's key (None: the image's file alone).

        In order: the ``known_hosts`` setting; a ``known_hosts`` file beside the ssh key
        (the ssh-secret Secret's ``known_hosts`` key, mounted with the key); else the
        image's :data:`~dynconf_store_git.plugin.SYSTEM_KNOWN_HOSTS` when it has lines.
        With none of them the spec is refused (:class:`BackendError`): ssh would have to
        trust whatever key the first connection shows, and every new pod is a first use.
        """
        describe = self.describe(spec)
        chosen = spec.extra.get("known_hosts")
        if chosen is not None:
            try:
                Path(chosen).read_bytes()
            except OSError as exc:
                raise BackendError(
                    f"{describe}: known_hosts={chosen} cannot be read ({exc.strerror}); mount "
                    "the file or fix the setting",
                    origin=Origin.remote(describe),
                ) from None
            return chosen
        ssh_key = spec.setting("ssh_key")
        if ssh_key:
            beside = Path(ssh_key).parent / KNOWN_HOSTS_KEY
            if beside.is_file():
                return str(beside)
        try:
            if Path(self.system_known_hosts).read_text().strip():
                return None
        except (OSError, UnicodeDecodeError):
            pass
        raise BackendError(
            f"{describe}: git over ssh needs the server's host key pinned, and none is: add a "
            f"`{KNOWN_HOSTS_KEY}` key to the ssh-secret Secret (kubectl create secret generic "
            "<name> --from-file=ssh-privatekey=<key> --from-file=known_hosts=<file>, the "
            "host's line checked against its published fingerprint), or bake "
            f"{self.system_known_hosts} into the agent image, or set the known_hosts setting; "
            "a host key is never trusted on first use",
            origin=Origin.remote(describe),
        )

    def build(self, spec: StoreSpec) -> GitSource:
        """A source for ``spec``; refuses (BackendError) a spec :meth:`validate` refuses,
        and an ssh spec whose host key is not pinned (:meth:`pinned_hosts`).

        The only I/O is looking for that pin: the cache directory is created and the
        repository initialised by the first fetch.
        """
        from dynconf_store_git.cache import (
            DEFAULT_MAX_BYTES,
            DEFAULT_MAX_PACKS,
            CloneDir,
            cache_root,
        )
        from dynconf_store_git.credential import DEFAULT_USERNAME, Credential
        from dynconf_store_git.source import DEFAULT_MAX_FILE_BYTES, GitSource
        from dynconf_store_git.transport import DEFAULT_TIMEOUT, GitRunner

        description = self.admit(spec)
        endpoint = parse_endpoint(spec.endpoint)
        ref = parse_ref(spec.setting("ref"))
        assert not isinstance(endpoint, Refusal)
        assert not isinstance(ref, Refusal)
        known_hosts = None
        if endpoint.kind is EndpointKind.SSH:
            ssh_user_check(description)
            known_hosts = self.pinned_hosts(spec)
        credential = Credential(
            method=effective_auth(spec),
            username=spec.auth_username or DEFAULT_USERNAME,
            token=spec.token,
            token_path=spec.auth_token_path,
            ssh_key=spec.setting("ssh_key"),
        )
        root = cache_root(spec.extra.get("cache_dir"), spec.state_dir)
        clone = CloneDir(root, endpoint.url, credential.identity())
        runner = GitRunner(
            endpoint,
            credential,
            spec.tls,
            clone,
            describe=description,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            known_hosts=known_hosts,
            system_known_hosts=self.system_known_hosts,
            use_proxy=HttpPolicy.from_settings(spec.extra).use_proxy,
        )
        format_name = (spec.extra.get("format") or format_from_key(spec.key) or "").lower()
        return GitSource(
            runner,
            clone,
            ref,
            spec.key,
            format_name,
            max_file_bytes=int(spec.extra.get("max_bytes", DEFAULT_MAX_FILE_BYTES)),
            max_cache_bytes=int(spec.extra.get("cache_max_bytes", DEFAULT_MAX_BYTES)),
            max_packs=DEFAULT_MAX_PACKS,
        )


def ssh_user_check(describe: str, uid: int | None = None) -> None:
    """Refuse (BackendError) to use ssh as a uid the system's user database does not list.

    OpenSSH looks its own user up before anything else and exits with "No user exists for uid
    N"; git then reports only "Could not read from remote repository".  An image's
    ``/etc/passwd`` lists its own user (the agent image's 65532), not whatever
    ``agent-run-as-user`` picked, so this says which uid and what to change.
    """
    import pwd

    uid = os.getuid() if uid is None else uid
    try:
        pwd.getpwuid(uid)
    except KeyError:
        raise BackendError(
            f"{describe}: git over ssh cannot run as uid {uid}: ssh needs the uid listed in "
            "/etc/passwd and the image does not list it; run the agent as the image's user "
            "(the agent image lists 65532, the default: drop agent-run-as-user) or add the "
            "user to the image",
            origin=Origin.remote(describe),
        ) from None


GIT_STORE: Final = GitStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [GIT_STORE]
