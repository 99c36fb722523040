"""The ``dynconf`` command: ``resolve``, ``render`` and ``plugins``.

Every refusal is one line on stderr, ``dynconf: <what was wrong and the fix>``, with exit
code 1 — never a traceback, never a value from a document.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from dynconf.errors import DynconfError
from dynconf.logs import configure_logging

__all__ = ["main"]

log = logging.getLogger("dynconf.cli")


class _Parser(argparse.ArgumentParser):
    """argparse that exits 1 with a one-line error, like every other refusal here."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: {message}\n")


def _octal(text: str) -> int:
    digits = text[2:] if text.lower().startswith("0o") else text
    try:
        mode = int(digits, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--file-mode takes an octal mode such as 0640, not {text!r}"
        ) from None
    if mode > 0o777 or not mode & 0o400:
        raise argparse.ArgumentTypeError(
            "--file-mode must be at most 0777 and keep the owner-read bit (0400)"
        )
    return mode


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dynconf", description="Layered, live configuration.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    resolve = commands.add_parser("resolve", help="print the resolved section of a spec as JSON")
    resolve.add_argument("spec", type=Path, help="a JSON spec (key, files, env_prefix, …)")

    render = commands.add_parser(
        "render", help="fetch a document from a store, render it to a file, optionally watch"
    )
    render.add_argument("--source", default="file", help="store name (default: file)")
    render.add_argument("--endpoint", default="", help="store address (file: a base directory)")
    render.add_argument("--key", required=True, help="document key (file: its path)")
    render.add_argument("--out", required=True, type=Path, help="output file; extension = format")
    render.add_argument("--section", help="render only this section (a dotted path)")
    render.add_argument(
        "--template", type=Path, help="a jinja2 template file (re-read each render)"
    )
    render.add_argument("--template-inline", help="a jinja2 template given inline")
    render.add_argument("--schema", type=Path, help="a JSON Schema checked before every write")
    render.add_argument("--file-mode", type=_octal, help="octal mode of the rendered file")
    render.add_argument("--meta", action="store_true", help="write the sibling .meta file")
    render.add_argument("--history", type=int, default=0, help="keep N replaced generations")
    render.add_argument(
        "--max-document-bytes", type=int, default=8 * 1024 * 1024, help="size ceiling"
    )
    render.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=1.0,
        help="keep running and re-render on every change (interval in seconds, default 1)",
    )

    plugins = commands.add_parser("plugins", help="list, lock or check the installed plugins")
    plugin_commands = plugins.add_subparsers(dest="plugins_command", required=True)
    plugin_commands.add_parser("list", help="every plugin and what it contributes")
    lock = plugin_commands.add_parser("lock", help="write a lock pinning the installed plugins")
    lock.add_argument("--output", type=Path, help="lock file path (default: stdout)")
    check = plugin_commands.add_parser("check", help="load exactly what a lock pins")
    check.add_argument("lock", type=Path, help="the lock file")
    return parser


def _cmd_resolve(args: argparse.Namespace) -> int:
    from dynconf.spec import render_resolved_json, resolve_spec_file

    sys.stdout.write(render_resolved_json(resolve_spec_file(args.spec)))
    return 0


def _cmd_plugins(args: argparse.Namespace) -> int:
    from dynconf.plugins import PluginLock, discover, load_locked, lock_from

    if args.plugins_command == "check":
        registry = load_locked(PluginLock.read(args.lock), origin=str(args.lock))
        sys.stdout.write(
            f"{len(registry.plugins)} plugins load as pinned: "
            f"{', '.join(e.name for e in registry.plugins)}\n"
        )
        return 0
    registry = discover()
    if args.plugins_command == "lock":
        text = lock_from(registry).to_json()
        if args.output:
            args.output.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
        return 0
    for entry in registry.plugins:
        sys.stdout.write(f"{entry.name}\t{entry.distribution} {entry.version}\t{entry.value}\n")
    sys.stdout.write(f"formats: {', '.join(sorted(registry.formats))}\n")
    sys.stdout.write(f"stores: {', '.join(sorted(registry.stores))}\n")
    sys.stdout.write(f"template filters: {', '.join(sorted(registry.filters))}\n")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from dynconf.errors import MissingError
    from dynconf.pipeline import Prepared, RenderRequest, prepare, publish
    from dynconf.plugins import default_registry
    from dynconf.render import OutputSpec, TemplateSource
    from dynconf.stores import Absent, Fetched, RemoteSource, StoreSpec

    if args.template and args.template_inline:
        raise SystemExit("dynconf: --template and --template-inline exclude each other; keep one")
    template = None
    if args.template:
        template = TemplateSource(path=args.template)
    elif args.template_inline is not None:
        template = TemplateSource(text=args.template_inline)
    request = RenderRequest(
        outputs=[
            OutputSpec(path=args.out, section=args.section, mode=args.file_mode, template=template)
        ],
        schema=args.schema,
        max_document_bytes=args.max_document_bytes,
        history=args.history,
        meta=args.meta,
    )
    store = default_registry().store(args.source)
    spec = StoreSpec(source=args.source, endpoint=args.endpoint, key=args.key)
    spec = spec.with_secrets_from_env()
    refusals = store.validate(spec)
    if refusals:
        raise SystemExit("dynconf: " + "; ".join(refusals))
    source = store.build(spec)
    if not isinstance(source, RemoteSource):
        raise SystemExit(f"dynconf: the {args.source} store is async; use dynamic-config-agent")

    def render(answer: Fetched, previous: Prepared | None) -> Prepared:
        prepared = prepare(answer, request)
        if prepared.unchanged_from(previous):
            log.info("unchanged", extra={"fingerprint": prepared.fingerprint})
            return prepared
        result = publish(prepared, request)
        log.info(
            "rendered",
            extra={
                "files": [str(path) for path in result.paths],
                "bytes": result.size,
                "fingerprint": prepared.fingerprint,
                "revision": prepared.revision,
            },
        )
        return prepared

    first = source.fetch()
    if isinstance(first, Absent):
        raise MissingError(f"{source.describe()} holds no document; create it, then render")
    previous = render(first, None)
    if args.watch is None:
        source.close()
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        for answer in source.changes(args.watch, stop.is_set):
            if isinstance(answer, Absent):
                log.warning("absent", extra={"kept": str(args.out)})
                continue
            try:
                previous = render(answer, previous)
            except DynconfError as error:
                log.warning(
                    "render_failed",
                    extra={"kind": error.kind.value, "path": error.path, "reason": str(error)},
                )
    finally:
        source.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "resolve":
            return _cmd_resolve(args)
        if args.command == "plugins":
            return _cmd_plugins(args)
        return _cmd_render(args)
    except DynconfError as error:
        sys.stderr.write(f"dynconf: {error}\n")
        return 1
    except OSError as error:
        name = error.filename or "a file"
        sys.stderr.write(f"dynconf: {name} cannot be used ({error.strerror}); check the path\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
