"""Bad input: one line on stderr naming the file/path/field and the fix, exit 1, no traceback,
no document value, and the previously published file untouched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "s3cr3t-value-never-shown"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dynconf.cli", *args], capture_output=True, text=True
    )


def assert_one_line_refusal(result: subprocess.CompletedProcess[str], *names: str) -> None:
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert SECRET not in result.stderr and SECRET not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])


@pytest.fixture
def published(tmp_path: Path) -> tuple[Path, Path, bytes]:
    doc = tmp_path / "app.json"
    doc.write_text(f'{{"app": {{"port": 8080, "token": "{SECRET}"}}}}', encoding="utf-8")
    out = tmp_path / "out.json"
    assert run("render", "--key", str(doc), "--out", str(out)).returncode == 0
    return doc, out, out.read_bytes()


def test_template_typo_names_the_line_and_keeps_the_file(
    published: tuple[Path, Path, bytes],
) -> None:
    doc, out, good = published
    result = run(
        "render",
        "--key",
        str(doc),
        "--out",
        str(out),
        "--template-inline",
        "port={{ app.prot }}\n",
    )
    assert_one_line_refusal(result, "prot")
    assert out.read_bytes() == good


def test_schema_violation_names_the_path_and_rule_and_keeps_the_file(
    published: tuple[Path, Path, bytes], tmp_path: Path
) -> None:
    doc, out, good = published
    schema = tmp_path / "schema.json"
    schema.write_text(
        '{"type": "object", "properties": {"app": {"type": "object", "properties": '
        '{"token": {"type": "integer"}}}}}',
        encoding="utf-8",
    )
    result = run("render", "--key", str(doc), "--out", str(out), "--schema", str(schema))
    assert_one_line_refusal(result, "token", "type")
    assert out.read_bytes() == good


def test_unreadable_document_names_the_file(tmp_path: Path) -> None:
    directory = tmp_path / "app.json"
    directory.mkdir()
    result = run("render", "--key", str(directory), "--out", str(tmp_path / "o.json"))
    assert_one_line_refusal(result, "app.json")


def test_non_utf8_secret_file_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[app]\na = 1\n", encoding="utf-8")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "password").write_bytes(b"\xff\xfe" + SECRET.encode())
    spec = tmp_path / "spec.json"
    spec.write_text('{"key": "app", "secrets_dir": "secrets"}', encoding="utf-8")
    assert_one_line_refusal(run("resolve", str(spec)), "password")


def test_malformed_toml_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(f'[app]\ntoken = "{SECRET}\n', encoding="utf-8")
    spec = tmp_path / "spec.json"
    spec.write_text('{"key": "app"}', encoding="utf-8")
    assert_one_line_refusal(run("resolve", str(spec)), "config.toml", "line 2")


def test_unknown_spec_field_lists_the_known_ones(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text('{"key": "app", "env_prefx": "APP_"}', encoding="utf-8")
    assert_one_line_refusal(run("resolve", str(spec)), "env_prefx", "env_prefix")
