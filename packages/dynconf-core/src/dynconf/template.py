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

Errors are :class:`InvalidError`\\ s that name the template line and the undefined name or
syntax problem; they never carry a value from the document.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing

from dynconf.document import Document
from dynconf.errors import InvalidError, Origin
from dynconf.template_filters import (
    BUILTIN_FILTERS,
    REQUIRED_MESSAGE,
    TemplateFilterError,
    _as_text,
    b64decode,
    b64encode,
    quote,
    required,
    to_json,
    to_yaml,
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


def _finalize(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list, tuple)):
        return _as_text(value)
    return value


class _Sandbox:
    """One sandboxed environment for one set of filters, with compiled templates kept."""

    def __init__(self, filters: Mapping[str, Callable[..., Any]]) -> None:
        self.environment = ImmutableSandboxedEnvironment(
            undefined=_StrictUndefined,
            finalize=_finalize,
            keep_trailing_newline=True,
            autoescape=False,
            loader=None,
            extensions=(),
        )
        self.environment.filters.update(filters)
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


def render_template(source: str, context: Document, *, origin: Origin) -> str:
    """Render template text against a resolved document.

    ``origin`` names the template (its file, or inline) in every error. Raises
    :class:`InvalidError` for a syntax error, an undefined name, a refused attribute, or a
    filter that refused its input — each naming the template line, never a value.
    """
    sandbox = _current_sandbox.get()
    try:
        template = sandbox.compile(source)
    except TemplateSyntaxError as exc:
        raise InvalidError(
            f"the template has a syntax error{_at(exc.lineno)}: {exc.message}; fix the template",
            origin=origin,
        ) from None
    try:
        return template.render(context)
    except _UndefinedUse as exc:
        line = _template_line(exc)
        spelled = _undefined_spelling(source, line, exc.name)
        what = f"`{spelled}`" if spelled else "a key"
        raise InvalidError(
            f"the template uses {what}{_at(line)}, but the document does not define it; fix "
            "the name, add the key to the document, or give it a `default(...)`",
            origin=origin,
        ) from None
    except SecurityError as exc:
        line = _template_line(exc)
        raise InvalidError(
            f"the template reaches for something the sandbox refuses{_at(line)}; a template "
            "may read the document's keys and values only",
            origin=origin,
        ) from None
    except TemplateFilterError as exc:
        line = _template_line(exc)
        where = f",{_at(line)}" if line is not None else ""
        raise InvalidError(f"{exc}{where}", origin=origin) from None
    except TypeError as exc:
        line = _template_line(exc)
        if "no loader" in str(exc):
            reason = "include, import and extends cannot read other templates"
        else:
            reason = str(exc)
        raise InvalidError(
            f"the template failed{_at(line)}: {reason}; fix the template", origin=origin
        ) from None
    except Exception as exc:
        line = _template_line(exc)
        # Arbitrary exception text may quote a value, so only the type is reported.
        raise InvalidError(
            f"the template failed{_at(line)} with {type(exc).__name__}; fix the template",
            origin=origin,
        ) from None
