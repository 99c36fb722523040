"""The book's operator flow against the real API server, with the embedded ``file`` store."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.types import CLASS_KIND, CLUSTER_CLASS_KIND, FIELD_MANAGER, RENDER_KIND

Kube = Any


def write_doc(root: Path, document: dict[str, Any]) -> None:
    path = root / "app" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # published whole (write, then rename), as a config file should be: a truncating write can
    # be read half-done by the operator, which then reports a render failure for a document
    # that was never meant to exist
    partial = path.with_name(".config.json.partial")
    partial.write_text(json.dumps(document))
    partial.replace(path)


def file_class(kube: Kube, namespace: str, root: Path, name: str = "files") -> None:
    kube.create(CLASS_KIND, namespace, name, {"source": "file", "endpoint": str(root)})


def render(kube: Kube, namespace: str, name: str, target: dict[str, Any], **spec: Any) -> None:
    body = {"class": "files", "key": "app/config.json", "intervalSeconds": 1, "target": target}
    body.update(spec)
    kube.create(RENDER_KIND, namespace, name, body)


def has_data(key: str, needle: str) -> Any:
    return lambda item: needle in ((item.get("data") or {}).get(key) or "")


def secret_data(item: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (item.get("data") or {}).items()}


def wait_renders(operator: Operator, more_than: float, timeout: float = 20.0) -> None:
    """Wait for the in-process counter (no API event exists for "rendered, nothing written")."""
    deadline = time.monotonic() + timeout
    while operator.metrics.renders._value.get() <= more_than:
        assert time.monotonic() < deadline, "the operator stopped reconciling"
        time.sleep(0.05)


def test_render_publishes_the_rendered_file_into_a_configmap(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    write_doc(tmp_path, {"host": "db.internal", "port": 9000})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "billing", {"configMap": "billing-rendered", "file": "config.toml"})

    configmap = kube.await_configmap(
        namespace, "billing-rendered", has_data("config.toml", "port = 9000")
    )
    status = kube.await_render(namespace, "billing", kube.ready("Rendered"))["status"]
    assert status["renderedAt"].endswith("Z") and "T" in status["renderedAt"]
    assert status["observedGeneration"] == 1
    assert "lastError" not in status
    condition = status["conditions"][0]
    assert condition["message"] == "the target carries the store's current document"
    owners = configmap["metadata"]["ownerReferences"]
    assert owners == [
        {
            "apiVersion": "dynamic-config.rs/v1alpha1",
            "kind": "DynamicConfigRender",
            "name": "billing",
            "uid": owners[0]["uid"],
            "controller": True,
        }
    ]
    managers = {entry["manager"] for entry in configmap["metadata"]["managedFields"]}
    assert managers == {FIELD_MANAGER}
    event = kube.await_event(namespace, "billing", "Rendered")
    assert event["type"] == "Normal"
    assert event["message"] == "the target now carries the store's document"
    assert [e["reason"] for e in kube.events(namespace, "billing")] == ["Rendered"]


def test_store_change_updates_the_configmap_within_the_interval(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    write_doc(tmp_path, {"port": 9000})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "r", {"configMap": "out", "file": "config.toml"})
    kube.await_configmap(namespace, "out", has_data("config.toml", "port = 9000"))
    write_doc(tmp_path, {"port": 9100})
    kube.await_configmap(namespace, "out", has_data("config.toml", "port = 9100"), timeout=10)


def test_unchanged_document_writes_nothing(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    write_doc(tmp_path, {"port": 9000})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "r", {"configMap": "out", "file": "config.json"})
    configmap = kube.await_configmap(namespace, "out", has_data("config.json", "9000"))
    settled = kube.await_render(namespace, "r", kube.ready("Rendered"))
    kube.await_event(namespace, "r", "Rendered")
    before = operator.metrics.renders._value.get()
    wait_renders(operator, before + 3)  # three more reconciles at a 1 s interval

    again = kube.core.read_namespaced_config_map("out", namespace)
    assert again.metadata.resource_version == configmap["metadata"]["resourceVersion"]
    now = kube.await_render(namespace, "r", kube.ready("Rendered"))
    assert now["metadata"]["resourceVersion"] == settled["metadata"]["resourceVersion"]
    assert [e["reason"] for e in kube.events(namespace, "r")] == ["Rendered"]


def test_a_write_whose_status_was_refused_is_recorded_once_the_status_can_be_written(
    status_grant: Any, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    operator = Operator(status_grant.api, identity="test-status", workers=1)
    operator.start()
    try:
        write_doc(tmp_path, {"port": 9000})
        file_class(kube, namespace, tmp_path)
        render(kube, namespace, "r", {"configMap": "out", "file": "config.toml"})
        kube.await_configmap(namespace, "out", has_data("config.toml", "port = 9000"))
        first = kube.await_render(namespace, "r", kube.ready("Rendered"))["status"]

        status_grant.revoke()
        failures = operator.metrics.reconcile_failures._value.get()
        time.sleep(1.1)  # renderedAt counts whole seconds
        write_doc(tmp_path, {"port": 9100})
        kube.await_configmap(namespace, "out", has_data("config.toml", "port = 9100"), timeout=10)
        deadline = time.monotonic() + 15
        while operator.metrics.reconcile_failures._value.get() <= failures:
            assert time.monotonic() < deadline, "the refused status write was not counted"
            time.sleep(0.1)

        status_grant.grant()
        # the next attempt finds the target current; the status must still record the write
        now = kube.await_render(
            namespace, "r", lambda item: item["status"]["renderedAt"] != first["renderedAt"]
        )["status"]
        assert now["renderedAt"] > first["renderedAt"]
        assert [e["reason"] for e in kube.events(namespace, "r")] == ["Rendered", "Rendered"]
    finally:
        status_grant.grant()
        operator.stop()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            {"secret": "s", "file": "app.properties"},
            {"app.properties": "db.pool_size = 5\ndb.host = h\nname = x\n"},
        ),
        (
            {"secret": "s", "shape": "envEntries"},
            {"DB_POOL_SIZE": "5", "DB_HOST": "h", "NAME": "x", "TAGS": '["a",1]', "OFF": ""},
        ),
        (
            {"secret": "s", "shape": "entries"},
            {"db.pool_size": "5", "db.host": "h", "name": "x", "tags": '["a",1]', "off": ""},
        ),
    ],
    ids=["file", "envEntries", "entries"],
)
def test_secret_target_carries_each_shape(
    operator: Operator,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    target: dict[str, Any],
    expected: dict[str, str],
) -> None:
    document: dict[str, Any] = {"db": {"pool_size": 5, "host": "h"}, "name": "x"}
    if "shape" in target:
        document.update({"tags": ["a", 1], "off": None})
    write_doc(tmp_path, document)
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "r", target)
    secret = kube.await_secret(namespace, "s", lambda item: bool(item.get("data")))
    assert secret["type"] == "Opaque"
    data = secret_data(secret)
    if "file" in target:
        assert data.keys() == expected.keys()
        assert "pool_size = 5" in data["app.properties"]
    else:
        assert data == expected


def test_class_edit_rerenders_every_render_that_references_it(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    write_doc(first, {"port": 1})
    write_doc(second, {"port": 2})
    file_class(kube, namespace, first)
    for name in ("a", "b"):
        render(
            kube,
            namespace,
            name,
            {"configMap": f"out-{name}", "file": "c.toml"},
            intervalSeconds=3600,
        )
    for name in ("a", "b"):
        kube.await_configmap(namespace, f"out-{name}", has_data("c.toml", "port = 1"))
    kube.patch_spec(CLASS_KIND, namespace, "files", {"endpoint": str(second)})
    for name in ("a", "b"):
        kube.await_configmap(namespace, f"out-{name}", has_data("c.toml", "port = 2"), timeout=10)


def test_cluster_class_renders_in_an_allowed_namespace_and_refuses_another(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path, kube_client: Any
) -> None:
    from kubernetes import client  # type: ignore[import-untyped]

    other = f"{namespace}-x"
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)))
    cluster_name = f"platform-{namespace}"
    write_doc(tmp_path, {"port": 9000})
    kube.create(
        CLUSTER_CLASS_KIND,
        None,
        cluster_name,
        {"source": "file", "endpoint": str(tmp_path), "namespaces": [namespace]},
    )
    try:
        spec = {"class": cluster_name, "classKind": CLUSTER_CLASS_KIND}
        render(kube, namespace, "r", {"configMap": "out", "file": "c.toml"}, **spec)
        render(kube, other, "r", {"configMap": "out", "file": "c.toml"}, **spec)
        kube.await_configmap(namespace, "out", has_data("c.toml", "port = 9000"))
        refused = kube.await_render(other, "r", kube.ready("ClassNotAllowed", "False"))
        assert "does not allow namespace" in refused["status"]["lastError"]
        assert "renderedAt" not in refused["status"]
        with pytest.raises(ApiException) as missing:
            kube.core.read_namespaced_config_map("out", other)
        assert missing.value.status == 404
        kube.await_event(other, "r", "RenderFailed")
        # widening the allowlist is a class edit: the refused Render renders at once
        kube.patch_spec(CLUSTER_CLASS_KIND, None, cluster_name, {"namespaces": [namespace, other]})
        kube.await_configmap(other, "out", has_data("c.toml", "port = 9000"), timeout=10)
        kube.await_render(other, "r", kube.ready("Rendered"))
    finally:
        kube.custom.delete_cluster_custom_object(
            "dynamic-config.rs", "v1alpha1", "clusterdynamicconfigclasses", cluster_name
        )
        kube.core.delete_namespace(other)


def test_missing_class_is_class_not_found(operator: Operator, kube: Kube, namespace: str) -> None:
    render(kube, namespace, "r", {"configMap": "out", "file": "c.toml"}, **{"class": "nope"})
    refused = kube.await_render(namespace, "r", kube.ready("ClassNotFound", "False"))
    assert 'class "nope" does not exist here' in refused["status"]["lastError"]


@pytest.mark.parametrize(
    ("target", "sentence"),
    [
        ({"configMap": "a", "secret": "b", "file": "c.toml"}, "one document, one destination"),
        ({"file": "c.toml"}, "target names neither configMap nor secret"),
        ({"configMap": "a"}, "the file shape needs target.file"),
    ],
    ids=["both", "neither", "file-without-file"],
)
def test_invalid_target_is_render_failed_with_the_fix(
    operator: Operator,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    target: dict[str, Any],
    sentence: str,
) -> None:
    write_doc(tmp_path, {"port": 1})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "r", target)
    refused = kube.await_render(namespace, "r", kube.ready("RenderFailed", "False"))
    assert sentence in refused["status"]["lastError"]


def test_store_failure_keeps_renderedat_and_names_no_value(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    write_doc(tmp_path, {"password": "hunter2"})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "r", {"configMap": "out", "file": "c.toml"})
    first = kube.await_render(namespace, "r", kube.ready("Rendered"))["status"]["renderedAt"]
    (tmp_path / "app" / "config.json").write_text('{"password": "hunter2",')
    failed = kube.await_render(namespace, "r", kube.ready("RenderFailed", "False"), timeout=10)
    assert failed["status"]["renderedAt"] == first
    assert failed["status"]["lastError"].startswith("parse: ")
    assert "hunter2" not in json.dumps(failed["status"])
    warning = kube.await_event(namespace, "r", "RenderFailed")
    assert warning["type"] == "Warning"
    assert "hunter2" not in warning["message"]


def test_delete_policy_garbage_collects_the_target(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path, kube_control_plane: Any
) -> None:
    write_doc(tmp_path, {"port": 1})
    file_class(kube, namespace, tmp_path)
    render(kube, namespace, "r", {"secret": "gone", "shape": "envEntries"})
    kube.await_secret(namespace, "gone", lambda item: bool(item.get("data")))
    kube.custom.delete_namespaced_custom_object(
        "dynamic-config.rs", "v1alpha1", namespace, "dynamicconfigrenders", "r"
    )
    if not kube_control_plane.controller_manager:
        pytest.skip("no kube-controller-manager: the owner reference is asserted elsewhere")
    kube.await_gone("Secret", namespace, "gone")


def test_retain_policy_keeps_the_target_without_an_owner(
    operator: Operator, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    write_doc(tmp_path, {"port": 1})
    file_class(kube, namespace, tmp_path)
    render(
        kube, namespace, "keep", {"configMap": "kept", "file": "c.toml", "deletionPolicy": "Retain"}
    )
    render(kube, namespace, "drop", {"configMap": "dropped", "file": "c.toml"})
    kept = kube.await_configmap(namespace, "kept", has_data("c.toml", "port = 1"))
    assert "ownerReferences" not in kept["metadata"]
    kube.await_configmap(namespace, "dropped", has_data("c.toml", "port = 1"))
    for name in ("keep", "drop"):
        kube.custom.delete_namespaced_custom_object(
            "dynamic-config.rs", "v1alpha1", namespace, "dynamicconfigrenders", name
        )
    # the owned one going away proves the collector ran; the retained one must still be there
    kube.await_gone("ConfigMap", namespace, "dropped")
    assert kube.core.read_namespaced_config_map("kept", namespace).data == kept["data"]
