"""The reference webhook's own test cases, as data, against our served webhook.

Each case in ``cases/*.yaml`` is one test of ``dynamic-config-webhook/tests`` (golden.rs,
classes.rs, installation_document.rs and its two response fixtures), written as an input
(pod, namespace, installation, classes) and the outcome the reference pins (admitted with
which patch features, or refused with which wording). Admission cases are POSTed as an
AdmissionReview to ``/mutate`` of the app ``create_app`` builds, served over TLS by uvicorn;
installation-document cases go through ``load_installation``, the function the server starts
with.

A case our webhook answers differently on purpose carries ``ours:`` — the outcome of our
documented rule — and is listed under "Deliberate differences" in ``docs/conformance.md``.
The runner reads that list: a listed case is asserted against ``ours``, an unlisted one
against ``expect``, and a case with ``ours`` that the page does not list fails (the rule
would have no documented reason).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dynconf_k8s.contract import InstallationError, merge_environment, parse_installation
from dynconf_k8s.contract.installation import BUILTIN_IMAGE
from dynconf_k8s.webhook.classes import entries_from_lists
from dynconf_k8s.webhook.settings import WebhookSettings, load_installation

# The served-webhook harness and the patch applier are the webhook tests' own, shared, not copied.
from ..conftest import RunningWebhook, _apply_patch  # noqa: TID252

HERE = Path(__file__).parent
PAGE = Path(__file__).resolve().parents[5] / "docs" / "conformance.md"
PREFIX = "dynamic-config.rs/"

BASES: dict[str, dict[str, str]] = {
    "consul": {
        "inject": "true",
        "source": "consul",
        "endpoint": "http://consul:8500",
        "key": "myapp/config.json",
        "path": "/config/rendered.toml",
        "mode": "sidecar",
    },
    "vault": {
        "inject": "true",
        "source": "vault",
        "endpoint": "https://vault.vault:8200",
        "key": "secret/myapp",
        "path": "/config/rendered.yaml",
        "auth": "kubernetes",
        "auth-role": "myapp",
        "ca-configmap": "vault-ca",
    },
    "classed": {"inject": "true", "key": "myapp/config.json", "path": "/config/rendered.toml"},
    "none": {},
}
"""The reference tests' pods: ``annotated(mode)``, ``vault_kubernetes_pod()``, ``classed()``."""


def _cases() -> list[dict[str, Any]]:
    out = []
    for path in sorted((HERE / "cases").glob("*.yaml")):
        for case in yaml.safe_load(path.read_text(encoding="utf-8")):
            case["id"] = f"{path.stem}/{case['id']}"
            out.append(case)
    return out


def _listed(heading: str) -> dict[str, str]:
    """Case id -> second column, from the table under ``heading`` on the conformance page."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`([^`]+)`\s*\|\s*([^|]+)\|", section, flags=re.MULTILINE)
    return {case: rule.strip() for case, rule in rows}


def listed_differences() -> dict[str, str]:
    """Case id -> our rule: the page's "Deliberate differences"."""
    return _listed("Deliberate differences")


CASES = _cases()


def _params(cases: list[dict[str, Any]]) -> list[Any]:
    return [pytest.param(case, id=case["id"]) for case in cases]


ADMISSION = _params([c for c in CASES if "document" not in c or "pod" in c])
DOCUMENTS = _params([c for c in CASES if "document" in c and "pod" not in c])


def _pod(spec: Mapping[str, Any]) -> dict[str, Any]:
    annotations = {
        k: v for k, v in BASES[spec.get("base", "consul")].items() if k not in spec.get("drop", ())
    }
    annotations.update(spec.get("set") or {})
    metadata: dict[str, Any] = {"name": "app"}
    if spec.get("base") != "none" or annotations:
        metadata["annotations"] = {
            (k if "/" in k else PREFIX + k): v for k, v in annotations.items()
        }
    body: dict[str, Any] = {"containers": [{"name": "app", "image": "app:1"}]}
    body.update(copy.deepcopy(spec.get("spec") or {}))
    return {"metadata": metadata, "spec": body}


def _installation(case: Mapping[str, Any]) -> Any:
    env = {k: str(v) for k, v in (case.get("env") or {}).items()}
    return parse_installation(merge_environment(env, case.get("document"), origin="case"))


class Served:
    """One served webhook per distinct installation, sharing a class map set per case."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.classes: dict[tuple[str | None, str], Any] = {}
        self.hooks: dict[str, RunningWebhook] = {}
        self.clients: dict[str, httpx.Client] = {}

    def client(self, case: Mapping[str, Any]) -> httpx.Client:
        key = json.dumps([case.get("env"), case.get("document")], sort_keys=True)
        if key not in self.hooks:
            directory = self.tmp / f"hook-{len(self.hooks)}"
            directory.mkdir()
            installation = _installation(case)
            hook = RunningWebhook(
                WebhookSettings(installation=installation),
                directory,
                classes=lambda: self.classes,
            )
            self.hooks[key] = hook
            self.clients[key] = httpx.Client(
                base_url=hook.url, verify=ssl.create_default_context(cafile=hook.ca), timeout=10
            )
        return self.clients[key]

    def admit(self, case: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
        namespaced = [c for c in case.get("classes") or () if c["kind"] == "DynamicConfigClass"]
        cluster = [c for c in case.get("classes") or () if c["kind"] != "DynamicConfigClass"]
        self.classes = entries_from_lists(namespaced, cluster)
        request: dict[str, Any] = {"uid": case.get("uid", "test-uid-1"), "object": pod}
        if "namespace" in case:
            request["namespace"] = case["namespace"]
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }
        answer = self.client(case).post("/mutate", json=review)
        assert answer.status_code == 200, answer.text
        response: dict[str, Any] = answer.json()["response"]
        return response

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        for hook in self.hooks.values():
            hook.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(tmp_path_factory.mktemp("conformance"))
    yield served
    served.close()


def _ops(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        return []
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


def _resolve(document: Any, pointer: str) -> tuple[bool, Any]:
    """Follow ``pointer`` into the patched pod; ``(found, value)``.

    ``/container/<name>`` is the container of that name in ``containers`` or
    ``initContainers``; a segment ``@<name>`` picks the list element whose ``name`` it is.
    """
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/")]
    if parts[0] == "container":
        spec = document.get("spec") or {}
        found = [
            c
            for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
            if c.get("name") == parts[1]
        ]
        if not found:
            return False, None
        value, parts = found[0], parts[2:]
    else:
        value = document
    for part in parts:
        if isinstance(value, list):
            if part.startswith("@"):
                matches = [v for v in value if isinstance(v, dict) and v.get("name") == part[1:]]
                if not matches:
                    return False, None
                value = matches[0]
            elif part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return False, None
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return False, None
    return True, value


def _check_at(patched: Mapping[str, Any], check: Mapping[str, Any]) -> None:
    found, value = _resolve(patched, check["at"])
    where = f"{check['at']} = {value!r}"
    if check.get("absent"):
        assert not found, where
        return
    assert found, f"{check['at']} is not in the patched pod"
    if "equals" in check:
        assert value == check["equals"], where
    for item in check.get("has", ()):
        assert item in value, f"{item!r} not in {where}"
    for item in check.get("lacks", ()):
        assert item not in value, f"{item!r} in {where}"
    for pair in check.get("pairs", ()):
        assert any(value[i : i + 2] == pair for i in range(len(value))), f"{pair} not in {where}"
    if "length" in check:
        assert len(value) == check["length"], where
    if "text_lacks" in check:
        assert check["text_lacks"] not in json.dumps(value), where
    if "text_has" in check:
        assert check["text_has"] in json.dumps(value), where


def _fixture_ops(name: str, differences: list[str]) -> list[dict[str, Any]]:
    """The reference fixture's patch, with our documented differences applied to it."""
    fixture = json.loads((HERE / "fixtures" / name).read_text(encoding="utf-8"))
    ops = _ops(fixture["response"])
    for op in ops:
        value = op.get("value")
        if not isinstance(value, dict):
            continue
        if "image" in differences and value.get("name") == "dynamic-config-agent":
            value["image"] = BUILTIN_IMAGE
        if "size-limit" in differences and "emptyDir" in value:
            value["emptyDir"]["sizeLimit"] = "16Mi"
    return ops


def _check_outcome(
    served: Served, case: Mapping[str, Any], pod: dict[str, Any], outcome: Mapping[str, Any]
) -> None:
    response = served.admit(case, pod)
    assert response["uid"] == case.get("uid", "test-uid-1")
    assert response["allowed"] is outcome.get("allowed", True), response
    status = response.get("status") or {}
    for fragment in outcome.get("message_has", ()):
        assert fragment in status.get("message", ""), status
    if "reason" in outcome:
        assert status.get("reason") == outcome["reason"], status
    if "code" in outcome:
        assert status.get("code") == outcome["code"], status
    if "patched" in outcome:
        assert ("patch" in response) is outcome["patched"], response
    warnings = response.get("warnings") or []
    if "warnings" in outcome:
        assert len(warnings) == outcome["warnings"], warnings
    for fragment in outcome.get("warnings_has", ()):
        assert any(fragment in w for w in warnings), warnings
    ops = _ops(response)
    spelled = [op["path"] for op in ops] + [f"{op['op']} {op['path']}" for op in ops]
    for path in outcome.get("ops_has", ()):
        assert path in spelled, spelled
    for path in outcome.get("ops_lacks", ()):
        assert path not in spelled, spelled
    if "fixture" in outcome:
        assert ops == _fixture_ops(outcome["fixture"], outcome.get("fixture_differences", []))
    patched = _apply_patch(pod, ops) if ops else pod
    for check in outcome.get("pod", ()):
        _check_at(patched, check)
    if "again" in outcome:
        _check_outcome(served, case, patched, outcome["again"])
    if "same_as_env" in outcome:
        other = {**case, "env": outcome["same_as_env"], "document": None}
        assert served.admit(other, pod) == response


def _chosen(case: Mapping[str, Any]) -> Mapping[str, Any]:
    listed = listed_differences()
    if "ours" in case:
        assert case["id"] in listed, f"{case['id']} differs but docs/conformance.md omits it"
        ours: Mapping[str, Any] = case["ours"]
        return ours
    assert case["id"] not in listed, f"{case['id']} is listed but carries no `ours` outcome"
    expect: Mapping[str, Any] = case["expect"]
    return expect


@pytest.mark.parametrize("case", ADMISSION)
def test_admission_case(case: dict[str, Any], served: Served) -> None:
    outcome = _chosen(case)
    _check_outcome(served, case, _pod(case["pod"]), outcome)


@pytest.mark.parametrize("case", DOCUMENTS)
def test_installation_document_case(case: dict[str, Any], tmp_path: Path) -> None:
    outcome = _chosen(case)
    path = tmp_path / "installation.yaml"
    if case["document"] is not None:
        text = case["document"]
        if isinstance(text, dict):
            text = (HERE / "fixtures" / text["fixture"]).read_text(encoding="utf-8")
        path.write_text(text, encoding="utf-8")
    env = {"DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(path)}
    if "error_has" in outcome:
        with pytest.raises(InstallationError) as caught:
            load_installation(env)
        problems = " ".join(caught.value.problems)
        for fragment in outcome["error_has"]:
            assert fragment in problems, problems
        return
    installation = load_installation(env)
    if outcome.get("empty"):
        assert installation.fleet == {} and installation.per_store == {}
    if "variables" in outcome:
        rendered = merge_environment({}, path.read_text(encoding="utf-8"), origin="case")
        for name, value in outcome["variables"].items():
            assert rendered.get(name) == value, rendered


def test_every_listed_case_exists() -> None:
    ids = {c["id"] for c in CASES}
    assert set(listed_differences()) <= ids, set(listed_differences()) - ids
