"""The book's troubleshooting line works on our agent's log: an agent present and a file absent
is an agent failing, and ``jq -r '.fields.error // .fields.message'`` says why."""

from __future__ import annotations

from pathlib import Path

from tests.observability.test_log_filter import _run


def test_the_books_one_liner_prints_a_failing_agents_reason(tmp_path: Path) -> None:
    code, lines, _ = _run(
        "dynamic-config-agent", "--source", "file", "--endpoint", str(tmp_path),
        "--key", "missing.json", "--out", str(tmp_path / "app.json"), RUST_LOG="info",
    )  # fmt: skip
    assert code == 1
    said = [line["fields"].get("error") or line["fields"]["message"] for line in lines]
    assert said[0] == "agent starting"
    assert "the document is not in the store" in said[-1]
    assert all(line["fields"]["message"] == line["event"] for line in lines)
