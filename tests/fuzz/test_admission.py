"""Admission reviews: ``admit`` is total, its patch applies, and the agent accepts what it wrote.

Issue 14 items 3, 7, 9 and 12: ``path: " "`` escaped ``admit`` as an HTTP 500; ill-typed
reviews raised ``AttributeError``; a pod with no containers got a patch that does not apply;
an ``also`` value was spliced into the agent's comma grammar (``mode=0666`` past a pinned
``0440!``); the agent refused what the webhook admitted. The promises checked here, for any
AdmissionReview-shaped input:

* ``admit`` never raises, and answers a well-formed AdmissionReview: ``response.uid`` is the
  request's uid as a string, ``allowed`` is a bool, a refusal has a status with a message,
  and the whole answer serialises as UTF-8 JSON;
* an allowed patch is a JSON patch that applies to the pod, and every injected agent's
  arguments pass the agent's own parser (:func:`dynconf_k8s.agent.flags.parse_args`);
* under an installation that pins ``file-mode``, every file the agent would write has the
  pinned mode;
* no refusal message or warning repeats a credential planted in the pod (URL userinfo,
  ``agent-env`` values).

Pods are built from the real registry's keys with hostile values: wrong JSON types, control
characters, commas and equals signs, huge strings, unicode, missing fields, no containers,
uids of any type. Inputs stay JSON-shaped (string keys, finite numbers): what a review decoded
from a request body can hold. An ERROR the webhook logs while judging a review counts as a
broken promise too: it marks a catch-all refusal, which cannot name the malformed field.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynconf_k8s.agent.flags import UsageError, parse_args
from dynconf_k8s.contract import Installation, parse_installation
from dynconf_k8s.contract.registry import ALSO, ALSO_SECTION, KEYS, PREFIX
from dynconf_k8s.webhook.admission import admit
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.support import (
    SECRETS,
    PatchError,
    Violation,
    apply_json_patch,
    leaked,
    redact,
    require,
)

pytestmark = pytest.mark.fuzz

PASSWORD = SECRETS[1]
PINNED_MODE = 0o440

INSTALLATIONS: dict[str, Installation] = {
    "default": parse_installation({}),
    "pinned-mode": parse_installation({"DYNAMIC_CONFIG_AGENT_FILE_MODE": "0440!"}),
}

CANONICAL = {
    "inject": "true",
    "source": "consul",
    "endpoint": "http://consul:8500",
    "key": "myapp/config.json",
    "path": "/config/rendered.toml",
    "mode": "sidecar",
}

PLAUSIBLE: dict[str, list[str]] = {
    "inject": ["true", "false"],
    "source": [
        "consul",
        "vault",
        "config-server",
        "firestore",
        "git",
        "redis",
        "etcd",
        "nats",
        "s3",
        "file",
    ],
    "endpoint": [
        "http://consul:8500",
        "https://vault:8200",
        "redis://r:6379",
        f"https://alice:{PASSWORD}@vault.internal:8200/v1",
        "bucket",
        "git@github.com:acme/config.git",
    ],
    "endpoint-secret": ["consul/url"],
    "key": ["myapp/config.json", "a.yaml", "secret/app", "prod/db.json"],
    "path": [
        "/config/rendered.toml",
        "/config/app.json",
        "/config/a.yaml",
        "/config/x.env",
        "/config/app.properties",
        "/config/out.ini",
        "/config/out.txt",
        " ",
        "/",
        "relative.json",
        "/config/../etc/x.json",
        "/config/a,mode=0666.json",
    ],
    "mode": ["init", "sidecar", "both"],
    "watch-seconds": ["0", "1", "15", "86400", "1.5"],
    "timeout": ["1", "30", "0"],
    "agent-image": ["registry.example/agents:1", "evil.example/agent:1"],
    "section": ["database", "db.primary"],
    "auth": ["token", "kubernetes", "approle", "userpass", "ldap", "ssh-key"],
    "template": ["{{ port }}", "{{ db.password }}", "{% for i in range(10) %}x{% endfor %}"],
    "template-configmap": ["tpl", "tpl/template"],
    "file-mode": ["0440", "0600", "0640", "0666", "0777", "440", "888"],
    "metrics-port": ["0", "9110", "65535", "70000"],
    "notify-http": [
        "http://127.0.0.1:8080/-/reload",
        "http://localhost:9/x",
        "http://[::1]:80/",
        f"http://u:{PASSWORD}@127.0.0.1:8080/",
    ],
    "agent-env": [
        "RUST_LOG=debug",
        f"DB_PASSWORD={PASSWORD}",
        f"A=1, B={PASSWORD}",
        "HTTPS_PROXY=http://proxy:3128",
    ],
    "inject-containers": ["app", "app,side", "nope"],
    "env-inject": ["app", "nope"],
    "history": ["0", "3", "10", "11"],
    "revoke-grace": ["5", "30s"],
    "max-staleness": ["90s", "15m", "soon"],
    "on-drift": ["warn", "repair", "fail"],
    "startup-policy": ["allow-cached", "require-fresh", "best-effort"],
    "on-delete": ["retain", "remove", "fail"],
    "max-document-bytes": ["1", "8388608", "0"],
    "volume-medium": ["memory", "disk"],
    "api-url": ["https://firestore.googleapis.com", f"https://k:{PASSWORD}@s3.example"],
    "ref": ["main", "branch:main", "tag:v1", "commit:0123abcd"],
    "class": ["default", "nope"],
}
BOOLEAN_KEYS = [k.name for k in KEYS if k.form == '"true" or "false"']
SECRET_REF_KEYS = [k.name for k in KEYS if k.form == "<secret-name>/<key>"]

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\t",
            "\n",
            "\r\n",
            "\x00",
            "\x1b[31m",
            "\u202e",
            "\ud800",
            "\ufeff",
            ",",
            "=",
            ",mode=0666",
            "out=/etc/passwd",
            "a,b=c",
            "x=y,z",
            "--token",
            "-x",
            "0",
            "-1",
            "2147483648",
            "4294967296",
            "99999999999999999999",
            "٣",
            "\uff11\uff12",
            "0x10",
            "true\n",
            "${HOME}",
            "$(id)",
            "`id`",
            "; rm -rf /",
            "a b",
            "..",
            "/..",
            "~",
            "日本語",
            "😀",
            "\\",
            "'",
            '"',
            "null",
            "{}",
            "[]",
        ]
    ),
    st.text(st.characters(), max_size=40),
    st.sampled_from([1024, 65536, 200_000]).map(lambda n: "x" * n),
    st.sampled_from([1024, 65536]).map(lambda n: "a=b," * n),
    st.sampled_from(list(PLAUSIBLE.values())).flatmap(st.sampled_from).map(lambda v: v + ",x=y"),
)
WRONG_TYPES = st.one_of(
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


ALSO_VALUES = [
    "/config/db.properties",
    "/config/db.properties,mode=0666",
    "/config/db.env,section=x",
    "out=/etc/x.json",
    "/config/rendered.toml",
    "/config/a.json\n--token",
]
ALSO_SECTION_VALUES = ["database", "a,mode=0666", "x=y"]


def _usually(draw: st.DrawFn, one_in: int) -> bool:
    """True except about one time in ``one_in``; shrinks towards True (the usual shape).

    The rare branch comes last: hypothesis favours (and shrinks to) a strategy's first choice.
    """
    return bool(draw(st.sampled_from([True] * (one_in - 1) + [False])))


def _value_for(name: str, hostile: bool) -> st.SearchStrategy[Any]:
    plausible: list[str] = PLAUSIBLE.get(name, [])
    if name in BOOLEAN_KEYS:
        plausible = ["true", "false"]
    elif name in SECRET_REF_KEYS:
        plausible = ["s/k", "secret", "s/k/extra"]
    elif name == ALSO:
        plausible = ALSO_VALUES
    elif name == ALSO_SECTION:
        plausible = ALSO_SECTION_VALUES
    if not hostile and plausible:
        return st.sampled_from(plausible)
    options: list[st.SearchStrategy[Any]] = [HOSTILE, WRONG_TYPES]
    if plausible:
        options = [st.sampled_from(plausible), st.sampled_from(plausible), *options]
    return st.one_of(*options)


SUFFIXES = st.one_of(st.none(), st.sampled_from(["cache", "db", "a-1", "Cache", "x" * 33, ""]))


@st.composite
def annotation_entries(draw: st.DrawFn, hostile: bool = True) -> tuple[str, Any]:
    rows: list[tuple[str, bool]] = [(k.name, k.per_render) for k in KEYS]
    name, per_render = draw(st.sampled_from([*rows, (ALSO, True), (ALSO_SECTION, True)]))
    suffix: str | None
    if name in (ALSO, ALSO_SECTION):
        suffix = draw(st.sampled_from(["db", "cache", "a-1", "Cache", "x" * 33, ""]))
    else:
        suffix = draw(SUFFIXES) if per_render or not _usually(draw, 10) else None
    key = PREFIX + name + ("" if suffix is None else f".{suffix}")
    value = draw(_value_for(name, hostile))
    return key, value


@st.composite
def annotation_maps(draw: st.DrawFn, admissible: bool = False) -> Any:
    """Annotations; ``admissible`` keeps to shapes that usually get as far as a patch."""
    shapes = ["plausible", "also"]
    if not admissible:
        shapes = ["plausible", "plausible", "canonical", "canonical", "also", "random", "wrong"]
    shape = draw(st.sampled_from(shapes))
    if shape == "wrong":
        return draw(st.one_of(WRONG_TYPES, st.text(max_size=5)))
    result: dict[Any, Any] = {}
    if shape in ("canonical", "plausible"):
        result = {PREFIX + k: v for k, v in CANONICAL.items()}
        for drop in draw(st.lists(st.sampled_from(list(CANONICAL)), max_size=2)):
            result.pop(PREFIX + drop, None)
    entries = annotation_entries(hostile=shape not in ("plausible", "also"))
    for key, value in draw(st.lists(entries, max_size=2 if shape == "also" else 6)):
        result[key] = value
    if shape == "also":
        result = {PREFIX + k: v for k, v in CANONICAL.items()} | result
        for suffix in draw(
            st.lists(st.sampled_from(["db", "cache", "a-1"]), min_size=1, max_size=2, unique=True)
        ):
            result[f"{PREFIX}{ALSO}.{suffix}"] = draw(
                st.one_of(st.sampled_from(ALSO_VALUES), HOSTILE)
            )
            if not _usually(draw, 3):
                result[f"{PREFIX}{ALSO_SECTION}.{suffix}"] = draw(
                    st.one_of(st.sampled_from(ALSO_SECTION_VALUES), HOSTILE)
                )
    if not _usually(draw, 6):
        result[draw(st.sampled_from(["example.com/x", PREFIX + "tokne-secret", PREFIX, "7"]))] = "v"
    return result


CONTAINER = st.one_of(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["app", "side", "dynamic-config-agent"]), "image": st.just("b")},
        optional={
            "command": st.one_of(st.just(["/bin/app"]), WRONG_TYPES),
            "args": st.just(["--x"]),
            "volumeMounts": st.one_of(
                st.just([{"name": "v", "mountPath": "/config"}]), st.just([])
            ),
        },
    ),
    WRONG_TYPES,
    st.just({}),
)


@st.composite
def pods(draw: st.DrawFn, admissible: bool = False) -> Any:
    """A pod object; ``admissible`` keeps metadata and annotations well-typed."""
    if not admissible and not _usually(draw, 31):
        return draw(st.one_of(WRONG_TYPES, st.text(max_size=5)))
    metadata: dict[str, Any] = {"name": draw(st.one_of(st.just("app"), HOSTILE, WRONG_TYPES))}
    if admissible or _usually(draw, 21):
        metadata["annotations"] = draw(annotation_maps(admissible))
    if not admissible and not _usually(draw, 11):
        metadata = draw(st.one_of(WRONG_TYPES, st.just({})))
    spec: Any = {"containers": [{"name": "app", "image": "busybox"}]}
    shape = draw(st.sampled_from(range(10)))
    if shape == 0:
        spec = {"containers": []}
    elif shape == 1:
        spec = {}
    elif shape == 2:
        spec = draw(WRONG_TYPES)
    elif shape == 3:
        spec = {"containers": draw(st.lists(CONTAINER, max_size=3))}
    elif shape == 4:
        spec["initContainers"] = draw(st.lists(CONTAINER, max_size=2))
        spec["volumes"] = draw(st.sampled_from([[], [{"name": "dynamic-config"}], None, 3]))
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
    if admissible or _usually(draw, 21):
        pod["spec"] = spec
    return pod


UIDS = st.one_of(
    st.uuids().map(str),
    st.text(max_size=10),
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
)
MISSING = object()


@st.composite
def reviews(draw: st.DrawFn) -> tuple[str, Any]:
    """``(installation name, review)``: mostly a well-formed review around a hostile pod."""
    installation = draw(st.sampled_from(list(INSTALLATIONS)))
    request: dict[str, Any] = {}
    uid = draw(st.one_of(UIDS, st.just(MISSING)))
    if uid is not MISSING:
        request["uid"] = uid
    if _usually(draw, 11):
        request["namespace"] = draw(st.one_of(st.just("default"), HOSTILE, WRONG_TYPES))
    if _usually(draw, 16):
        request["object"] = draw(pods())
    if draw(st.booleans()):
        request["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
        request["operation"] = "CREATE"
    review: Any = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    review["request"] = request
    if not _usually(draw, 26):
        review["request"] = draw(WRONG_TYPES)
    if not _usually(draw, 41):
        review = draw(st.one_of(st.just({}), st.just({"request": None})))
    return installation, review


@st.composite
def admissible_reviews(draw: st.DrawFn) -> tuple[str, Any]:
    """``(installation name, review)`` around a well-typed pod with plausible annotations.

    Most of these reach the patch, so the patch and the agent's parser are exercised often;
    the hostile values still ride in the annotation values, the pod spec and ``also``.
    """
    installation = draw(st.sampled_from(list(INSTALLATIONS)))
    request = {"uid": draw(st.uuids().map(str)), "namespace": "default"}
    return installation, {"request": {**request, "object": draw(pods(admissible=True))}}


ADMISSION = st.one_of(reviews(), admissible_reviews())
"""Everything the admission class draws (the long run's strategy)."""


# --- the checks ------------------------------------------------------------------------------


def _request_uid(review: Any) -> Any:
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or "uid" not in request:
        return MISSING
    return request["uid"]


class _Errors(logging.Handler):
    """Collects the ERROR records the webhook logs while judging one review."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _answer(installation: str, review: Any) -> dict[str, Any]:
    """``admit``'s answer; an exception, or an error the webhook logs about itself, is a violation.

    An error record means the input reached a path the webhook did not foresee (a catch-all
    refusal), so the refusal cannot name the malformed field as item 7 asks.
    """
    errors = _Errors()
    logger = logging.getLogger("dynconf_k8s")
    logger.addHandler(errors)
    try:
        answer = admit(review, INSTALLATIONS[installation])
    except Exception as error:
        raise Violation(f"admit raised {type(error).__name__}", redact(str(error), 160)) from None
    finally:
        logger.removeHandler(errors)
    for record in errors.records:
        kind = getattr(record, "error", "")
        raise Violation(f"admit logged {record.getMessage()} {kind}".strip(), "an unforeseen path")
    require(isinstance(answer, dict), "admit answered a non-dict", type(answer).__name__)
    return answer


def check_well_formed(installation: str, review: Any) -> dict[str, Any]:
    """``admit`` answers a well-formed AdmissionReview; the response, for the next checks."""
    answer = _answer(installation, review)
    require(answer.get("apiVersion") == "admission.k8s.io/v1", "response apiVersion is wrong")
    require(answer.get("kind") == "AdmissionReview", "response kind is wrong")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise Violation("response is not an object", type(response).__name__)
    try:
        json.dumps(answer, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeError) as error:
        raise Violation("response does not serialise as UTF-8 JSON", type(error).__name__) from None
    uid = _request_uid(review)
    require(
        isinstance(response.get("uid"), str),
        "response uid is not a string",
        type(response.get("uid")).__name__,
    )
    if isinstance(uid, str):
        require(response["uid"] == uid, "response uid differs from the request's")
    elif isinstance(uid, int) and not isinstance(uid, bool):
        require(response["uid"] == str(uid), "response uid is not str(request uid)")
    require(isinstance(response.get("allowed"), bool), "response allowed is not a bool")
    if not response["allowed"]:
        status = response.get("status")
        if not isinstance(status, dict):
            raise Violation("refusal has no status")
        require(
            isinstance(status.get("message"), str) and status["message"], "refusal has no message"
        )
        require("patch" not in response, "refusal carries a patch")
    if "patch" in response:
        require(response.get("patchType") == "JSONPatch", "patch without patchType JSONPatch")
    return response


def _ops(response: Mapping[str, Any]) -> list[Any]:
    try:
        ops: Any = json.loads(base64.b64decode(response["patch"], validate=True))
    except (binascii.Error, ValueError, TypeError) as error:
        raise Violation("patch is not base64 JSON", type(error).__name__) from None
    if not isinstance(ops, list):
        raise Violation("patch is not a JSON array")
    return ops


def _environment(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet would give it (references resolved to text)."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        name = entry.get("name")
        if isinstance(name, str):
            env[name] = entry["value"] if "value" in entry else f"from-{name.lower()}"
    return env


def _agents(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return [
        container
        for group in ("initContainers", "containers")
        for container in spec.get(group) or []
        if isinstance(container, Mapping)
        and str(container.get("name", "")).startswith("dynamic-config-")
        and "args" in container
    ]


def check_patch(installation: str, review: Any, response: Mapping[str, Any]) -> None:
    """An allowed patch applies to the pod and the agent parses every injected argv."""
    if "patch" not in response:
        return
    pod = review["request"]["object"]
    try:
        patched = apply_json_patch(pod, _ops(response))
    except PatchError as error:
        raise Violation("patch does not apply to the pod", redact(str(error), 160)) from None
    agents = _agents(patched)
    require(agents, "patch injects no agent container")
    for container in agents:
        args = container["args"]
        require(
            isinstance(args, list) and all(isinstance(a, str) for a in args),
            "agent args are not a list of strings",
        )
        try:
            settings = parse_args(args, _environment(container))
        except UsageError as error:
            flag = error.flag or "argument vector"  # the refusal's field, not its words
            raise Violation(
                f"the agent refuses an admitted {flag}", redact(str(error), 160)
            ) from None
        except Exception as error:
            raise Violation(
                f"the agent's parser raised {type(error).__name__}", redact(str(error), 160)
            ) from None
        if installation == "pinned-mode":
            for output in settings.request.outputs:
                require(
                    output.mode == PINNED_MODE,
                    "a file escapes the pinned file-mode",
                    f"mode {output.mode!r}",
                )


def check_no_planted_credential(response: Mapping[str, Any]) -> None:
    """No refusal message or warning repeats a planted credential."""
    status = response.get("status") or {}
    texts = [status.get("message") or "", *(response.get("warnings") or [])]
    for text in texts:
        require(
            leaked(str(text), (PASSWORD,)) is None,
            "a refusal or warning repeats a planted credential",
        )


def check_review(case: tuple[str, Any]) -> None:
    """Every admission promise for one review."""
    installation, review = case
    response = check_well_formed(installation, review)
    check_no_planted_credential(response)
    check_patch(installation, review, response)


def _well_formed_or_none(installation: str, review: Any) -> dict[str, Any] | None:
    """The response when it is well-formed; ``None`` leaves the example to the first property."""
    try:
        return check_well_formed(installation, review)
    except Violation:
        return None


@fuzz_settings(3)
@given(case=reviews())
def test_admit_answers_every_review_with_a_well_formed_response_for_its_uid(
    case: tuple[str, Any],
) -> None:
    check_well_formed(*case)


@fuzz_settings(3)
@given(case=admissible_reviews())
def test_admitted_patches_apply_and_the_agent_accepts_every_argument(
    case: tuple[str, Any],
) -> None:
    installation, review = case
    response = _well_formed_or_none(installation, review)
    if response is not None:
        check_patch(installation, review, response)


@fuzz_settings(2)
@given(case=reviews())
def test_refusals_and_warnings_never_repeat_a_planted_credential(case: tuple[str, Any]) -> None:
    response = _well_formed_or_none(*case)
    if response is not None:
        check_no_planted_credential(response)
