"""notify-http URLs: refused, or an ASCII request target with no CR/LF; webhook and agent agree.

Issue 14 item 9: CR/LF in the path was admitted and smuggled into the request line; a
non-ASCII path killed the agent after its first publish; the agent accepted non-ASCII digits
in the port that the webhook refused. The promises checked here, for any string:

* the agent's command line (:func:`dynconf_k8s.agent.flags.parse_args` with
  ``--notify-http``) refuses it with its usage error, or yields a target whose request path
  and ``Host`` are ASCII with no CR, LF or space (a request line cannot be split);
* the webhook admits a pod carrying it as ``notify-http`` exactly when the agent accepts it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynconf_k8s.agent.flags import UsageError, parse_args
from dynconf_k8s.contract import parse_installation
from dynconf_k8s.contract.registry import PREFIX
from dynconf_k8s.webhook.admission import admit
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.support import Violation, redact, require

pytestmark = pytest.mark.fuzz

INSTALLATION = parse_installation({})
HOSTS = st.sampled_from(
    [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "::1",
        "LOCALHOST",
        "127.0.0.2",
        "example.com",
        "u@127.0.0.1",
        "127.0.0.1@evil",
        "127.0.0.1#@evil",
        "[::1",
        "0",
        "",
        "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54",
    ]
)
PORTS = st.one_of(
    st.sampled_from(
        [
            "8080",
            "1",
            "65535",
            "0",
            "65536",
            "٣٣",
            "\uff11\uff12",
            "+80",
            " 80",
            "80 ",
            "",
            "08080",
            "99999999999999999999",
            "8080:9",
            "-1",
        ]
    ),
    st.integers(0, 70000).map(str),
)
PATHS = st.one_of(
    st.sampled_from(
        [
            "",
            "/",
            "/-/reload",
            "/a b",
            "/\r\nX-Injected: 1",
            "/\n",
            "/\r",
            "/é",
            "/日本",
            "/%0d%0a",
            "/?q=1",
            "/#frag",
            "//x",
            "/\x00",
            "/\t",
            "/\x7f",
            "/\u2028",
            "/\ud800",
            "/../x",
        ]
    ),
    st.text(st.characters(), max_size=20).map(lambda t: "/" + t),
)
URLS = st.one_of(
    st.tuples(
        st.sampled_from(["http://", "https://", "HTTP://", "http:/", ""]), HOSTS, PORTS, PATHS
    ).map(lambda p: f"{p[0]}{p[1]}:{p[2]}{p[3]}"),
    st.tuples(HOSTS, PORTS, PATHS).map(lambda p: f"http://{p[0]}:{p[1]}{p[2]}"),
    st.text(st.characters(), max_size=60),
)

ARGV = [
    "--source",
    "consul",
    "--endpoint",
    "http://consul:8500",
    "--key",
    "app/config.json",
    "--out",
    "/config/a.json",
    "--watch",
    "15",
]


def _agent(url: str) -> Any:
    """The agent's target for ``url``, or ``None`` when it refuses."""
    try:
        return parse_args([*ARGV, "--notify-http", url], {}).notify
    except UsageError:
        return None
    except Exception as error:
        raise Violation(
            f"the agent's parser raised {type(error).__name__}", redact(str(error), 160)
        ) from None


def _webhook(url: str) -> bool:
    """Whether the webhook admits a sidecar pod that asks to be notified at ``url``."""
    annotations = {
        f"{PREFIX}inject": "true",
        f"{PREFIX}source": "consul",
        f"{PREFIX}endpoint": "http://consul:8500",
        f"{PREFIX}key": "app/config.json",
        f"{PREFIX}path": "/config/a.json",
        f"{PREFIX}notify-http": url,
    }
    pod = {
        "metadata": {"name": "app", "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }
    try:
        response = admit({"request": {"uid": "u", "object": pod}}, INSTALLATION)["response"]
    except Exception as error:
        raise Violation(f"admit raised {type(error).__name__}", redact(str(error), 160)) from None
    if not response["allowed"]:
        return False
    ops = json.loads(base64.b64decode(response["patch"]))
    args = [
        op["value"]["args"]
        for op in ops
        if isinstance(op.get("value"), dict) and "args" in op["value"]
    ]
    require(any(url in a for a in args), "the webhook admits but does not pass --notify-http")
    return True


def _plain(text: str) -> bool:
    return text.isascii() and not any(c in text for c in "\r\n \t\x00")


def check_target(url: str) -> None:
    """The agent refuses, or its request path and Host cannot split a request line."""
    target = _agent(url)
    if target is None:
        return
    require(
        _plain(target.path),
        "an accepted notify path is not a plain ASCII request target",
        redact(target.path),
    )
    require(
        _plain(target.host_header),
        "an accepted notify Host is not plain ASCII",
        redact(target.host_header),
    )


def check_agreement(url: str) -> None:
    """The webhook admits exactly what the agent accepts."""
    agent = _agent(url) is not None
    webhook = _webhook(url)
    if agent != webhook:
        side = (
            "the webhook admits what the agent refuses"
            if webhook
            else ("the agent accepts what the webhook refuses")
        )
        raise Violation(f"notify-http: {side}", redact(url))


def check_url(url: str) -> None:
    check_target(url)
    check_agreement(url)


@fuzz_settings(3)
@given(url=URLS)
def test_accepted_notify_urls_give_a_plain_ascii_request_target(url: str) -> None:
    check_target(url)


@fuzz_settings(3)
@given(url=URLS)
def test_webhook_and_agent_accept_the_same_notify_urls(url: str) -> None:
    check_agreement(url)
