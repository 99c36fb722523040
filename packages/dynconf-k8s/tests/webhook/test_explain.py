"""``dynamic-config-webhook explain``: each key's value, tier, pin and gate, from admission itself."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.contract.provenance import Provenance
from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.explain import explain_pod, run_explain
from dynconf_k8s.webhook.validate import read_documents

HERE = Path(__file__).parent
REPO = Path(__file__).resolve().parents[4]
BOOK = sorted((REPO / "tests" / "book_manifests").glob("book-*.yaml"))
BOOK_CLASSES = HERE / "cases" / "book-classes.yaml"
BOOK_INSTALLATION = {
    "DYNAMIC_CONFIG_AGENT_SOURCE": "consul",
    "DYNAMIC_CONFIG_AGENT_PATH": "/config/rendered.toml",
    "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": (
        "consul: endpoint=http://consul.infra.svc:8500, key=myapp/config.json"
    ),
}
REFUSALS = yaml.safe_load((HERE / "cases" / "refusals.yaml").read_text())
WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")


def _keys(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["key"]: entry for entry in report["keys"]}


def _explain(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_explain(args, parse_installation(env or {}), out, err)
    return code, out.getvalue(), err.getvalue()


def _write(tmp_path: Path, pod: dict[str, Any], name: str = "pod.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(pod))
    return str(path)


@pytest.mark.parametrize("path", BOOK, ids=[p.name for p in BOOK])
def test_book_manifest_is_explained_with_the_patch_admission_returns(path: Path) -> None:
    uses_class = "dynamic-config.rs/class" in path.read_text()
    env = {} if uses_class else BOOK_INSTALLATION
    extra = ["--classes", str(BOOK_CLASSES), "--namespace", "billing"] if uses_class else []

    code, out, err = _explain(["--output", "json", *extra, str(path)], env)

    assert code == 0, err
    [report] = json.loads(out)
    assert report["outcome"] == "patched"
    pod = next(p for d in read_documents(path) for p in _pods(d))
    request: dict[str, Any] = {"uid": "u", "object": pod}
    if uses_class:
        request["namespace"] = "billing"
        from dynconf_k8s.webhook.validate import classes_in

        classes = classes_in(read_documents(BOOK_CLASSES))
    else:
        classes = None
    patch = decide({"request": request}, parse_installation(env), classes).response["response"]
    added = [op["value"] for op in json.loads(base64.b64decode(patch["patch"]))
             if isinstance(op.get("value"), dict) and "args" in op["value"]]  # fmt: skip
    assert [a["container"] for a in report["injection"]["agents"]] == [a["name"] for a in added]
    assert [a["args"] for a in report["injection"]["agents"]] == [a["args"] for a in added]


def _pods(document: Any) -> list[Any]:
    from dynconf_k8s.webhook.validate import pods_in

    return [pod for _label, pod in pods_in(document)]


def test_book_minimal_pod_names_the_fleet_and_per_store_tiers() -> None:
    minimal = next(p for p in BOOK if "dynamic-config.rs/source" not in p.read_text())
    code, out, _ = _explain(["-o", "json", str(minimal)], BOOK_INSTALLATION)

    assert code == 0
    keys = _keys(json.loads(out)[0])
    assert keys["dynamic-config.rs/source"]["tier"] == "fleet"
    assert keys["dynamic-config.rs/source"]["from"] == (
        "agent.defaults.source (DYNAMIC_CONFIG_AGENT_SOURCE)"
    )
    assert keys["dynamic-config.rs/endpoint"]["tier"] == "per-store"
    assert keys["dynamic-config.rs/endpoint"]["from"] == (
        "agent.defaults.perStore.consul (DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS)"
    )
    assert keys["dynamic-config.rs/key"]["value"] == "myapp/config.json"


def test_each_tier_is_named_for_the_key_it_answered(pod_with) -> None:
    env = {
        "DYNAMIC_CONFIG_AGENT_MODE": "both",
        "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "consul: watch-seconds=30",
    }
    report = explain_pod(pod_with(drop=("mode",)), parse_installation(env))

    keys = _keys(report)
    assert keys["dynamic-config.rs/endpoint"]["tier"] == "annotation"
    assert keys["dynamic-config.rs/mode"]["tier"] == "fleet"
    assert keys["dynamic-config.rs/mode"]["value"] == "both"
    assert keys["dynamic-config.rs/watch-seconds"]["tier"] == "per-store"
    assert keys["dynamic-config.rs/watch-seconds"]["value"] == "30"
    assert keys["dynamic-config.rs/agent-cpu-request"]["tier"] == "built-in"
    assert keys["dynamic-config.rs/agent-cpu-request"]["default"] == "10m"
    assert keys["dynamic-config.rs/readiness"] == {**keys["dynamic-config.rs/readiness"],
                                                   "tier": "built-in", "value": "true"}  # fmt: skip
    watcher = report["injection"]["agents"][-1]
    assert watcher["args"][-2:] == ["--watch", "30"]


def test_a_pin_that_decided_a_value_says_so(pod_with) -> None:
    env = {"DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT": "96Mi!", "DYNAMIC_CONFIG_AGENT_MODE": "sidecar!"}
    report = explain_pod(pod_with(), parse_installation(env))

    keys = _keys(report)
    limit = keys["dynamic-config.rs/agent-memory-limit"]
    assert (limit["tier"], limit["value"], limit["pinned"], limit["decidedBy"]) == (
        "fleet", "96Mi", True, "pin",
    )  # fmt: skip
    mode = keys["dynamic-config.rs/mode"]
    assert (mode["tier"], mode["pinned"]) == ("annotation", True)  # restates the pin
    assert mode["from"] == "agent.defaults.mode (DYNAMIC_CONFIG_AGENT_MODE)"


def test_an_annotation_over_an_open_default_names_what_it_overrode(pod_with) -> None:
    env = {"DYNAMIC_CONFIG_AGENT_MODE": "both?"}
    report = explain_pod(pod_with(), parse_installation(env))

    mode = _keys(report)["dynamic-config.rs/mode"]
    assert (mode["tier"], mode["value"], mode["pinned"]) == ("annotation", "sidecar", False)
    assert mode["overrides"] == "agent.defaults.mode (DYNAMIC_CONFIG_AGENT_MODE)"


def test_a_store_memory_floor_is_a_built_in_with_its_reason(pod_with) -> None:
    pod = pod_with({"source": "s3", "endpoint": "https://s3.example", "key": "b/k.json"})
    report = explain_pod(pod, parse_installation({}))

    limit = _keys(report)["dynamic-config.rs/agent-memory-limit"]
    assert (limit["tier"], limit["value"], limit["note"]) == ("built-in", "96Mi", "the s3 floor")


def test_gates_that_judged_the_pod_are_listed(pod_with) -> None:
    env = {
        "DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW": "default: consul",
        "DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW": "LOG_LEVEL",
    }
    report = explain_pod(
        pod_with({"agent-env": "LOG_LEVEL=debug"}), parse_installation(env), namespace="default"
    )

    keys = _keys(report)
    assert keys["dynamic-config.rs/source"]["gates"] == [
        {"gate": "webhook.sourceAllow", "admitted": True}
    ]
    assert keys["dynamic-config.rs/source"]["decidedBy"] == "gate"
    assert keys["dynamic-config.rs/agent-env"]["gates"] == [
        {"gate": "webhook.agentEnvAllow", "admitted": True, "name": "LOG_LEVEL"}
    ]


def test_a_gate_refusal_is_shown_as_kubectl_prints_it(pod_with, tmp_path: Path) -> None:
    path = _write(tmp_path, pod_with())
    env = {"DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY": "*: consul"}

    code, out, _ = _explain([path], env)

    assert code == 1
    assert f"{path}: refused" in out
    assert (
        f'Error from server (DynamicConfigPolicy): error when creating "{path}": admission '
        'webhook "inject.dynamic-config.rs" denied the request: dynamic-config.rs/source is '
        '"consul", which webhook.sourceDeny'
    ) in out
    assert "webhook.sourceDeny refuses" in out


def test_a_pinned_refusal_keeps_its_reason_and_message(pod_with) -> None:
    env = {"DYNAMIC_CONFIG_AGENT_MODE": "both!"}
    report = explain_pod(pod_with(), parse_installation(env), filename="app.yaml")

    refusal = report["refusal"]
    assert refusal["reason"] == "DynamicConfigPinned"
    assert refusal["code"] == 400
    assert refusal["kubectl"].startswith(
        'Error from server (DynamicConfigPinned): error when creating "app.yaml": '
    )
    assert report["injection"] is None


def test_a_class_that_filled_keys_is_their_tier(tmp_path: Path) -> None:
    [book_pod] = [p for p in BOOK if "dynamic-config.rs/class" in p.read_text()]
    code, out, err = _explain(
        ["-o", "json", "--classes", str(BOOK_CLASSES), "-n", "billing", str(book_pod)]
    )

    assert code == 0, err
    keys = _keys(json.loads(out)[0])
    assert keys["dynamic-config.rs/source"]["tier"] == "class"
    assert keys["dynamic-config.rs/source"]["from"] == 'the class "infra-consul"'


@pytest.mark.parametrize("case", REFUSALS, ids=[c["name"] for c in REFUSALS])
def test_provenance_never_changes_the_decision(case, pod_with) -> None:
    pod = pod_with(case.get("set"), drop=tuple(case.get("drop", ())), **case.get("spec", {}))
    installation = parse_installation(case.get("env") or {})
    review = {"request": {"uid": "u", "namespace": case.get("namespace", "default"), "object": pod}}

    plain = decide(review, installation).response
    recorded = decide(review, installation, None, Provenance()).response

    assert recorded == plain
    report = explain_pod(pod, installation, namespace=case.get("namespace", "default"))
    assert report["refusal"]["message"] == plain["response"]["status"]["message"]


def test_no_credential_reaches_the_report(pod_with, tmp_path: Path) -> None:
    admitted = pod_with({"agent-env": "LOG_TOKEN=opensesame", "token-secret": "consul-token/token"})
    refused = pod_with({"endpoint": "http://app:hunter2@consul:8500"})
    env = {
        "DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW": "LOG_*",
        "DYNAMIC_CONFIG_AGENT_ENV": "FLEET_KEY=sesame2",
    }
    paths = [_write(tmp_path, admitted, "a.yaml"), _write(tmp_path, refused, "r.yaml")]

    for output in ("text", "json"):
        code, out, _ = _explain(["--output", output, *paths], env)
        assert code == 1, out
        for secret in ("hunter2", "opensesame", "sesame2"):
            assert secret not in out, (output, secret)
    assert "http://app:…@consul:8500" in out
    assert "secret consul-token/token" in out
    assert "LOG_TOKEN=(hidden)" in out


def test_an_unannotated_pod_is_explained_as_untouched(make_pod, tmp_path: Path) -> None:
    code, out, _ = _explain([_write(tmp_path, make_pod(None))])

    assert code == 0
    assert "admitted untouched — nothing to inject" in out


def test_text_lists_keys_then_containers_volumes_and_flags(pod_with, tmp_path: Path) -> None:
    code, out, _ = _explain([_write(tmp_path, pod_with({"mode": "both"}))])

    assert code == 0
    lines = out.splitlines()
    assert lines[0].endswith("admitted, and the webhook would inject:")
    assert any(line.split()[:2] == ["dynamic-config.rs/mode", '"both"'] for line in lines)
    assert "  dynamic-config-init (init, in initContainers): " in out
    assert "  dynamic-config-agent (watching, in containers): " in out
    assert "    flags: --source consul --endpoint http://consul:8500 --key myapp/config.json" in out
    assert "  volumes added: dynamic-config" in out
    assert "  container app mounts /config" in out


def test_bad_arguments_print_the_usage() -> None:
    code, _, err = _explain(["--output", "xml", "pod.yaml"])
    assert code == 2
    assert "usage: dynamic-config-webhook explain" in err
    assert _explain([])[0] == 2


@pytest.mark.skipif(not WEBHOOK.exists(), reason="the console script is not installed")
def test_console_script_reads_the_installation_the_way_serve_does(pod_with, tmp_path: Path) -> None:
    document = tmp_path / "installation.yaml"
    document.write_text("mode: both!\n")
    path = _write(tmp_path, pod_with(drop=("mode",)))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}
    env = {**clean, "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(document)}

    result = subprocess.run(
        [str(WEBHOOK), "explain", "-o", "json", path],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    mode = _keys(json.loads(result.stdout)[0])["dynamic-config.rs/mode"]
    assert (mode["tier"], mode["value"], mode["pinned"]) == ("fleet", "both", True)
