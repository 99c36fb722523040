"""Value rules shared by annotations and installation settings.

Every rule is a function from the written string to its parsed value that raises
:class:`RuleError` with the part of a sentence that says what the value must be. The caller
prefixes the place the value came from (an annotation key, an environment variable, a
document key), so an annotation and the installation default standing in for it are refused
with the same words. Rules never repeat the value: some of these strings sit next to
credentials.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable
from typing import Final

from dynconf.budget import parse_budget
from dynconf.errors import TypeMismatchError
from dynconf.units import parse_seconds_or_duration
from dynconf_k8s.contract.loaded import admitted_stores

STORES: Final = admitted_stores()
"""The stores a pod, a per-store group or a gate may name: the nine, then a tenth the
process's plugin lock carries (:mod:`.loaded`)."""

__all__ = [
    "parse_store_budget",
    "MODES",
    "STORES",
    "ConfigMapRef",
    "RuleError",
    "SecretRef",
    "nonempty",
    "one_of",
    "parse_agent_env",
    "parse_bool",
    "parse_configmap_ref",
    "parse_duration_seconds",
    "parse_file_mode",
    "parse_file_path",
    "parse_flag_part",
    "parse_history",
    "parse_mode",
    "parse_port",
    "parse_positive_bytes",
    "parse_positive_seconds",
    "parse_quantity",
    "parse_secret_ref",
    "parse_source",
    "parse_uid",
    "parse_volume_medium",
    "parse_whole_seconds",
    "quantity_bytes",
    "verbatim",
]


MODES: Final = ("init", "sidecar", "both")
INT32_MAX: Final = 2**31 - 1
"""The largest uid/gid a pod's securityContext takes."""
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_SUFFIX_BYTES: Final = {
    "": 1,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
}


class RuleError(ValueError):
    """A value broke its rule; ``str()`` is the rule, phrased to follow "<where> ..."."""


def nonempty(text: str) -> str:
    """Any text but the empty one (a store's own words: its plugin judges them)."""
    if not text.strip():
        raise RuleError("is empty; give a value or drop it")
    return text


def verbatim(text: str) -> str:
    """The text as written: a value judged elsewhere (a container lookup, or the agent's own
    parser, which admission runs on every argument it writes)."""
    return text


def one_of(*choices: str) -> Callable[[str], str]:
    """A rule that takes exactly one of ``choices`` (the contract's words, in its order)."""

    def rule(text: str) -> str:
        if text in choices:
            return text
        raise RuleError("takes " + ", ".join(choices[:-1]) + " or " + choices[-1])

    return rule


def parse_bool(text: str) -> bool:
    if text == "true":
        return True
    if text == "false":
        return False
    raise RuleError('takes "true" or "false"')


def parse_mode(text: str) -> str:
    if text in MODES:
        return text
    raise RuleError("takes init, sidecar or both")


def parse_volume_medium(text: str) -> str:
    if text in ("memory", "disk"):
        return text
    raise RuleError("takes memory or disk")


def parse_source(text: str) -> str:
    if text in STORES:
        return text
    raise RuleError(
        "names a store this integration does not know; use one of: " + ", ".join(STORES)
    )


def parse_whole_seconds(text: str) -> int:
    if text.isascii() and text.isdigit():
        return int(text)
    raise RuleError("takes whole seconds, for example 15")


def parse_positive_seconds(text: str) -> int:
    seconds = parse_whole_seconds(text)
    if seconds == 0:
        raise RuleError(
            'is "0", which would mean no deadline at all; give whole seconds above zero, or drop '
            "it to keep the store's own"
        )
    return seconds


def parse_positive_bytes(text: str) -> int:
    """A size in whole bytes above zero (``max-document-bytes``)."""
    if not (text.isascii() and text.isdigit()):
        raise RuleError("takes a whole number of bytes, for example 8388608")
    count = int(text)
    if count == 0:
        raise RuleError('is "0", which no document fits; give a positive number of bytes')
    return count


def parse_store_budget(text: str) -> str:
    """A per-store call budget (``RATE``, ``RATE/BURST`` or ``off``), as the agent's flag
    spells it; the grammar is :func:`dynconf.budget.parse_budget`'s, so both judge alike."""
    try:
        budget = parse_budget(text, "it")
    except ValueError as error:
        raise RuleError(str(error).removeprefix("it ")) from None
    return "off" if budget is None else str(budget)


def parse_duration_seconds(text: str) -> int:
    """Whole seconds or a duration (``90s``, ``15m``, ``6h``, ``1d``), above zero.

    The agent's flag grammar takes whole seconds, so the result is rounded up to them.
    """
    try:
        seconds = parse_seconds_or_duration(text)
    except TypeMismatchError:
        raise RuleError(
            "takes whole seconds (300) or a duration with a unit: s, m, h or d (90s, 15m, 6h)"
        ) from None
    if seconds <= 0:
        raise RuleError("cannot be zero; give a length of time above zero")
    return math.ceil(seconds)


def parse_quantity(text: str) -> str:
    """A Kubernetes quantity as the reference checks it: a leading digit, then alnum or dot."""
    if (
        text
        and text[0].isascii()
        and text[0].isdigit()
        and all(ch.isascii() and (ch.isalnum() or ch == ".") for ch in text)
    ):
        return text
    raise RuleError("is not a Kubernetes quantity; write one such as 10m, 64Mi or 1")


def quantity_bytes(text: str) -> float | None:
    """Bytes in a quantity with a known suffix; ``None`` skips a comparison."""
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", text)
    if match is None or match.group(2) not in _SUFFIX_BYTES:
        return None
    try:
        return float(match.group(1)) * _SUFFIX_BYTES[match.group(2)]
    except ValueError:
        return None


def parse_file_mode(text: str) -> int:
    digits = text[2:] if text.startswith("0o") else text
    if not digits or not all(ch in "01234567" for ch in digits):
        raise RuleError("is not octal; write a mode such as 0640")
    mode = int(digits, 8)
    if mode > 0o777:
        raise RuleError(
            "is past 0777 and at most 0777 is taken: setuid, setgid and sticky bits answer no "
            "question about a configuration file"
        )
    if not mode & 0o400:
        raise RuleError(
            "leaves the owner unable to read the file, and a file its owner cannot read is "
            "write-only noise; give the owner read (0400 and up)"
        )
    return mode


_CONTROL: Final = re.compile("[\x00-\x1f\x7f]")


def _control(text: str) -> bool:
    """Whether ``text`` holds a C0 control character or DEL (one regex scan, not a loop)."""
    return _CONTROL.search(text) is not None


def parse_file_path(text: str) -> str:
    """A rendered file: absolute, normal (no ``..``, ``.``, ``//``), in a directory of its own.

    The directory is the shared volume's mount point, so ``/`` or a file directly in it has
    none to give; a relative path would land wherever the agent's working directory is.
    """
    if _control(text):
        raise RuleError("carries a control character; give a plain file path")
    if not text.startswith("/"):
        raise RuleError("is not an absolute path; start it with /, e.g. /config/app.yaml")
    if "//" in text or posixpath.normpath(text) != text:
        raise RuleError(
            "is not a plain path (no .. or . components, no // and no trailing /); write it "
            "as the file it is, e.g. /config/app.yaml"
        )
    if posixpath.dirname(text) == "/":
        raise RuleError(
            "has no directory of its own, and that directory is where the shared volume is "
            "mounted; put the file in one, e.g. /config/app.yaml"
        )
    return text


def parse_flag_part(text: str) -> str:
    """A value the webhook writes inside a ``key=value,key=value`` flag (``--also``).

    The flag's own separators and control characters are refused rather than escaped: a
    value that carried ``,mode=0666`` would set a part the installation pins.
    """
    if _control(text) or "," in text or "=" in text:
        raise RuleError(
            "carries a comma, an equals sign or a control character, which the agent's --also "
            "flag uses to separate its parts; rename the file or section without them"
        )
    return text


def parse_uid(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise RuleError("takes a numeric id, for example 1000")
    value = int(text)
    if value == 0:
        raise RuleError("is 0 (root), and the agent stays nonroot in every configuration")
    if value > INT32_MAX:
        raise RuleError(f"is past {INT32_MAX}, the largest id the API server takes")
    return value


def parse_port(text: str) -> int:
    if text.isascii() and text.isdigit() and int(text) <= 65535:
        return int(text)
    raise RuleError('is not a port; give 1-65535, or "0" to opt out of the default')


def parse_history(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise RuleError("takes how many replaced generations to keep, 1 to 10")
    count = int(text)
    if count == 0:
        raise RuleError('is "0"; drop it to keep no history, or give 1 to 10')
    if count > 10:
        raise RuleError("keeps at most 10 generations; every one is charged to the volume")
    return count


class SecretRef(tuple[str, str]):
    """``(secret, key)`` of a ``<secret-name>/<key>`` value."""

    __slots__ = ()

    @property
    def secret(self) -> str:
        return self[0]

    @property
    def key(self) -> str:
        return self[1]


def parse_secret_ref(text: str) -> SecretRef:
    name, slash, key = text.partition("/")
    if not slash or not name or not key:
        raise RuleError("names a Secret and a key in it; the form is <secret-name>/<key>")
    return SecretRef((name, key))


class ConfigMapRef(tuple[str, str]):
    """``(name, key)`` of a ``name`` or ``name/key`` value, the key defaulted by the caller."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self[0]

    @property
    def key(self) -> str:
        return self[1]


def parse_configmap_ref(default_key: str) -> Callable[[str], ConfigMapRef]:
    """A rule for ``name`` or ``name/key`` with ``default_key`` when the key is left out."""

    def parse(text: str) -> ConfigMapRef:
        name, slash, key = text.partition("/")
        if not name or (slash and not key):
            raise RuleError(f"takes a name, or name/key (the key defaults to {default_key})")
        return ConfigMapRef((name, key or default_key))

    return parse


def parse_agent_env(text: str) -> list[tuple[str, str]]:
    """``NAME=value, NAME=value``: UPPER_SNAKE names, no comma in values, no name twice."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    entries = [entry.strip() for entry in text.split(",")]
    if not any(entries):
        raise RuleError("names nothing; give NAME=value entries separated by commas, or drop it")
    for entry in entries:
        name, equals, value = entry.partition("=")
        name = name.strip()
        if not equals:
            raise RuleError("takes NAME=value entries separated by commas")
        if not _ENV_NAME.fullmatch(name):
            raise RuleError(
                "names a variable that is not UPPER_SNAKE (A-Z, 0-9 and _, not starting with "
                "a digit)"
            )
        if name in seen:
            raise RuleError(f"sets {name} twice; keep one")
        seen.add(name)
        pairs.append((name, value.strip()))
    return pairs
