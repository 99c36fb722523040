"""Admission is total: every review gets a well-formed AdmissionReview response, never an
exception, and the response's uid is always the request's uid as a string.

One table of malformed reviews, run through the pure :func:`admit`, the served webhook over
TLS and ``validate`` (hand-written YAML, where an unquoted number is the usual mistake).
"""

from __future__ import annotations

import io
import json
import logging
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.admission import admit
from dynconf_k8s.webhook.settings import WebhookSettings
from dynconf_k8s.webhook.validate import run_validate

ANN = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}
APP = {"name": "app", "image": "busybox"}


def _pod(annotations: Any = ANN, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [APP]}
    body.update(spec)
    return {"metadata": {"name": "p", "annotations": annotations}, "spec": body}


def _with(**extra: Any) -> dict[str, Any]:
    return {**ANN, **{f"dynamic-config.rs/{k}": v for k, v in extra.items()}}


MALFORMED: list[tuple[str, Any, str]] = [
    ("annotations-a-number", _pod(7), "request.object.metadata.annotations is a number"),
    ("annotations-a-list", _pod(["a"]), "request.object.metadata.annotations is a list"),
    ("unquoted-watch-seconds", _pod(_with(**{"watch-seconds": 30})),
     "dynamic-config.rs/watch-seconds is a number, and annotation values are strings"),
    ("boolean-inject", _pod({**ANN, "dynamic-config.rs/inject": True}),
     "dynamic-config.rs/inject is a boolean"),
    ("metadata-a-string", {"metadata": "x", "spec": {"containers": [APP]}},
     "request.object.metadata is a string"),
    ("object-a-list", [1, 2], "request.object is a list"),
    ("spec-a-number", {"metadata": {"annotations": ANN}, "spec": 3},
     "request.object.spec is a number"),
    ("no-spec", {"metadata": {"annotations": ANN}}, "request.object.spec is null"),
    ("no-containers", _pod(containers=[]), "request.object.spec.containers is empty"),
    ("containers-absent", {"metadata": {"annotations": ANN}, "spec": {}},
     "request.object.spec.containers is empty"),
    ("container-a-string", _pod(containers=["app"]),
     "request.object.spec.containers[0] is a string"),
    ("container-without-name", _pod(containers=[{"image": "b"}]),
     "request.object.spec.containers[0].name is null"),
    ("command-a-string", _pod(containers=[{**APP, "command": "server"}]),
     "request.object.spec.containers[0].command is a string"),
    ("volumes-an-object", _pod(volumes={"a": 1}), "request.object.spec.volumes is an object"),
    ("run-as-user-negative", _pod(securityContext={"runAsUser": -1}),
     "request.object.spec.securityContext.runAsUser is outside 0-2147483647"),
    ("run-as-user-past-int32", _pod(containers=[{**APP, "securityContext": {"runAsUser": 2**31}}]),
     "request.object.spec.containers[0].securityContext.runAsUser is outside 0-2147483647"),
    ("run-as-user-a-string", _pod(securityContext={"runAsUser": "1000"}),
     "request.object.spec.securityContext.runAsUser is a string"),
    ("grace-a-string", _pod(terminationGracePeriodSeconds="30"),
     "request.object.spec.terminationGracePeriodSeconds is a string"),
    ("blank-path", _pod(_with(path=" ")), "dynamic-config.rs/path is not an absolute path"),
]  # fmt: skip


def _review(pod: Any, uid: Any = "u-1") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "namespace": "default", "object": pod}}  # fmt: skip


ODD_SPECS = [1, [0], True, "x", {"containers": 1}, {"containers": [1]}, {"containers": ["app"]}]


@pytest.mark.parametrize("spec", ODD_SPECS, ids=repr)
@pytest.mark.parametrize(
    "annotations",
    [{}, {"dynamic-config.rs/inject": "false"}, None],
    ids=["no-annotations", "inject-false", "annotations-absent"],
)
def test_a_pod_that_asks_for_nothing_is_allowed_untouched_whatever_its_spec(spec, annotations):
    pod = {"metadata": {"name": "app", "annotations": annotations}, "spec": spec}
    response = admit(_review(pod), parse_installation({}))["response"]
    assert response == {"allowed": True, "uid": "u-1"}


@pytest.mark.parametrize("spec", ODD_SPECS, ids=repr)
def test_a_status_marked_pod_with_an_odd_spec_is_refused_as_a_copied_manifest(spec):
    pod = {"metadata": {"annotations": {"dynamic-config.rs/status": "injected"}}, "spec": spec}
    response = admit(_review(pod), parse_installation({}))["response"]
    assert response["allowed"] is False
    assert "the pod carries no injected agent" in response["status"]["message"]


def _assert_refused(review_response: dict[str, Any], contains: str, uid: str = "u-1") -> None:
    assert review_response["apiVersion"] == "admission.k8s.io/v1"
    assert review_response["kind"] == "AdmissionReview"
    response = review_response["response"]
    assert response["uid"] == uid
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["reason"] == "DynamicConfigMalformed"
    assert contains in response["status"]["message"], response["status"]["message"]


@pytest.mark.parametrize(
    ("pod", "contains"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_review_is_refused_naming_the_field(pod, contains):
    _assert_refused(admit(_review(pod), parse_installation({})), contains)


@pytest.mark.parametrize(
    "review",
    [None, 3, "x", [], {"request": 5}, {"request": []}, {"request": {"uid": "u-1", "object": 4}}],
    ids=["none", "number", "string", "list", "request-number", "request-list", "object-number"],
)
def test_a_review_that_is_not_one_gets_a_well_formed_answer(review):
    response = admit(review, parse_installation({}))
    assert response["kind"] == "AdmissionReview"
    assert isinstance(response["response"]["uid"], str)


@pytest.mark.parametrize(("uid", "shown"), [(42, "42"), (None, ""), ("abc", "abc")])
def test_response_uid_is_the_request_uid_as_a_string(uid, shown):
    for pod in (_pod(), _pod(7), None):
        assert admit(_review(pod, uid), parse_installation({}))["response"]["uid"] == shown


def test_unforeseen_failure_is_a_refusal_not_an_exception(monkeypatch, caplog):
    from dynconf_k8s.webhook import admission

    def explode(*_args: Any) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(admission, "check_agent_args", explode)
    with caplog.at_level(logging.ERROR, logger="dynconf_k8s.webhook"):
        response = admit(_review(_pod()), parse_installation({}))
    _assert_refused(response, "the webhook could not judge this pod (KeyError)")
    assert [r.error for r in caplog.records if r.getMessage() == "admission_failed"] == ["KeyError"]


def _post(hook: Any, body: bytes) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cafile=hook.ca)
    request = urllib.request.Request(hook.url + "/mutate", data=body, method="POST",
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_every_malformed_review_is_answered_over_https(running_webhook):
    hook = running_webhook(WebhookSettings(installation=parse_installation({})))
    for _name, pod, contains in MALFORMED:
        status, body = _post(hook, json.dumps(_review(pod)).encode())
        assert status == 200, body
        _assert_refused(body, contains)
    status, body = _post(hook, b"[not json")
    assert status == 400 and body["kind"] == "AdmissionReview"
    assert body["response"] == {
        "allowed": False,
        "status": {"code": 400, "message": "the body is not an AdmissionReview object",
                   "reason": "DynamicConfigMalformed"},
        "uid": "",
    }  # fmt: skip


VALIDATED = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    dynamic-config.rs/inject: "true"
    dynamic-config.rs/source: consul
    dynamic-config.rs/endpoint: http://consul:8500
    dynamic-config.rs/key: myapp/config.json
    dynamic-config.rs/path: /config/rendered.toml
    dynamic-config.rs/watch-seconds: 30
spec:
  containers: [{name: app, image: busybox}]
"""


def test_validate_refuses_an_unquoted_number_naming_the_annotation(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(VALIDATED)
    out, err = io.StringIO(), io.StringIO()
    assert run_validate([str(path)], parse_installation({}), out, err) == 1
    assert "refused (DynamicConfigMalformed)" in err.getvalue()
    assert "dynamic-config.rs/watch-seconds is a number" in err.getvalue()
    assert 'quote it (in YAML, "30" rather than 30)' in err.getvalue()


def test_validate_refuses_annotations_that_are_not_a_mapping(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p, annotations: 7}\nspec: {containers: []}\n")
    out, err = io.StringIO(), io.StringIO()
    assert run_validate([str(path)], parse_installation({}), out, err) == 1
    assert "request.object.metadata.annotations is a number" in err.getvalue()


VALIDATABLE = [m for m in MALFORMED if isinstance(m[1], dict)]


@pytest.mark.parametrize(
    ("pod", "contains"), [m[1:] for m in VALIDATABLE], ids=[m[0] for m in VALIDATABLE]
)
def test_every_malformed_pod_is_refused_by_validate(pod, contains, tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", **pod}))
    out, err = io.StringIO(), io.StringIO()
    assert run_validate([str(path)], parse_installation({}), out, err) == 1, out.getvalue()
    assert "refused (DynamicConfigMalformed)" in err.getvalue()
    assert contains in err.getvalue()
