"""Every manifest in examples/ passes `dynamic-config-webhook validate` with an empty
installation (what CI runs), and the set covers each store and auth method the book shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")
QUICK_START = "app.yaml"
"""The Quick start document (a configuration, not a manifest)."""

MANIFESTS = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name != QUICK_START)

STORE_AUTH = {
    ("consul", None), ("consul", "token-secret"), ("consul", "kubernetes"), ("consul", "jwt"),
    ("vault", "token-secret"), ("vault", "kubernetes"), ("vault", "approle"), ("vault", "jwt"),
    ("vault", "userpass"), ("vault", "ldap"), ("vault", "cert"),
    ("config-server", None), ("config-server", "token-secret"), ("config-server", "kubernetes"),
    ("firestore", None), ("firestore", "access-token"), ("firestore", "emulator"),
    ("git", None), ("git", "token"), ("git", "ssh-secret"),
    ("redis", None), ("redis", "endpoint-secret"),
    ("etcd", "tls-secret"), ("etcd", "password-secret"),
    ("nats", "auth-token-path"), ("nats", "token-secret"),
    ("s3", None), ("s3", "aws-secret"),
}  # fmt: skip
"""(store, what authenticates) pairs the book's store pages show."""

SHAPES = {
    "multi-render": "source.cache",
    "also": "also.db",
    "env-inject": "env-inject",
    "canary": "canary-configmap",
    "require-ack": "require-ack",
    "watch-driven": "watch-seconds",
}


def _annotations(path: Path) -> list[dict[str, str]]:
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "Pod":
            out.append(doc["metadata"].get("annotations") or {})
    return out


def _auth_of(annotations: dict[str, str]) -> str | None:
    prefix = "dynamic-config.rs/"
    if f"{prefix}auth" in annotations:
        return annotations[f"{prefix}auth"]
    for key in ("ssh-secret", "endpoint-secret", "tls-secret", "password-secret",
                "auth-token-path", "aws-secret", "token-secret"):  # fmt: skip
        if f"{prefix}{key}" in annotations:
            return key
    return None


def test_examples_cover_every_store_and_auth_method_the_book_shows() -> None:
    seen = set()
    for path in MANIFESTS:
        for pod_annotations in _annotations(path):
            source = pod_annotations.get("dynamic-config.rs/source")
            if source:
                seen.add((source, _auth_of(pod_annotations)))

    assert seen >= STORE_AUTH, sorted(STORE_AUTH - seen)
    assert len(MANIFESTS) >= 24


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_examples_show_each_shape(shape: str) -> None:
    annotations = _annotations(EXAMPLES / f"{shape}.yaml")

    assert any(f"dynamic-config.rs/{SHAPES[shape]}" in a for a in annotations)


def test_operator_shapes_are_there() -> None:
    secret_target = list(yaml.safe_load_all((EXAMPLES / "secret-target.yaml").read_text()))
    cluster_class = list(yaml.safe_load_all((EXAMPLES / "cluster-class.yaml").read_text()))

    render = next(d for d in secret_target if d["kind"] == "DynamicConfigRender")
    assert render["spec"]["target"]["secret"] == "billing-env"
    assert any(d["kind"] == "ClusterDynamicConfigClass" for d in cluster_class)


def test_namespace_gating_labels_the_namespace_its_pod_is_created_in() -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "namespace-gating.yaml").read_text()))
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    pod = next(d for d in docs if d["kind"] == "Pod")

    assert namespace["metadata"]["labels"] == {"dynamic-config.rs/injection": "enabled"}
    assert pod["metadata"]["namespace"] == namespace["metadata"]["name"]
    assert pod["metadata"]["annotations"]["dynamic-config.rs/inject"] == "true"


def test_watch_driven_is_a_push_store_with_a_resync_and_a_metrics_port() -> None:
    [annotations] = _annotations(EXAMPLES / "watch-driven.yaml")

    assert annotations["dynamic-config.rs/source"] == "etcd"
    assert annotations["dynamic-config.rs/watch-seconds"] == "300"
    assert annotations["dynamic-config.rs/metrics-port"] != "0"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_example_passes_webhook_validate(path: Path, tmp_path: Path) -> None:
    if not WEBHOOK.exists():
        pytest.skip("dynamic-config-webhook is not installed in this environment")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}
    env["DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"] = str(tmp_path / "no-installation.yaml")

    result = subprocess.run(
        [str(WEBHOOK), "validate", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    if any("dynamic-config.rs/inject" in a for a in _annotations(path)):
        assert "allowed, and an agent would be injected" in result.stdout, result.stdout


def test_quick_start_document_is_left_as_it_is() -> None:
    document = yaml.safe_load((EXAMPLES / QUICK_START).read_text())

    assert document["app"]["name"] == "billing"
