"""The manifest check NOTES.txt prints works as printed: ``kubectl exec`` passes stdin only
with ``-i``, and the webhook reads it from ``-``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tests.chart.test_chart_render import _notes

REFUSED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "annotations": {"dynamic-config.rs/inject": "true",
                                              "dynamic-config.rs/source": "no-such-store"}},
    "spec": {"containers": [{"name": "app", "image": "a"}]},
}  # fmt: skip


def _validate_line(helm_bin: Path, tmp_path: Path) -> list[str]:
    notes = _notes(helm_bin, tmp_path, "dynamic-config")
    [line] = [ln for ln in notes.splitlines() if "dynamic-config-webhook validate" in ln]
    return shlex.split(line)


def test_notes_check_passes_stdin_to_the_webhook(helm_bin: Path, tmp_path: Path) -> None:
    argv = _validate_line(helm_bin, tmp_path)
    split = argv.index("--")
    kubectl, remote = argv[:split], argv[split + 1 :]
    assert kubectl[0] == "kubectl" and "exec" in kubectl
    assert "-i" in kubectl[kubectl.index("exec") :], "without -i kubectl exec sends no stdin"
    assert remote[:3] == ["dynamic-config-webhook", "validate", "-"]
    assert remote[3:] == ["<", "pod.yaml"]


def test_the_printed_command_refuses_the_piped_pod(helm_bin: Path, tmp_path: Path) -> None:
    argv = _validate_line(helm_bin, tmp_path)
    remote = argv[argv.index("--") + 1 : argv.index("<")]
    script = Path(sys.executable).parent / remote[0]
    result = subprocess.run(
        [str(script), *remote[1:]], input=yaml.safe_dump(REFUSED_POD),
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    assert "-: refused" in result.stderr
