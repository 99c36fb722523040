"""Every ```python block in the docs runs, as written, and does what its page says.

A block is extracted from ``docs/*.md``, ``README.md`` and ``packages/*/README.md`` and run
in a fresh interpreter, in an empty temporary directory, with ``REPO`` in its environment.
What a block needs that the page leaves to the reader (a file it reads, a name it calls, a
check of what it promised) is declared right above it, in an HTML comment the rendered page
does not show — a YAML mapping after ``docs-test``:

    <!-- docs-test
    files:                      # written into the directory first
      config.toml: |
        [app]
        name = "billing"
    prelude: |                  # python run before the block, in the same namespace
      def serve(port): assert port() == 5432
    after: |                    # python run after it: the page's promise, checked
      assert pool.sizes == [6543]
    -->

or ``<!-- docs-test not run: <reason> -->`` for a block that needs a real cluster or store;
such a block is still compiled, so it is at least valid Python. Keep those rare and say why.
A block with no comment runs on its own.

The book-manifest extraction (``scripts/extract_book_manifests.py``) finds YAML manifests in
the book's prose; Markdown fences need none of its heuristics, so the extraction here is a
dozen lines of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("packages/*/README.md")])
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARKER = "docs-test"
NOT_RUN = re.compile(r"\A\s*not run:\s*(\S.*?)\s*\Z", re.DOTALL)
TIMEOUT = 60.0


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    files: dict[str, str] = field(default_factory=dict)
    prelude: str = ""
    after: str = ""
    not_run: str | None = None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _fixture(page: Path, line: int, before: str) -> dict[str, Any]:
    tail = before.rstrip()
    opened = tail.rfind("<!--")
    if not tail.endswith("-->") or opened < 0:
        return {}
    comment = tail[opened + len("<!--") : -len("-->")].strip()
    if not comment.startswith(MARKER):
        return {}
    body = comment[len(MARKER) :]
    skipped = NOT_RUN.match(body)
    if skipped is not None:
        return {"not_run": skipped.group(1)}
    loaded = yaml.safe_load(body) or {}
    unknown = set(loaded) - {"files", "prelude", "after"}
    assert isinstance(loaded, dict) and not unknown, (
        f"{page.relative_to(REPO)}:{line}: a docs-test comment holds files, prelude and after "
        f"only (not {sorted(unknown)})"
    )
    return loaded


def blocks() -> list[Block]:
    found: list[Block] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            fixture = _fixture(page, line, text[: match.start()])
            found.append(Block(page, line, match.group(1), **fixture))
    return found


BLOCKS = blocks()


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_docs_python_block_runs(block: Block, tmp_path: Path) -> None:
    compile(block.code, block.name, "exec")
    if block.not_run is not None:
        pytest.skip(f"not run: {block.not_run}")
    for name, content in block.files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    program = "\n".join(
        f"exec(compile({part!r}, {f'{block.name} ({what})'!r}, 'exec'))"
        for what, part in (
            ("prelude", block.prelude),
            ("block", block.code),
            ("after", block.after),
        )
        if part
    )
    env = {**os.environ, "REPO": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, f"{block.name} failed:\n{result.stderr[-4000:]}"
