"""Templates: jinja2 in a sandbox that can only see the resolved document.

A template owns the bytes of an output, so it is code, and it runs scoped like data: the
context is the resolved document (its top-level keys are the variables), there is no
loader (``include``/``import``/``extends`` cannot reach another file), no filter or global
reads the filesystem, the environment or the network, and the immutable sandbox refuses
dunder attributes and every method that would mutate a value.

The semantics a configuration file needs, kept from the reference:

* undefined is strict — ``{{ db.hots }}`` is an error naming ``db.hots`` and the line,
  never an empty string that ships a broken file with a clean exit code;
* booleans print ``true``/``false``, null prints as nothing, arrays and tables print as
  JSON (what every format we render spells them as);
* the trailing newline the author wrote survives;
* six extra filters: ``b64encode``, ``b64decode``, ``json``, ``yaml``, ``quote`` and
  ``required``; plugins add more through the ``dynconf_template_filters`` hook.

Errors are :class:`InvalidError`\\ s that name the template line and the kind of error
(an undefined name as the template spells it, a syntax problem, a refused filter, a limit);
they never carry text the document produced — not in a message a filter or Python wrote, not
as a keyword name built from a value, not as ``required``'s message when a value supplied it.

The sandbox also bounds work and size (:mod:`dynconf.template_limits`): every loop,
lookup, call and amplifying operator (``*``, ``**``, ``+``, ``%``, ``~``, padding and joining
filters and methods) is metered before it allocates, the output stops at 8 MiB, and a
template nested too deeply to compile is refused — each as one line naming the limit.
"""

from __future__ import annotations

import functools
import re
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError, nodes
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import _PassArg, generate_lorem_ipsum, missing, pass_context
from jinja2.visitor import NodeTransformer

from dynconf.document import Document
from dynconf.errors import InvalidError, Origin
from dynconf.template_filters import (
    BUILTIN_FILTERS,
    REQUIRED_MESSAGE,
    RequiredRefusal,
    TemplateFilterError,
    _as_text,
    b64decode,
    b64encode,
    quote,
    required,
    to_json,
    to_yaml,
)
from dynconf.template_limits import (
    FILTER_CHECKS,
    MAX_NESTING,
    MAX_OUTPUT_BYTES,
    METHOD_CHECKS,
    STRUCTURAL_FILTERS,
    TEXT,
    TemplateLimitError,
    check_binop,
    check_lipsum,
    concat,
    current_budget,
    format_field_width,
    metered,
)

__all__ = [
    "BUILTIN_FILTERS",
    "REQUIRED_MESSAGE",
    "TemplateFilterError",
    "b64decode",
    "b64encode",
    "quote",
    "render_template",
    "required",
    "to_json",
    "to_yaml",
]

_TEMPLATE_NAME: Final = "<template>"
_COMPILED_KEEP: Final = 64
_ITERATE: Final = "_dynconf_iterate"
_CONCAT: Final = "_dynconf_concat"
_BLOCKS: Final = (
    nodes.For,
    nodes.If,
    nodes.With,
    nodes.Macro,
    nodes.CallBlock,
    nodes.FilterBlock,
    nodes.Block,
    nodes.AssignBlock,
    nodes.Scope,
)


class _UndefinedUse(UndefinedError):
    """An undefined value was used; carries the name it was looked up by."""

    def __init__(self, message: str | None = None, *, name: object = None) -> None:
        super().__init__(message)
        self.name = name


class _StrictUndefined(StrictUndefined):
    """Strict undefined that remembers which name was missing, for a precise error."""

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = missing,
        name: str | None = None,
        exc: type[TemplateRuntimeError] = UndefinedError,
    ) -> None:
        super().__init__(hint, obj, name, exc)
        if exc is UndefinedError:
            # The base class raises ``self._undefined_exception(message)``; binding the name
            # here is the one seam that survives jinja's slot-bound dunder methods. Other
            # kinds (the sandbox's SecurityError) are kept as they are.
            self._undefined_exception = functools.partial(_UndefinedUse, name=name)  # type: ignore[assignment]


class _NoLoader(TypeError):
    """``include``, ``import`` or ``extends`` asked for another template; there is no loader."""


class _TooDeep(Exception):
    """The template nests blocks past :data:`MAX_NESTING`; ``line`` is where it does."""

    def __init__(self, line: int | None) -> None:
        super().__init__()
        self.line = line


def _finalize(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list, tuple)):
        current_budget().size(value)
        return _as_text(value)
    return value


def _passed(function: Callable[..., Any], context: Context) -> tuple[Any, ...]:
    """What jinja2 would pass ``function`` first, taken from the context it passed us."""
    kind = _PassArg.from_obj(function)
    if kind is _PassArg.context:
        return (context,)
    if kind is _PassArg.eval_context:
        return (context.eval_ctx,)
    if kind is _PassArg.environment:
        return (context.environment,)
    return ()


def _metered_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its arguments measured and pre-checked, and its result counted.

    jinja2 calls filters directly (not through :meth:`SandboxedEnvironment.call`), so this
    wrapper is where every filter — jinja2's, ours and a plugin's — meets the budget. It
    takes the context (``pass_context``) whatever ``function`` asks for, and hands
    ``function`` what it asked for: a context filter is never folded into a constant at
    compile time, so no filter runs where no budget meters it.
    """
    check = FILTER_CHECKS.get(name)
    measured = name not in STRUCTURAL_FILTERS

    @pass_context
    @functools.wraps(function)
    def metered_filter(context: Context, *args: Any, **kwargs: Any) -> Any:
        budget = current_budget()
        budget.tick()
        if measured:
            for value in (*args, *kwargs.values()):
                budget.size(value)
        if check is not None:
            check(budget, *args, **kwargs)
        return budget.result(function(*_passed(function, context), *args, **kwargs))

    return metered_filter


@pass_context
def _iterate(_context: Context, value: Any) -> Iterator[Any]:
    return current_budget().iterate(value)


@pass_context
def _concat(_context: Context, parts: list[Any]) -> str:
    return concat(parts)


def _metered_lipsum(*args: Any, **kwargs: Any) -> str:
    check_lipsum(*args, **kwargs)
    return generate_lorem_ipsum(*args, **kwargs)


class _MeteredFormatter(SandboxedFormatter):
    """``str.format`` with every field's value and width counted before it is padded.

    ``total`` is the length of the text so far in one call; the caller resets it.
    """

    total = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        budget = current_budget()
        budget.tick()
        self.total += budget.size(value) + format_field_width(format_spec)
        budget.text(self.total)
        return super().format_field(value, format_spec)


class _Meter(NodeTransformer):
    """Route every ``for`` loop's iterable and every ``~`` through the budget.

    jinja2 compiles both to plain Python (a ``for`` statement, ``str_join``), out of the
    sandbox's reach, so the parse tree is rewritten to call two internal filters instead.
    """

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, _ITERATE, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        parts = nodes.List(node.nodes, lineno=node.lineno)
        return nodes.Filter(parts, _CONCAT, [], [], None, None, lineno=node.lineno)


def _check_nesting(tree: nodes.Template) -> None:
    """Refuse blocks nested past :data:`MAX_NESTING` (walked without recursion)."""
    stack: list[tuple[nodes.Node, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, _BLOCKS):
            depth += 1
            if depth > MAX_NESTING:
                raise _TooDeep(node.lineno)
        stack.extend((child, depth) for child in node.iter_child_nodes())


def _bounded_join(parts: Any) -> str:
    """What a block, a macro or ``{% set %}...{% endset %}`` joins its output with."""
    chunks = list(parts)
    budget = current_budget()
    budget.text(sum(len(chunk) for chunk in chunks))
    return str(budget.result("".join(chunks)))


class _Environment(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every amplifying operation metered by a budget."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    concat = staticmethod(_bounded_join)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        _check_nesting(tree)
        rewritten = _Meter().visit(tree)
        assert isinstance(rewritten, nodes.Template)
        return rewritten

    def _load_template(self, name: Any, globals: Any) -> Template:
        raise _NoLoader()

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = current_budget()
        check_binop(budget, operator, left, right)
        return budget.result(super().call_binop(context, operator, left, right))

    def getattr(self, obj: Any, attribute: str) -> Any:
        current_budget().tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        current_budget().tick()
        return super().getitem(obj, argument)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # Arguments are not measured: a callee that prints them is metered where it prints.
        budget = current_budget()
        budget.tick()
        return budget.result(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """Meter ``str.format`` fields and the ``str`` methods that can outgrow their string."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)):
            return None
        owner = getattr(value, "__self__", None)
        if not isinstance(owner, TEXT):
            return None
        method = value.__name__
        if method in ("format", "format_map") and isinstance(owner, str):
            return self._format_method(owner, value, method == "format_map")
        check = METHOD_CHECKS.get(method)
        if check is None:
            return None

        def checked(*args: Any, **kwargs: Any) -> Any:
            budget = current_budget()
            check(budget, owner, *args, **kwargs)
            return budget.result(value(*args, **kwargs))

        return functools.update_wrapper(checked, value)

    def _format_method(
        self, owner: str, value: Callable[..., str], is_map: bool
    ) -> Callable[..., str]:
        formatter = _MeteredFormatter(self)

        def formatted(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            budget = current_budget()
            budget.tick()
            formatter.total = len(owner)
            return str(budget.result(formatter.vformat(owner, args, kwargs)))

        return functools.update_wrapper(formatted, value)


class _Sandbox:
    """One sandboxed environment for one set of filters, with compiled templates kept."""

    def __init__(self, filters: Mapping[str, Callable[..., Any]]) -> None:
        self.environment = _Environment(
            undefined=_StrictUndefined,
            finalize=_finalize,
            keep_trailing_newline=True,
            autoescape=False,
            loader=None,
            extensions=(),
        )
        every = {**self.environment.filters, **filters}
        self.environment.filters.update(
            {name: _metered_filter(name, function) for name, function in every.items()}
        )
        self.environment.filters[_ITERATE] = _iterate
        self.environment.filters[_CONCAT] = _concat
        self.environment.globals["lipsum"] = _metered_lipsum
        self._compiled: OrderedDict[str, Template] = OrderedDict()

    def compile(self, source: str) -> Template:
        template = self._compiled.get(source)
        if template is None:
            template = self.environment.from_string(source)
            self._compiled[source] = template
            if len(self._compiled) > _COMPILED_KEEP:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(source)
        return template


class _CurrentSandbox:
    """The sandbox for the process registry's filters; rebuilt when the registry changes."""

    def __init__(self) -> None:
        self._registry: object | None = None
        self._sandbox: _Sandbox | None = None

    def get(self) -> _Sandbox:
        from dynconf.plugins import default_registry

        registry = default_registry()
        if self._sandbox is None or self._registry is not registry:
            self._sandbox = _Sandbox({**BUILTIN_FILTERS, **registry.filters})
            self._registry = registry
        return self._sandbox


_current_sandbox = _CurrentSandbox()


def _template_line(error: BaseException) -> int | None:
    """The template line a runtime error was raised on (jinja rewrites tracebacks for us)."""
    line = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEMPLATE_NAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _at(line: int | None) -> str:
    return f" at template line {line}" if line is not None else ""


def _undefined_spelling(source: str, line: int | None, name: object) -> str | None:
    """How the template spells the missing name (``db.hots``), if it spells it at all.

    A name that does not appear in the template text was computed from the document
    (``db[key]``), so it is a value and is not repeated.
    """
    if not isinstance(name, str) or not name:
        return None
    lines = source.splitlines()
    text = lines[line - 1] if line is not None and 0 < line <= len(lines) else source
    found = re.search(rf"(?<![\w.])(?:[A-Za-z_]\w*\.)*{re.escape(name)}(?!\w)", text)
    if found is not None:
        return found.group(0)
    if name in text:
        return name
    return None


_KINDS: Final[dict[type[BaseException], str]] = {
    ZeroDivisionError: "a division by zero",
    OverflowError: "a number too large for the operation",
    UnicodeError: "text that is not valid Unicode (a lone surrogate)",
    ValueError: "a value the operation cannot convert or accept",
    AttributeError: "an attribute the value does not have",
    KeyError: "a key the value does not have",
    IndexError: "an index past the end of a sequence",
    RecursionError: "a macro or recursive loop that recursed past Python's depth limit",
    MemoryError: "more memory than the process has",
    TypeError: "an argument a filter, test or function does not take, or a value of the wrong type",
}


def _kind(exc: BaseException) -> str:
    """What went wrong, in words chosen here: an exception's own text may quote a value."""
    name = type(exc).__name__
    for kind, words in _KINDS.items():
        if isinstance(exc, kind):
            return f"{words} ({name})"
    if isinstance(exc, TemplateRuntimeError):
        return f"a filter or test given an argument it does not accept ({name})"
    return name


def _template_error(exc: Exception, source: str) -> str:
    """The one-line message of a failed render: the line and the kind, never a value.

    This is the one place a template's failure becomes a dynconf error, so it is the one
    place that decides what of it may be shown: the template's own text (a name as the
    template spells it, ``required``'s message when the template wrote it) and sentences
    written here — nothing an exception, a filter or the document produced.
    """
    line = _template_line(exc)
    at = _at(line)
    if isinstance(exc, _UndefinedUse):
        spelled = _undefined_spelling(source, line, exc.name)
        what = f"`{spelled}`" if spelled else "a key"
        return (
            f"the template uses {what}{at}, but the document does not define it; fix the "
            "name, add the key to the document, or give it a `default(...)`"
        )
    if isinstance(exc, SecurityError):
        return (
            f"the template reaches for something the sandbox refuses{at}; a template may read "
            "the document's keys and values only"
        )
    if isinstance(exc, TemplateLimitError):
        return (
            f"the template went past {exc}{at}; make it do less, or render a smaller section "
            "of the document"
        )
    if isinstance(exc, RequiredRefusal):
        given = exc.given
        if given is not None and given.strip() and given in source:
            return f"{given}{at}"
        return f"{REQUIRED_MESSAGE}{at}"
    if isinstance(exc, TemplateFilterError):
        # A filter's own refusal: its message names the problem, never the value (the
        # contract of TemplateFilterError, kept by ours and asked of plugins).
        return f"{exc},{at}" if at else str(exc)
    if isinstance(exc, _NoLoader):
        return f"the template failed{at}: include, import and extends cannot read other templates"
    return f"the template failed{at} with {_kind(exc)}; fix the template"


def render_template(source: str, context: Document, *, origin: Origin) -> str:
    """Render template text against a resolved document, within the sandbox's limits.

    ``origin`` names the template (its file, or inline) in every error. Raises
    :class:`InvalidError` for a syntax error, a template nested too deeply to compile, an
    undefined name, a refused attribute, a filter that refused its input, a limit passed,
    or any other failure — each naming the template line and the kind, never a value.
    """
    sandbox = _current_sandbox.get()
    try:
        template = sandbox.compile(source)
    except TemplateSyntaxError as exc:
        raise InvalidError(
            f"the template has a syntax error{_at(exc.lineno)}: {exc.message}; fix the template",
            origin=origin,
        ) from None
    except _TooDeep as exc:
        raise InvalidError(
            f"the template nests blocks more than {MAX_NESTING} deep{_at(exc.line)}; "
            "flatten it (a macro, or fewer nested loops and conditions)",
            origin=origin,
        ) from None
    except (RecursionError, SyntaxError, MemoryError):
        raise InvalidError(
            "the template nests expressions or blocks too deeply to compile (Python's own "
            "limits); flatten it (fewer nested parentheses, filters or blocks)",
            origin=origin,
        ) from None
    try:
        with metered():
            return _render(template, context)
    except Exception as exc:
        raise InvalidError(_template_error(exc, source), origin=origin) from None


def _render(template: Template, context: Document) -> str:
    """The template's text, refused once it passes :data:`MAX_OUTPUT_BYTES`."""
    chunks: list[str] = []
    size = 0
    for chunk in template.generate(context):
        # strict: a lone surrogate ('\ud800') is refused here, not when the file is encoded
        size += len(chunk) if chunk.isascii() else len(chunk.encode("utf-8"))
        if size > MAX_OUTPUT_BYTES:
            raise TemplateLimitError("the output ceiling", MAX_OUTPUT_BYTES, "bytes")
        chunks.append(chunk)
    return "".join(chunks)
