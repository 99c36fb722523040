"""Every ```python and ```console block in the docs runs, as written, and does what its
page says.

A block is extracted from ``docs/*.md`` (the library pages ``docs/library*.md`` among them),
``README.md`` and ``packages/*/README.md`` and run in a fresh interpreter, in an empty
temporary directory, with ``REPO`` in its environment; a failure is named ``page:line``.
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

A block that talks to a store names the test servers it needs (``servers: [consul]``: the
session fixture ``<name>_server`` starts it) and ``replace``s the page's canonical addresses
with theirs (``replace: {"http://127.0.0.1:8500": consul.url}``: the text is swapped for that
fixture attribute in the prelude, the block and the check before they run, so the page keeps
the address a reader would write; a value that names no server is the literal text, e.g. a
file of ``files`` standing in for a mounted token).

Or ``<!-- docs-test not run: <reason> -->`` for a block that needs a real cluster;
such a block is still compiled, so it is at least valid Python. Keep those rare and say why.
A block with no comment runs on its own. The mapping may also say ``pytest: true``: the block
is then a test module, written to ``test_block.py`` and run by pytest (with the dynconf
plugin), and passes when every test in it passes.

A ```console block is a shell session: each ``$ command`` line runs in bash (the workspace's
``bin`` first on ``PATH``, so ``dynconf`` is the installed console script), one script per
block, after the ``files`` and the ``prelude`` (python, run first in its own interpreter);
the other lines are the expected output of stdout and stderr together, line for line, where
``...`` in a line matches any text (a time, an age). ``echo $?`` shows an exit code.

A ```yaml block whose every document has ``apiVersion`` and ``kind`` is a manifest, and is
validated the way ``tests/examples`` and the chart tests validate theirs: strictly by
kubeconform against the offline schemas of the pinned Kubernetes and the CRDs' own schemas
(a ``DynamicConfigRender`` or class with a misspelt field fails), and, when it carries a pod
or pod template with ``dynamic-config.rs/`` annotations, by ``dynamic-config-webhook
validate`` with an empty installation (what a user runs before applying it); the classes
(``DynamicConfigClass``, ``ClusterDynamicConfigClass``) of every manifest of the same page
are given to it with ``--classes``, and a workload is judged in its own namespace. A
``docs-test`` comment may say ``refused: <text>`` for a manifest the page shows being refused
(validate must exit 1 naming that text). Other ```yaml blocks (fragments: a values snippet, a
patch) must parse. ``not run: <reason>`` skips a manifest as it skips a python block.

The book-manifest extraction (``scripts/extract_book_manifests.py``) finds YAML manifests in
the book's prose; Markdown fences need none of its heuristics, so the extraction here is a
dozen lines of its own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.support import kubeconform_check
from tests.fixtures.kube import Kubeconform

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("packages/*/README.md")])
FENCE = re.compile(r"^```(python|console|yaml)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
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
    pytest: bool = False
    language: str = "python"
    servers: tuple[str, ...] = ()
    replace: dict[str, str] = field(default_factory=dict)
    refused: str | None = None

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
    unknown = set(loaded) - {"files", "prelude", "after", "pytest", "servers", "replace", "refused"}
    assert isinstance(loaded, dict) and not unknown, (
        f"{page.relative_to(REPO)}:{line}: a docs-test comment holds files, prelude, after, "
        f"pytest, servers, replace and refused only (not {sorted(unknown)})"
    )
    if "servers" in loaded:
        loaded["servers"] = tuple(loaded["servers"])
    return loaded


def blocks() -> list[Block]:
    found: list[Block] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            fixture = _fixture(page, line, text[: match.start()])
            found.append(Block(page, line, match.group(2), language=match.group(1), **fixture))
    return found


ALL_BLOCKS = blocks()
BLOCKS = [block for block in ALL_BLOCKS if block.language != "yaml"]
YAML_BLOCKS = [block for block in ALL_BLOCKS if block.language == "yaml"]


def _documents(block: Block) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(block.code) if doc is not None]


def is_manifest(block: Block) -> bool:
    """Every document of the block is a Kubernetes object (``apiVersion`` and ``kind``)."""
    docs = _documents(block)
    return bool(docs) and all(
        isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc for doc in docs
    )


MANIFESTS = [block for block in YAML_BLOCKS if is_manifest(block)]
CLASS_KINDS = ("DynamicConfigClass", "ClusterDynamicConfigClass")


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 5


def test_the_docs_have_manifests() -> None:
    assert len(MANIFESTS) >= 15


def test_every_walkthrough_shows_validated_manifests() -> None:
    walkthroughs = sorted(REPO.glob("docs/walkthrough-*.md"))
    shown = {block.page for block in MANIFESTS if block.not_run is None}

    assert len(walkthroughs) >= 4
    assert set(walkthroughs) <= shown, sorted(p.name for p in set(walkthroughs) - shown)


def _environment() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "REPO": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env={**_environment(), **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def _run_console(block: Block, cwd: Path) -> None:
    commands: list[str] = []
    expected: list[str] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            commands.append(line[2:])
        else:
            expected.append(line)
    result = _run(["bash", "-c", "exec 2>&1\n" + "\n".join(commands)], cwd)
    actual = result.stdout.splitlines()
    mismatch = next(
        (
            i
            for i, (want, got) in enumerate(zip(expected, actual, strict=False))
            if not _matches(want, got)
        ),
        None if len(expected) == len(actual) else min(len(expected), len(actual)),
    )
    assert mismatch is None, (
        f"{block.name}: output line {mismatch + 1} differs from the page\n"
        f"page:\n{chr(10).join(expected)}\nactual:\n{result.stdout}"
    )


def _with_servers(block: Block, request: pytest.FixtureRequest) -> Block:
    """``block`` with its servers started and its addresses swapped for theirs."""
    if not block.servers:
        return block
    servers = {name: request.getfixturevalue(f"{name}_server") for name in block.servers}
    parts = {"prelude": block.prelude, "code": block.code, "after": block.after}
    for text, where in block.replace.items():
        server, dot, attribute = where.partition(".")
        value = str(getattr(servers[server], attribute)) if dot and server in servers else where
        parts = {name: part.replace(text, value) for name, part in parts.items()}
    return dataclasses.replace(block, **parts)


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[block.name for block in YAML_BLOCKS])
def test_docs_yaml_block_parses(block: Block) -> None:
    try:
        _documents(block)
    except yaml.YAMLError as error:
        pytest.fail(f"{block.name}: not YAML: {error}")


def _page_classes(page: Path) -> str:
    """The class documents among the page's manifests, as one stream."""
    found = [
        doc
        for block in MANIFESTS
        if block.page == page
        for doc in _documents(block)
        if doc["kind"] in CLASS_KINDS
    ]
    return yaml.safe_dump_all(found)


def _annotated_pods(block: Block) -> bool:
    from dynconf_k8s.webhook.validate import pods_in

    return any(
        any(key.startswith("dynamic-config.rs/") for key in
            ((pod.get("metadata") or {}).get("annotations") or {}))
        for doc in _documents(block)
        for _, pod in pods_in(doc)
    )  # fmt: skip


@pytest.mark.helm
@pytest.mark.parametrize("block", MANIFESTS, ids=[block.name for block in MANIFESTS])
def test_docs_manifest_is_valid(block: Block, tmp_path: Path, kubeconform: Kubeconform) -> None:
    if block.not_run is not None:
        pytest.skip(f"not run: {block.not_run}")
    checked = kubeconform_check(kubeconform, block.code, tmp_path)
    assert checked.returncode == 0 and "Invalid: 0, Errors: 0" in checked.stdout, (
        f"{block.name}: kubeconform:\n{checked.stdout}{checked.stderr}"
    )
    if not _annotated_pods(block):
        assert block.refused is None, f"{block.name}: refused, but has no annotated pod"
        return
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(block.code, encoding="utf-8")
    classes = tmp_path / "classes.yaml"
    classes.write_text(_page_classes(block.page), encoding="utf-8")
    metadata = [doc.get("metadata") or {} for doc in _documents(block)]
    namespaces = sorted({meta["namespace"] for meta in metadata if "namespace" in meta})
    argv = [sys.executable, "-m", "dynconf_k8s.webhook.main", "validate",
            "--classes", str(classes), *(["--namespace", namespaces[0]] if namespaces else []),
            str(manifest)]  # fmt: skip
    env = {k: v for k, v in _environment().items() if not k.startswith("DYNAMIC_CONFIG_")}
    env["DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE"] = str(tmp_path / "no-installation.yaml")
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT,
                            check=False)  # fmt: skip
    if block.refused is not None:
        assert result.returncode == 1, f"{block.name}: admitted:\n{result.stdout}"
        assert block.refused in result.stderr, f"{block.name}:\n{result.stderr}"
    else:
        assert result.returncode == 0, f"{block.name}: validate:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_docs_python_block_runs(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if block.language == "python":
        compile(block.code, block.name, "exec")
    if block.not_run is not None:
        pytest.skip(f"not run: {block.not_run}")
    block = _with_servers(block, request)
    for name, content in block.files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    if block.pytest or block.language == "console":
        if block.prelude:
            ran = _run([sys.executable, "-c", block.prelude], tmp_path)
            assert ran.returncode == 0, f"{block.name} (prelude) failed:\n{ran.stderr[-4000:]}"
        if block.language == "console":
            _run_console(block, tmp_path)
        else:
            (tmp_path / "test_block.py").write_text(block.code, encoding="utf-8")
            ran = _run(
                [sys.executable, "-m", "pytest", "-q", "-p", "dynconf.pytest_plugin",
                 "-p", "no:cacheprovider", "test_block.py"],
                tmp_path,
                PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # the plugin once, by the -p above
            )  # fmt: skip
            assert ran.returncode == 0, f"{block.name} (pytest) failed:\n{ran.stdout[-4000:]}"
        if block.after:
            ran = _run([sys.executable, "-c", block.after], tmp_path)
            assert ran.returncode == 0, f"{block.name} (after) failed:\n{ran.stderr[-4000:]}"
        return
    program = "\n".join(
        f"exec(compile({part!r}, {f'{block.name} ({what})'!r}, 'exec'))"
        for what, part in (
            ("prelude", block.prelude),
            ("block", block.code),
            ("after", block.after),
        )
        if part
    )
    result = _run([sys.executable, "-c", program], tmp_path)
    assert result.returncode == 0, f"{block.name} failed:\n{result.stderr[-4000:]}"
