"""The ``dynconf`` command: ``resolve``, ``render``, ``plugins``, and the live commands
``explain``, ``check`` and ``diff`` for a running Python service (:mod:`dynconf.cli_live`).

Every refusal is one line on stderr, ``dynconf: <what was wrong and the fix>`` — never a
traceback, never a value from a document. Exit codes: 0 done; 1 a refusal, or (live
commands) a problem or difference found; 2 a usage error (flags, a ``--model`` that does
not import, a snapshot file that is missing or not a cache).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn

from dynconf.budget import ledger
from dynconf.errors import DynconfError
from dynconf.logs import configure_logging, console_entry

if TYPE_CHECKING:
    from dynconf.follow import StoreDriver
    from dynconf.pipeline import RenderRequest

__all__ = [
    "HELP_FLAGS",
    "VERSION_FLAG",
    "asked_for",
    "distribution_version",
    "main",
    "version_line",
]

log = logging.getLogger("dynconf.cli")

HELP_FLAGS: Final = ("-h", "--help")
VERSION_FLAG: Final = "--version"


def distribution_version(distribution: str) -> str:
    """The installed version of ``distribution`` (its metadata); ``0.0.0`` when not installed.

    The one place a program learns its own version: ``--version`` of every console script
    and the version a program reports about itself.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "0.0.0"


def version_line(program: str, distribution: str) -> str:
    """What ``<program> --version`` prints: ``<program> <version>`` and a newline."""
    return f"{program} {distribution_version(distribution)}\n"


def asked_for(
    argv: Sequence[str], value_flags: Collection[str]
) -> Literal["help", "version"] | None:
    """``help`` or ``version`` when a flag position of ``argv`` holds ``-h``/``--help`` or
    ``--version`` (whichever comes first), else ``None``.

    For the programs that parse their flags by hand: the word after one of ``value_flags``
    is that flag's value, not a flag, so ``--key --help`` asks for nothing. Either answer
    means print and exit 0 before any settings are read.
    """
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in HELP_FLAGS:
            return "help"
        if arg == VERSION_FLAG:
            return "version"
        index += 2 if arg in value_flags else 1
    return None


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 (usage) with a one-line error after the usage line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {message}\n")


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
    parser.add_argument(
        VERSION_FLAG, action="version", version=version_line("dynconf", "dynconf-core").strip()
    )
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
    check = plugin_commands.add_parser(
        "check",
        help="load exactly what a lock pins (without one: every installed plugin); exit 1 "
        "naming each plugin that cannot load and the fix",
    )
    check.add_argument("lock", type=Path, nargs="?", help="the lock file")
    _add_live_commands(commands)
    return parser


def _add_live_commands(commands: Any) -> None:
    """``explain``, ``check`` and ``diff``: see :mod:`dynconf.cli_live`."""
    live = _Parser(add_help=False)
    live.add_argument(
        "--model",
        metavar="MODULE:ATTR",
        help="the service's DynamicConfig or @dynamic_config class (its sources, model and "
        "cache), or a model class to type --spec's sources",
    )
    live.add_argument("--spec", type=Path, help="a JSON spec of the sources (dynconf resolve's)")
    live.add_argument(
        "--snapshot",
        type=Path,
        help="the service's cache(path, mode) file (default: the --model config's cache)",
    )
    live.add_argument(
        "--secret", action="append", metavar="PATH", help="a secret path, with --spec"
    )
    live.add_argument("--json", action="store_true", help="answer as one JSON object")
    explain = commands.add_parser(
        "explain", parents=[live], help="which layer supplies PATH now; does the service agree"
    )
    explain.add_argument("path", help="a dotted path in the section")
    explain.add_argument("--show-values", action="store_true", help="print values (not secrets)")
    commands.add_parser(
        "check", parents=[live], help="would a reload now install: refused fields, unknown keys"
    )
    diff = commands.add_parser(
        "diff", parents=[live], help="paths where a fresh load differs from the running snapshot"
    )
    diff.add_argument("--show-values", action="store_true", help="print values (not secrets)")


def _cmd_resolve(args: argparse.Namespace) -> int:
    from dynconf.spec import render_resolved_json, resolve_spec_file

    sys.stdout.write(render_resolved_json(resolve_spec_file(args.spec)))
    return 0


def _cmd_plugins(args: argparse.Namespace) -> int:
    from dynconf.plugins import PLUGIN_API_VERSION, PluginLock, discover, load_locked, lock_from

    # stdout is the answer (a lock, a listing) and this command reports each refusal itself
    logging.getLogger("dynconf.plugins").setLevel(logging.ERROR)

    if args.plugins_command == "check" and args.lock is not None:
        registry = load_locked(PluginLock.read(args.lock), origin=str(args.lock))
        sys.stdout.write(
            f"{len(registry.plugins)} plugins load as pinned: "
            f"{', '.join(e.name for e in registry.plugins)}\n"
        )
        return 0
    registry = discover()
    for refusal in registry.refused:
        sys.stderr.write(f"dynconf: {refusal.reason}\n")
    if args.plugins_command == "check":
        sys.stdout.write(
            f"{len(registry.plugins)} plugins load: {', '.join(e.name for e in registry.plugins)}"
            f" (plugin API {PLUGIN_API_VERSION})\n"
        )
        return 1 if registry.refused else 0
    if registry.refused and args.plugins_command == "lock":
        # a lock written without a refused plugin would pin an image that lacks it
        sys.stderr.write("dynconf: no lock written; fix the plugins above first\n")
        return 1
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
    from dynconf.follow import StoreDriver
    from dynconf.pipeline import RenderRequest
    from dynconf.plugins import default_registry
    from dynconf.render import OutputSpec, TemplateSource
    from dynconf.stores import StoreSpec

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
    spec = StoreSpec(source=args.source, endpoint=args.endpoint, key=args.key,
                     max_bytes=args.max_document_bytes)  # fmt: skip
    spec = spec.with_secrets_from_env()
    refusals = store.validate(spec)
    if refusals:
        raise SystemExit("dynconf: " + "; ".join(refusals))
    driver = StoreDriver.built(lambda: store.build(spec), calls=ledger().for_spec(spec))
    import anyio

    anyio.run(_render_and_follow, driver, request, args.watch)
    return 0


async def _render_and_follow(
    driver: StoreDriver, request: RenderRequest, interval: float | None
) -> None:
    """Render once; with ``--watch``, follow the store and render every change until a signal.

    The follow is :class:`dynconf.follow.Follower`'s, the agent's own: it re-reads a push
    store every interval and catches a poll store up after its watch primes, so a change made
    right after the first render is not lost. A document that fails to render is one
    ``render_failed`` line; the last good file stays and the watch goes on.
    """
    import anyio
    import anyio.to_thread

    from dynconf.errors import MissingError
    from dynconf.follow import Follower, Slot
    from dynconf.pipeline import Prepared, log_rendered, prepare, publish
    from dynconf.stores import Absent, Fetched

    previous: list[Prepared] = []

    def render(answer: Fetched, quiet: bool) -> None:
        prepared = prepare(answer, request)
        if previous and prepared.unchanged_from(previous[-1]):
            level = logging.DEBUG if quiet else logging.INFO
            log.log(level, "unchanged", extra={"fingerprint": prepared.fingerprint})
            return
        result = publish(prepared, request)
        previous[:] = [prepared]
        log_rendered(log, result, prepared)

    try:
        first = await driver.fetch()
        if isinstance(first, Absent):
            raise MissingError(f"{driver.describe()} holds no document; create it, then render")
        await anyio.to_thread.run_sync(render, first, False)
        if interval is None:
            return
        slot = Slot()
        follower = Follower(driver, interval, slot, log=log)
        follower.seen(first)
        async with anyio.create_task_group() as tg:

            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(stop_on_signal)
            tg.start_soon(follower.run)
            while True:
                delivery = await slot.take()
                answer = delivery.answer
                if isinstance(answer, Absent):
                    log.warning("absent", extra={"kept": str(request.main.path)})
                    continue
                try:
                    await anyio.to_thread.run_sync(render, answer, delivery.kind == "resync")
                except DynconfError as error:
                    log.warning(
                        "render_failed",
                        extra={"kind": error.kind.value, "path": error.path, "reason": str(error)},
                    )
                except Exception as error:  # never the end of the watch: one line, go on
                    log.warning(
                        "render_failed",
                        extra={"kind": "backend", "path": "", "reason": type(error).__name__},
                    )
    finally:
        with anyio.CancelScope(shield=True):
            await driver.close()


def _cmd_live(args: argparse.Namespace) -> int:
    from dynconf.cli_live import EXIT_USAGE, UsageError, run

    configure_logging(stream=sys.stderr)  # stdout is the answer (and --json must parse)
    try:
        return run(args.command, args)
    except UsageError as error:
        sys.stderr.write(f"dynconf {args.command}: {error}\n")
        return EXIT_USAGE


@console_entry("dynconf")
def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    args = _build_parser().parse_args(argv)
    try:
        if args.command in ("explain", "check", "diff"):
            return _cmd_live(args)
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
