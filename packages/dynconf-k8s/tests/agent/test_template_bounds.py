"""A template that would hang or exhaust memory is one failed render in the real agent.

The agent keeps serving, keeps the last good file, says which limit in one log line with no
document value, and its peak resident memory stays under the injected container's default
64 MiB limit while it refuses the worst payloads one after another.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .conftest import AgentProcess, wait_file

Start = Callable[..., AgentProcess]
SECRET = "s3cr3t-value-never-shown"
AGENT_MEMORY_LIMIT = 64 * 1024 * 1024
PAYLOADS = [
    "{{ 'a' * 2**28 }}",
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "{{ db.port ** db.port ** db.port }}",
    "{{ 'x' | indent(10**9) }}",
    "{{ lipsum(10**6) }}",
    "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
    "{{ 'x' | truncate(**{db.password: 1}) }}",
    "".join(f"{{% for a{i} in [1] %}}" for i in range(21)) + "{% endfor %}" * 21,
]


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text("ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_template_payloads_are_failed_renders_within_the_agent_memory_limit(
    agent: Start, tmp_path: Path
) -> None:
    document = tmp_path / "store" / "app.yaml"
    document.parent.mkdir()
    document.write_text(f"db:\n  host: db-1\n  port: 5432\n  password: {SECRET}\n")
    template = tmp_path / "app.env.tpl"
    template.write_text("DB={{ db.host }}\n")
    target = tmp_path / "config" / "app.env"
    target.parent.mkdir()
    process = agent(
        "--source",
        "file",
        "--key",
        str(document),
        "--out",
        str(target),
        "--template",
        str(template),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
    )
    wait_file(target, lambda text: text == "DB=db-1\n")
    for count, payload in enumerate(PAYLOADS, 1):
        # replaced, not rewritten in place: a render must never see a half-written template
        # (an empty one renders an empty file, legitimately), as a ConfigMap swap ensures
        staged = template.with_name(".staged.tpl")
        staged.write_text(payload)
        staged.replace(template)
        document.write_text(f"db:\n  host: db-{count + 1}\n  port: 5432\n  password: {SECRET}\n")
        process.wait_metric("render_failures_total", lambda v, c=count: v >= c, timeout=30)
        assert target.read_text() == "DB=db-1\n"
    assert process.get("/healthz") == (200, "ok\n")
    peak = _peak_rss(process.proc.pid)
    assert peak < AGENT_MEMORY_LIMIT, f"the agent peaked at {peak / 2**20:.1f} MiB"
    reasons = [line["reason"] for line in process.events("render_failed")]
    assert len(reasons) >= len(PAYLOADS)
    assert all("template" in reason for reason in reasons)
    assert not any(SECRET in line for line in process.raw)
