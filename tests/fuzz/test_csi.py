"""CSI volume attributes: the node agent refuses by type, briefly, and never echoes a value.

Issue 14 item 14: a refusal echoed a whole 100 KB attribute into the gRPC status, and the
client then failed with RESOURCE_EXHAUSTED. The promises checked here, for any attribute map
and Secret map a publish request can carry (protobuf ``map<string, string>``):

* :func:`dynconf_k8s.node.attributes.parse_volume` answers a volume or raises its typed
  refusal :class:`~dynconf_k8s.node.attributes.VolumeRefused`, nothing else;
* a refusal is at most :data:`~tests.fuzz.support.MESSAGE_LIMIT` characters, does not contain
  a planted long value whole, and never carries a Secret's value;
* an accepted volume's file is inside the volume (``path`` is checked, never trusted).
"""

from __future__ import annotations

import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynconf_k8s.node.attributes import (
    KUBELET_PREFIX,
    NOT_HERE,
    OPTIONAL,
    REQUIRED,
    VolumeRefused,
    parse_volume,
)
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.support import MESSAGE_LIMIT, SECRETS, Violation, leaked, redact, require

pytestmark = pytest.mark.fuzz

LONG_MARK = "LongAttributeValue-"
LONG_VALUES = st.sampled_from([2_000, 20_000, 100_000]).map(
    lambda n: (LONG_MARK * (n // len(LONG_MARK) + 1))[:n]
)
PLAUSIBLE: dict[str, list[str]] = {
    "source": ["consul", "vault", "redis", "etcd", "git", "s3", "nats", "file", "zookeeper"],
    "key": ["myapp/config.json", "a.yaml"],
    "path": [
        "app.json",
        "conf/app.toml",
        "a.yaml",
        "../x.json",
        "/etc/x.json",
        "a/../../b.json",
        "",
        " ",
        ".",
        "conf/",
        "\x00.json",
        "a\\..\\b.json",
        "x.txt",
    ],
    "endpoint": ["http://consul:8500", "https://vault:8200", "redis://r:6379", "bucket"],
    "watch-seconds": ["15", "0", "-1", "1.5", "٣", "99999999999999999999"],
    "file-mode": ["0640", "0440", "888", "7777", "044"],
    "auth": ["token", "kubernetes", "approle"],
    "ref": ["main", "tag:v1"],
}
HOSTILE = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\n",
            "\r\n",
            "\x00",
            ",",
            "=",
            "a,mode=0666",
            "--token",
            "٣",
            "日本語",
            "😀",
            "\\",
            "..",
            "/",
            "%2e%2e",
        ]
    ),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    LONG_VALUES,
)
NAMES = st.one_of(
    st.sampled_from([*REQUIRED, *OPTIONAL]),
    st.sampled_from(sorted(NOT_HERE)),
    st.sampled_from(
        [
            f"{KUBELET_PREFIX}pod.name",
            f"{KUBELET_PREFIX}pod.namespace",
            f"{KUBELET_PREFIX}ephemeral",
            "unknown",
            "Source",
            "x" * 300,
        ]
    ),
    LONG_VALUES,
)


def _value(name: str) -> st.SearchStrategy[str]:
    plausible = PLAUSIBLE.get(name)
    if plausible:
        return st.one_of(st.sampled_from(plausible), st.sampled_from(plausible), HOSTILE)
    return HOSTILE


@st.composite
def volumes(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    """``(attributes, secrets)`` for one publish request, mostly close to a valid volume."""
    attributes: dict[str, str] = {}
    if draw(st.sampled_from([True, True, True, False])):
        attributes = {
            "source": "consul",
            "key": "myapp/config.json",
            "path": "app.json",
            "endpoint": "http://consul:8500",
        }
    for name in draw(st.lists(NAMES, max_size=5)):
        attributes[name] = draw(_value(name))
    secrets = draw(
        st.dictionaries(
            st.sampled_from(["token", "password", "endpoint", "other"]),
            st.sampled_from([*SECRETS, f"https://u:{SECRETS[1]}@vault:8200"]),
            max_size=3,
        )
    )
    return attributes, secrets


@cache
def _target() -> Path:
    """A volume target directory for this process (parse_volume only reads the name)."""
    return Path(tempfile.mkdtemp(prefix=f"dynconf-fuzz-csi-{os.getpid()}-")) / "mount"


def check_volume(case: tuple[dict[str, str], dict[str, str]]) -> None:
    """Every promise for one ``(attributes, secrets)`` pair."""
    attributes, secrets = case
    target = _target()
    try:
        spec: Any = parse_volume(target, attributes, secrets)
    except VolumeRefused as refusal:
        message = str(refusal)
        require(
            len(message) <= MESSAGE_LIMIT,
            "a CSI refusal is longer than 1 KiB",
            f"{len(message)} characters",
        )
        for value in attributes.values():
            if len(value) > 200:
                require(value not in message, "a CSI refusal echoes a long attribute value")
        require(leaked(message) is None, "a CSI refusal carries a Secret's value")
        return
    except Exception as error:
        raise Violation(
            f"parse_volume raised {type(error).__name__}", redact(str(error), 160)
        ) from None
    out = os.path.normpath(spec.out)
    require(
        out.startswith(str(target) + os.sep), "an accepted volume writes outside it", redact(out)
    )


@fuzz_settings(3)
@given(case=volumes())
def test_volume_attributes_parse_or_refuse_briefly_without_echoing_values(
    case: tuple[dict[str, str], dict[str, str]],
) -> None:
    check_volume(case)
