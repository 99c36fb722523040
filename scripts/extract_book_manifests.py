#!/usr/bin/env python3
"""Extract every pod manifest the book shows into tests/book_manifests/.

The book carries manifests inline in prose: whole Pods and Deployments, and pod fragments
(`metadata: annotations:` only). A block starts at a line `apiVersion:` or `metadata:` in
column 0 and runs while lines are indented, blank, or another top-level manifest key. Blocks
that parse as YAML and ask for injection are written out; a fragment is wrapped into a Pod
with one container `app` so it can be applied and validated as the book means it.

    uv run python scripts/extract_book_manifests.py [BOOK] [OUT_DIR]
"""

from __future__ import annotations

import glob
import sys
from pathlib import Path

import yaml

TOP = ("apiVersion:", "kind:", "metadata:", "spec:", "data:", "---")
INJECT = "dynamic-config.rs/inject"


def blocks(lines: list[str]) -> list[tuple[int, str]]:
    out = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith(("apiVersion:", "metadata:")):
            i += 1
            continue
        start = i
        body = [lines[i]]
        i += 1
        while i < len(lines):
            line = lines[i]
            if line.startswith((" ", "\t")) or line.startswith(TOP[1:]) or line.startswith("---"):
                body.append(line)
            elif not line.strip():
                nxt = next((x for x in lines[i + 1 :] if x.strip()), "")
                if not (nxt.startswith((" ", "\t")) or nxt.startswith(TOP)):
                    break
                body.append(line)
            else:
                break
            i += 1
        out.append((start + 1, "\n".join(body) + "\n"))
    return out


def asks_for_injection(doc: object) -> bool:
    return INJECT in yaml.safe_dump(doc)


def as_pod(doc: dict, line: int) -> dict:
    if "kind" in doc:
        return doc
    metadata = dict(doc.get("metadata") or {})
    metadata.setdefault("name", f"book-{line}")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": doc.get("spec")
        or {"containers": [{"name": "app", "image": "myapp:1", "command": ["/app"]}]},
    }


def main() -> int:
    book = Path(sys.argv[1] if len(sys.argv) > 1 else glob.glob("/work/shared/seeds/000_*")[0])
    out_dir = Path(sys.argv[2] if len(sys.argv) > 2 else "tests/book_manifests")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("book-*.yaml"):
        old.unlink()
    written = skipped = 0
    for line, text in blocks(book.read_text(encoding="utf-8").splitlines()):
        try:
            docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        except yaml.YAMLError:
            skipped += 1
            continue
        pods = [as_pod(d, line) for d in docs if asks_for_injection(d)]
        if not pods:
            continue
        target = out_dir / f"book-{line:05d}.yaml"
        header = f"# extracted from the book, line {line}, by scripts/extract_book_manifests.py\n"
        target.write_text(header + yaml.safe_dump_all(pods, sort_keys=False), encoding="utf-8")
        written += 1
    print(f"wrote {written} manifests to {out_dir} ({skipped} blocks did not parse)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
