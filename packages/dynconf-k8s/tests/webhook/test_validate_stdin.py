"""``dynamic-config-webhook validate -`` judges the manifest piped on stdin, as the chart's
NOTES print it (``kubectl exec -i … -- dynamic-config-webhook validate - < pod.yaml``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import yaml

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.validate import run_validate

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


def _validate_stdin(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dynconf_k8s.webhook.main", "validate", "-"],
        input=text, capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip


def test_a_refused_pod_on_stdin_exits_1_with_the_admission_reason() -> None:
    result = _validate_stdin(yaml.safe_dump(REFUSED_POD))
    assert result.returncode == 1, result.stdout
    assert "-: refused (DynamicConfigMalformed)" in result.stderr
    assert "dynamic-config.rs/auth-role" in result.stderr


def test_a_good_pod_on_stdin_exits_0() -> None:
    result = _validate_stdin(json.dumps(GOOD_POD))
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
