"""Every console script ends an unexpected exception as one JSON line and exit 70.

Each case runs the installed console script's own ``main`` (loaded from its entry point, as
the generated script does) in a subprocess, after replacing one function that ``main``
calls with one that raises an exception whose text is a stand-in for a secret. The output
must be exactly one JSON line naming the program and the error's type and place, never its
text and never a traceback; the exit code is the wrapper's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from dynconf.logs import UNEXPECTED_EXIT

SECRET = "s3cr3t-value-in-the-message"

CASES = [
    # (console script, argv, "module:function" replaced by one that raises)
    ("dynamic-config-agent", [], "dynconf_k8s.agent.main:run"),
    ("dynamic-config-node-agent", [], "dynconf_k8s.node.main:run"),
    ("dynamic-config-operator", [], "dynconf_k8s.operator.main:run"),
    ("dynamic-config-webhook", ["validate", "pod.yaml"], "dynconf_k8s.webhook.validate:split_args"),
    ("dynamic-config-server", ["server.toml"],
     "dynconf_store_configserver.server.main:load_settings"),
    ("dynconf", ["plugins", "list"], "dynconf.cli:_cmd_plugins"),
]  # fmt: skip

PROBE = textwrap.dedent(
    """
    import importlib, sys
    from importlib.metadata import entry_points

    script, target, secret = sys.argv[1], sys.argv[2], sys.argv[3]
    (point,) = [e for e in entry_points(group="console_scripts") if e.name == script]
    main = point.load()
    module, _, name = target.partition(":")

    def boom(*args, **kwargs):
        raise RuntimeError(secret)

    setattr(importlib.import_module(module), name, boom)
    sys.argv = [script, *sys.argv[4:]]
    sys.exit(main())
    """
)


@pytest.mark.parametrize(("script", "argv", "target"), CASES, ids=[c[0] for c in CASES])
def test_unexpected_exception_is_one_json_line_and_exit_70(script, argv, target, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, script, target, SECRET, *argv],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == UNEXPECTED_EXIT, output
    assert "Traceback" not in output
    assert SECRET not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    line = json.loads(lines[0])
    assert line["event"] == "unexpected_error"
    assert line["program"] == script
    assert line["error_type"] == "RuntimeError"
    assert line["exit_code"] == UNEXPECTED_EXIT
    assert re.fullmatch(r".+:\d+", line["where"])  # file:line of the raise, nothing more


def test_a_dying_thread_is_one_json_line_not_a_traceback(tmp_path):
    probe = textwrap.dedent(
        f"""
        import threading
        from dynconf.logs import console_entry

        @console_entry("probe")
        def main():
            def work():
                raise ValueError({SECRET!r})
            thread = threading.Thread(target=work, name="worker")
            thread.start()
            thread.join()
            return 0

        raise SystemExit(main())
        """
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output and SECRET not in output
    (line,) = [json.loads(text) for text in output.splitlines() if text.strip()]
    assert (line["event"], line["thread_name"], line["error_type"]) == (
        "thread_failed",
        "worker",
        "ValueError",
    )
