"""Running the git binary: isolated environment, no credential on the command line, typed verdicts.

Every call runs ``git`` with:

- no system or global configuration (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``)
  and none of the caller's ``GIT_*`` variables, so a developer's ``~/.gitconfig`` credential
  helper or an inherited ``GIT_DIR`` cannot change what the agent does;
- its settings passed as environment configuration (``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n``),
  which git reads like ``-c`` but which never appears in the process list nor in the
  clone's ``config`` file. The token travels this way, as an ``http.extraHeader``
  ``Authorization: Basic …`` value (one round trip, no challenge);
- a credential helper that never answers: git asks a helper only when the server answered
  **401**, so the helper writes ``refused`` into the verdict file and tells git to quit.
  That file, not git's message text, is how a refused credential becomes ``AuthError``;
- for ssh, a ``GIT_SSH_COMMAND`` with ``BatchMode=yes``, ``StrictHostKeyChecking=yes``
  against the pinned host keys only (never trust on first use), and two hooks
  that write the verdict: ``KnownHostsCommand`` runs once the server is reached (key
  exchange), ``LocalCommand`` once the session is authenticated. Reached but not
  authenticated is ``AuthError`` (the key was refused, or the host key did not match its
  pin); not reached is ``RemoteError``;
- no redirects (``http.followRedirects=false``): a token is never carried to another host;
- while a token rides along, no proxy: the proxy variables are dropped from the child's
  environment and ``http.proxy`` is set empty (git's "no proxy"), so neither an inherited
  ``http_proxy`` nor a pod's environment can route the ``Authorization`` header through a
  third party; the ``use_proxy=true`` setting opts back in, for that store only;
- a deadline: the whole process group is killed when ``timeout`` passes.

Git's stderr is never quoted whole: only its last ``fatal:``/``error:`` line, with URL
userinfo hidden, is added to a ``RemoteError`` to say what failed.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dynconf.errors import AuthError, Origin, RemoteError
from dynconf.store_http import PROXY_VARIABLES, note_ignored_proxy
from dynconf.stores import TlsSettings, redact_url
from dynconf_store_git.cache import CloneDir
from dynconf_store_git.credential import Credential
from dynconf_store_git.endpoint import Endpoint, EndpointKind
from dynconf_store_git.plugin import SYSTEM_KNOWN_HOSTS

__all__ = ["DEFAULT_TIMEOUT", "SYSTEM_KNOWN_HOSTS", "GitRunner", "Outcome"]

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds one git call (ls-remote, fetch) may take before its process group is killed."""

_HELPER: Final = (
    '!f() { cat >/dev/null; if [ "$1" = get ]; then '
    'echo refused >>"$DYNCONF_GIT_VERDICT"; echo quit=1; fi; }; f'
)
_PROXY_VARIABLES: Final = frozenset(name.lower() for name in PROXY_VARIABLES)
"""The proxy variables of the store HTTP policy, compared lower-cased (curl reads both cases)."""
_URLISH: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")

log = logging.getLogger("dynconf.store.git")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished git call: exit status, stdout, and a safe one-line reason on failure."""

    status: int
    stdout: str
    reason: str


class GitRunner:
    """Runs git for one source; the secret is read (and re-read) by the caller per call."""

    def __init__(
        self,
        endpoint: Endpoint,
        credential: Credential,
        tls: TlsSettings,
        clone: CloneDir,
        *,
        describe: str,
        timeout: float = DEFAULT_TIMEOUT,
        known_hosts: str | None = None,
        system_known_hosts: str = SYSTEM_KNOWN_HOSTS,
        use_proxy: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.credential = credential
        self._tls = tls
        self._clone = clone
        self._describe = describe
        self._timeout = timeout
        self._known_hosts = known_hosts
        self._system_known_hosts = system_known_hosts
        self._use_proxy = use_proxy
        found = shutil.which("git")
        self._git = found or "git"
        self._skip_warned = False

    # ------------------------------------------------------------------ environment
    def config(self, secret: str | None) -> list[tuple[str, str]]:
        """The settings git gets through environment configuration, in order."""
        pairs: list[tuple[str, str]] = [
            ("credential.helper", ""),
            ("credential.helper", _HELPER),
            ("http.followRedirects", "false"),
            ("http.lowSpeedLimit", "1"),
            ("http.lowSpeedTime", str(max(1, math.ceil(self._timeout)))),
            ("protocol.version", "2"),
            ("fetch.unpackLimit", "1"),
            ("gc.auto", "0"),
            ("maintenance.auto", "false"),
            ("fetch.writeCommitGraph", "false"),
            ("core.askPass", ""),
        ]
        if secret is not None:
            header = f"Authorization: {self.credential.authorization(secret)}"
            pairs.append(("http.extraHeader", header))
            if not self._use_proxy:
                pairs.append(("http.proxy", ""))  # empty: no proxy at all (git's own rule)
        if self.endpoint.kind is EndpointKind.HTTPS:
            if self._tls.ca_file:
                pairs.append(("http.sslCAInfo", self._tls.ca_file))
            if self._tls.cert_file and self._tls.key_file:
                pairs.append(("http.sslCert", self._tls.cert_file))
                pairs.append(("http.sslKey", self._tls.key_file))
            if self._tls.skip_verify:
                pairs.append(("http.sslVerify", "false"))
        if self.endpoint.kind is EndpointKind.LOCAL:
            path = self.endpoint.url.removeprefix("file://")
            pairs.append(("safe.directory", path))
            pairs.append(("protocol.file.allow", "always"))
        return pairs

    def ssh_command(self) -> str:
        """``GIT_SSH_COMMAND``: batch mode, the known-hosts policy, the verdict hooks, the key."""
        mark = str(self._clone.ssh_mark).replace("%", "%%")
        parts = [
            "ssh",
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={max(1, math.ceil(self._timeout))}",
            "-o", f"UserKnownHostsFile={self._known_hosts or os.devnull}",
            "-o", f"GlobalKnownHostsFile={self._system_known_hosts}",
            "-o", "StrictHostKeyChecking=yes",
            # the hook runs through /bin/sh, not its exec bit: the cache may sit on a volume
            # mounted noexec (the agent's is the pod's shared volume)
            "-o", f'KnownHostsCommand=/bin/sh "{mark}" reached',
            "-o", "PermitLocalCommand=yes",
            "-o", f"LocalCommand=/bin/sh {shlex.quote(mark)} authenticated",
        ]  # fmt: skip
        if self.credential.method == "ssh-key" and self.credential.ssh_key:
            parts += ["-i", self.credential.ssh_key, "-o", "IdentitiesOnly=yes"]
        return " ".join(shlex.quote(part) for part in parts)

    def environment(self, secret: str | None) -> dict[str, str]:
        """The child's environment: ours, minus every ``GIT_*`` variable, and minus the
        proxy variables while a token rides along (unless ``use_proxy`` opted in)."""
        dropped: frozenset[str] = frozenset()
        if secret is not None and not self._use_proxy:
            dropped = _PROXY_VARIABLES
            note_ignored_proxy(self._describe)
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("GIT_")
            and name not in ("SSH_ASKPASS", "SSH_ASKPASS_REQUIRE")
            and name.lower() not in dropped
        }
        pairs = self.config(secret)
        env.update(
            LC_ALL="C",
            LANGUAGE="C",
            GIT_TERMINAL_PROMPT="0",
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_ASKPASS="",
            SSH_ASKPASS="",
            SSH_ASKPASS_REQUIRE="never",
            GIT_CONFIG_COUNT=str(len(pairs)),
            DYNCONF_GIT_VERDICT=str(self._clone.verdict),
        )
        for index, (key, value) in enumerate(pairs):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        if self.credential.uses_ssh or self.endpoint.kind is EndpointKind.SSH:
            env["GIT_SSH_COMMAND"] = self.ssh_command()
            env["GIT_SSH_VARIANT"] = "ssh"
        if self.credential.method == "ssh-key":
            env.pop("SSH_AUTH_SOCK", None)
        return env

    # ------------------------------------------------------------------ running
    def run(self, args: Sequence[str], secret: str | None, *, what: str) -> Outcome:
        """Run ``git <args>``; raises AuthError on a typed refusal, RemoteError on a deadline.

        A non-zero exit that is not a refusal comes back as an :class:`Outcome` so the
        caller can say what it was doing; the verdict file is read here.
        """
        self._clone.clear_verdict()
        command = [self._git, *args]
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environment(secret),
                cwd=self._clone.path,
                start_new_session=True,
            )
        except OSError as exc:
            raise RemoteError(
                f"{self._describe}: the git program cannot be started ({exc.strerror}); "
                "install git in the agent's image",
                origin=Origin.remote(self._describe),
            ) from None
        try:
            out, err = process.communicate(timeout=self._timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            raise RemoteError(
                f"{self._describe}: {what} took longer than {self._timeout:g} s and was "
                "stopped; check the host is reachable, or raise --timeout",
                origin=Origin.remote(self._describe),
            ) from None
        verdict = self._clone.read_verdict()
        if process.returncode != 0:
            self._raise_refusal(verdict, what)
        reason = "" if process.returncode == 0 else _reason(err.decode("utf-8", "replace"))
        return Outcome(process.returncode, out.decode("utf-8", "replace"), reason)

    def _raise_refusal(self, verdict: set[str], what: str) -> None:
        if "refused" in verdict:
            if self.credential.method == "token":
                hint = (
                    "the server refused the token (401); replace it (a refused token is not "
                    "sent again), or set --auth-username for a host that checks the name"
                )
            else:
                hint = (
                    "the server asks for credentials (401); use --auth token with a token "
                    "that can read the repository"
                )
            raise AuthError(
                f"{self._describe}: {what}: {hint}", origin=Origin.remote(self._describe)
            )
        if "reached" in verdict and "authenticated" not in verdict:
            raise AuthError(
                f"{self._describe}: {what}: the ssh server was reached but did not accept the "
                "session: the key was refused (register it as a deploy key, check --ssh-key), "
                "or the server's host key is not the one pinned in known_hosts (or is not "
                "listed there at all)",
                origin=Origin.remote(self._describe),
            )

    def remote_error(self, what: str, outcome: Outcome) -> RemoteError:
        reason = f" ({outcome.reason})" if outcome.reason else ""
        return RemoteError(
            f"{self._describe}: {what} failed{reason}", origin=Origin.remote(self._describe)
        )

    def warn_skip_verify(self) -> None:
        if self._tls.skip_verify and not self._skip_warned:
            self._skip_warned = True
            log.warning(
                "store_tls_skip_verify",
                extra={"store": self._describe},
            )

    @property
    def repo_path(self) -> Path:
        return self._clone.repo


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()


def _reason(stderr: str) -> str:
    """Git's last fatal/error line, URLs redacted and cut short; never the whole stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    chosen = next(
        (line for line in reversed(lines) if line.startswith(("fatal:", "error:"))),
        lines[-1] if lines else "",
    )
    chosen = _URLISH.sub(lambda match: redact_url(match.group(0)), chosen)
    if "authorization" in chosen.lower():
        return "git reported an HTTP failure"
    return chosen[:200]
