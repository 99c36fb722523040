"""``dynamic-config-webhook validate``: the book's manifests, exit codes and the same reasons."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.validate import run_validate

REPO = Path(__file__).resolve().parents[4]
BOOK = sorted((REPO / "tests" / "book_manifests").glob("book-*.yaml"))
BOOK_INSTALLATION = {
    # The book's minimal pod ("a single line of intent") leans on these.
    "DYNAMIC_CONFIG_AGENT_SOURCE": "consul",
    "DYNAMIC_CONFIG_AGENT_PATH": "/config/rendered.toml",
    "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "consul: endpoint=http://consul.infra.svc:8500, key=myapp/config.json",
}
REFUSED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "annotations": {
            "dynamic-config.rs/inject": "true",
            "dynamic-config.rs/source": "vault",
            "dynamic-config.rs/endpoint": "https://vault:8200",
            "dynamic-config.rs/key": "secret/app",
            "dynamic-config.rs/path": "/config/app.yaml",
            "dynamic-config.rs/auth": "kubernetes",
        },
    },
    "spec": {"containers": [{"name": "app", "image": "a"}]},
}
GOOD_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "g"},
    "spec": {"containers": [{"name": "app", "image": "a"}]},
}
NEEDS_A_CLASS = {"book-02113.yaml"}
BOOK_CLASSES = Path(__file__).parent / "cases" / "book-classes.yaml"
"""The book's DynamicConfigClass, in namespace ``billing``."""


def _uses_class(path: Path) -> bool:
    return "dynamic-config.rs/class" in path.read_text()


@pytest.mark.parametrize("path", BOOK, ids=[p.name for p in BOOK])
def test_book_manifest_passes_validate(path):
    out, err = io.StringIO(), io.StringIO()
    if _uses_class(path):
        code = run_validate(
            [str(path)], parse_installation({}), out, err,
            class_files=[str(BOOK_CLASSES)], namespace="billing",
        )  # fmt: skip
    else:
        code = run_validate([str(path)], parse_installation(BOOK_INSTALLATION), out, err)
    assert code == 0, err.getvalue()
    assert "an agent would be injected" in out.getvalue()


def test_class_manifests_are_the_known_ones():
    assert {p.name for p in BOOK if _uses_class(p)} == NEEDS_A_CLASS


def test_cli_takes_the_class_from_a_file_and_judges_in_the_given_namespace():
    [book_pod] = [p for p in BOOK if p.name in NEEDS_A_CLASS]
    elsewhere = _cli("--classes", str(BOOK_CLASSES), "--namespace", "team-a", str(book_pod))
    assert elsewhere.returncode == 1
    assert "refused (DynamicConfigPolicy)" in elsewhere.stderr
    assert 'names "infra-consul"' in elsewhere.stderr
    result = _cli("--classes", str(BOOK_CLASSES), "--namespace", "billing", str(book_pod))
    assert result.returncode == 0, result.stderr
    assert "an agent would be injected" in result.stdout


def test_class_in_the_validated_file_itself_is_used(tmp_path):
    [book_pod] = [p for p in BOOK if p.name in NEEDS_A_CLASS]
    both = tmp_path / "both.yaml"
    both.write_text(BOOK_CLASSES.read_text() + "---\n" + book_pod.read_text())
    result = _cli("--namespace", "billing", str(both))
    assert result.returncode == 0, result.stderr


def _cli(*args, env=None, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "dynconf_k8s.webhook.main", "validate", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_cli_reports_refusal_with_admission_reason_and_nonzero_exit(tmp_path):
    good = tmp_path / "good.yaml"
    bad = tmp_path / "bad.json"
    pod = REFUSED_POD

    bad.write_text(json.dumps(pod))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"metadata": {"annotations": {}}, "spec": pod["spec"]}},
    }
    good.write_text(
        yaml.safe_dump_all([deployment, {"kind": "ConfigMap", "metadata": {"name": "c"}}])
    )
    result = _cli(str(good), str(bad))
    assert result.returncode == 1
    assert f"{good}: allowed — nothing to inject" in result.stdout
    assert f"{bad}: refused (DynamicConfigMalformed)\n  " in result.stderr
    assert "dynamic-config.rs/auth-role" in result.stderr
    assert "1 of 2 manifests would be refused" in result.stderr


def test_cli_without_files_prints_usage():
    result = _cli()
    assert result.returncode != 0
    assert "usage: dynamic-config-webhook validate <pod.yaml>..." in result.stderr


def test_cli_refuses_a_mistyped_installation(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b}]}\n")
    result = _cli(str(path), env={"DYNAMIC_CONFIG_AGENT_FILE_MODE": "888"})
    assert result.returncode == 1
    assert "DYNAMIC_CONFIG_AGENT_FILE_MODE is not octal" in result.stderr


def test_cronjob_is_judged_through_its_template(tmp_path):
    from dynconf_k8s.webhook.validate import pods_in

    cron = {
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
    }
    assert [label for label, _ in pods_in(cron)] == ["CronJob/c"]


# ---------------------------------------------------------------------------- stdin
# ``validate -`` judges the manifest piped on stdin, as the chart's NOTES print it
# (``kubectl exec -i … -- dynamic-config-webhook validate - < pod.yaml``).
def test_a_refused_pod_on_stdin_exits_1_with_the_admission_reason() -> None:
    result = _cli("-", stdin=yaml.safe_dump(REFUSED_POD))
    assert result.returncode == 1, result.stdout
    assert "-: refused (DynamicConfigMalformed)" in result.stderr
    assert "dynamic-config.rs/auth-role" in result.stderr


def test_a_good_pod_on_stdin_exits_0() -> None:
    result = _cli("-", stdin=json.dumps(GOOD_POD))
    assert result.returncode == 0, result.stderr
    assert "-: allowed — nothing to inject" in result.stdout


def test_stdin_and_files_are_judged_together(tmp_path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(GOOD_POD))
    out, err = io.StringIO(), io.StringIO()
    code = run_validate(
        [str(good), "-"], parse_installation({}), out, err,
        stdin=io.StringIO(yaml.safe_dump(REFUSED_POD)),
    )  # fmt: skip
    assert code == 1
    assert f"{good}: allowed" in out.getvalue()
    assert "1 of 2 manifests would be refused" in err.getvalue()
