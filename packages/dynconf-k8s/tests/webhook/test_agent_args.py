"""Every agent the webhook injects starts: its ``args`` and ``env`` pass the agent's own parser.

The corpora are the book's pods, ``examples/`` and the golden pods; each admitted pod's patch is
decoded and every injected container is handed to :func:`dynconf_k8s.agent.flags.parse_args`
exactly as the kubelet would start it. The refusals the agent would have made at start are
refusal cases in ``cases/refusals.yaml`` (``agent-*``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf_k8s.agent.flags import parse_args
from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.validate import classes_in, pods_in

from .test_golden import CASES as GOLDEN_CASES
from .test_validate import BOOK, BOOK_CLASSES, BOOK_INSTALLATION

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
AGENTS = ("dynamic-config-agent", "dynamic-config-init")


def _corpus() -> list[tuple[str, dict[str, Any], dict[str, str], str | None]]:
    """``(label, pod, installation env, namespace)`` for every pod the corpora carry."""
    out: list[tuple[str, dict[str, Any], dict[str, str], str | None]] = []
    for path in BOOK:
        uses_class = "dynamic-config.rs/class" in path.read_text()
        env = {} if uses_class else BOOK_INSTALLATION
        for document in yaml.safe_load_all(path.read_text()):
            for label, pod in pods_in(document):
                out.append(
                    (f"{path.name}:{label}", dict(pod), env, "billing" if uses_class else None)
                )
    for path in EXAMPLES:
        for document in yaml.safe_load_all(path.read_text()):
            for label, pod in pods_in(document):
                out.append((f"{path.name}:{label}", dict(pod), {}, None))
    for name, golden in GOLDEN_CASES.items():
        pod = {"metadata": {"name": "app", "annotations": golden},
               "spec": {"containers": [{"name": "app", "image": "busybox"}]}}  # fmt: skip
        out.append((name, pod, {}, None))
    return out


CORPUS = _corpus()
CLASSES = classes_in(list(yaml.safe_load_all(BOOK_CLASSES.read_text())))


def _injected(patch: str) -> list[dict[str, Any]]:
    ops = json.loads(base64.b64decode(patch))
    return [
        op["value"]
        for op in ops
        if isinstance(op.get("value"), dict) and str(op["value"].get("name", "")).startswith(AGENTS)
    ]


@pytest.mark.parametrize(("label", "pod", "env", "namespace"), CORPUS, ids=[c[0] for c in CORPUS])
def test_every_injected_agent_accepts_its_arguments(label, pod, env, namespace):
    request: dict[str, Any] = {"uid": "u", "object": pod}
    if namespace:
        request["namespace"] = namespace
    response = decide({"request": request}, parse_installation(env), CLASSES).response["response"]
    assert response["allowed"], response
    if "patch" not in response:
        return
    containers = _injected(response["patch"])
    assert containers, label
    for container in containers:
        environ = {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}
        parse_args(container["args"], environ)


def test_corpus_is_not_empty():
    assert len([c for c in CORPUS if c[0].startswith("book-")]) >= 20
    assert len(CORPUS) >= 50


# The book's own annotation snippets that write a `.env` file with no template: the env format
# writes it, so the webhook admits them and the agent starts (the format registry is the one list
# of writable extensions).
BOOK_ENV_SNIPPETS = {
    "also-db-env-section": {
        "dynamic-config.rs/inject": "true",
        "dynamic-config.rs/source": "vault",
        "dynamic-config.rs/endpoint": "https://vault.vault.svc:8200",
        "dynamic-config.rs/key": "secret/myapp",
        "dynamic-config.rs/auth": "kubernetes",
        "dynamic-config.rs/auth-role": "myapp",
        "dynamic-config.rs/path": "/config/app.yaml",
        "dynamic-config.rs/also.db": "/config/db.env",
        "dynamic-config.rs/also-section.db": "database",
    },
    "dynamic-secrets-db-env": {
        "dynamic-config.rs/inject": "true",
        "dynamic-config.rs/source": "vault",
        "dynamic-config.rs/endpoint": "https://vault.vault.svc:8200",
        "dynamic-config.rs/dynamic": "true",
        "dynamic-config.rs/key": "database/creds/billing",
        "dynamic-config.rs/path": "/config/db.env",
        "dynamic-config.rs/auth": "kubernetes",
        "dynamic-config.rs/auth-role": "billing",
    },
}


@pytest.mark.parametrize("label", sorted(BOOK_ENV_SNIPPETS))
def test_book_env_files_without_a_template_are_admitted_and_start(label):
    pod = {"metadata": {"name": "app", "annotations": BOOK_ENV_SNIPPETS[label]},
           "spec": {"containers": [{"name": "app", "image": "busybox"}]}}  # fmt: skip
    response = decide({"request": {"uid": "u", "object": pod}}, parse_installation({}), CLASSES)
    body = response.response["response"]
    assert body["allowed"], body
    containers = _injected(body["patch"])
    assert containers
    for container in containers:
        environ = {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}
        parse_args(container["args"], environ)


def test_an_accepted_agent_is_judged_once_and_a_refused_one_every_time(monkeypatch, pod_with):
    """The parser check remembers acceptances only: a refusal is never answered from memory."""
    from dynconf_k8s.webhook import agentcheck

    calls: list[tuple[str, ...]] = []

    def counted(argv, environ=None):
        calls.append(tuple(argv))
        return parse_args(argv, environ)

    monkeypatch.setattr(agentcheck, "parse_args", counted)
    agentcheck._accepted.cache_clear()
    inst = parse_installation({})

    def admit(pod: dict[str, Any]) -> Any:
        return decide({"request": {"uid": "u", "namespace": "default", "object": pod}}, inst)

    try:
        assert admit(pod_with()).outcome == "patched"
        judged = len(calls)
        assert judged > 0
        assert admit(pod_with()).outcome == "patched"
        assert len(calls) == judged  # the same agent again: remembered

        refused = pod_with({"path": "/config/db.txt"})  # the agent refuses a .txt --out
        for attempt in (1, 2):
            decision = admit(refused)
            assert decision.outcome == "refused"
            assert (
                "would stop the agent at start"
                in decision.response["response"]["status"]["message"]
            )
            assert len(calls) == judged + attempt  # judged again each time
    finally:
        agentcheck._accepted.cache_clear()
