"""The work and size bounds of one template render.

A template is code an author (or whoever can edit the template) runs inside the agent,
whose memory limit is 64 MiB and which serves other documents too. jinja2's sandbox keeps a
template away from the filesystem and from Python internals, but not away from the CPU or
the heap: ``'a' * 2**28``, ``9 ** 9 ** 9``, two nested ``range(100000)`` loops, or a list
literal of a list literal of ... printed as JSON, each take minutes or gigabytes. This module
is the meter the sandbox in :mod:`dynconf.template` runs every amplifying operation through;
:mod:`dynconf.limits` holds the limits of the documents themselves, checked at parse time.

Every check happens *before* the allocation it guards (a string's final length is computed
from its parts), so a refused template has allocated at most about one limit's worth. The
limits:

* :data:`MAX_OUTPUT_BYTES` — the rendered text, the engine's document ceiling (8 MiB);
* :data:`MAX_TEXT` — one string a template builds (characters), and the text form of any
  value a filter, ``~``, ``%`` or the output is about to print;
* :data:`MAX_ITEMS` — one sequence a template builds (``[x] * n``, ``batch``, ``slice``);
* :data:`MAX_INT_BITS` — one integer a template computes (``**`` and ``*``);
* :data:`MAX_PRODUCED` — every string built during one render, together (characters);
* :data:`MAX_STEPS` — loop iterations, attribute reads, calls, operators and measured
  values, together: the bound on time.

A refusal is a :class:`TemplateLimitError` naming the limit, never the value.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dynconf.limits import MAX_DOCUMENT_BYTES

__all__ = [
    "FILTER_CHECKS",
    "MAX_INT_BITS",
    "MAX_ITEMS",
    "MAX_NESTING",
    "MAX_OUTPUT_BYTES",
    "MAX_PRODUCED",
    "MAX_STEPS",
    "MAX_TEXT",
    "METHOD_CHECKS",
    "STRUCTURAL_FILTERS",
    "Budget",
    "TemplateLimitError",
    "check_binop",
    "check_lipsum",
    "check_printf",
    "concat",
    "current_budget",
    "format_field_width",
    "metered",
]

MAX_OUTPUT_BYTES: Final = MAX_DOCUMENT_BYTES
"""The rendered text: the engine's document ceiling (:data:`dynconf.limits.MAX_DOCUMENT_BYTES`)."""
MAX_TEXT: Final = 4 * 1024 * 1024
MAX_ITEMS: Final = 100_000
MAX_INT_BITS: Final = 16_384
MAX_PRODUCED: Final = 32 * 1024 * 1024
MAX_STEPS: Final = 1_000_000
MAX_NESTING: Final = 16
"""Blocks (``for``, ``if``, ``macro``, ...) nested in one another; Python itself stops at 20."""

_PRINTF_SPEC: Final = re.compile(
    r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]"
)
_NUMBERS: Final = re.compile(r"\d+")
_ESCAPED: Final = re.compile(r"[\x00-\x1f\x7f\"'&<>\\]")
TEXT: Final = (str, bytes)
"""What ``*``, ``+`` and the padding methods build character by character."""


class TemplateLimitError(Exception):
    """A render passed one of the limits; ``limit`` says which, in the template's words."""

    def __init__(self, limit: str, bound: int, unit: str) -> None:
        super().__init__(f"{limit} ({bound} {unit})")
        self.limit = limit
        self.bound = bound
        self.unit = unit


def _text_limit() -> TemplateLimitError:
    return TemplateLimitError("the largest string a template may build", MAX_TEXT, "characters")


def _items_limit() -> TemplateLimitError:
    return TemplateLimitError("the longest sequence a template may build", MAX_ITEMS, "items")


@dataclass(slots=True)
class Budget:
    """The meter of one render: steps taken, characters built, and known value sizes.

    ``sizes`` memoises the text size of containers by identity, holding the container so
    its id cannot be reused during the render; values are immutable inside the sandbox,
    so a size once measured stays true. That keeps measuring a list made of the same list
    ten times over linear in what was written, not in what it would print.
    """

    steps: int = 0
    produced: int = 0
    sizes: dict[int, tuple[object, int]] = field(default_factory=dict)

    def tick(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > MAX_STEPS:
            raise TemplateLimitError(
                "the work one render may do (loop iterations, lookups, calls and operators)",
                MAX_STEPS,
                "steps",
            )

    def size(self, value: Any) -> int:
        """An upper estimate of ``value``'s printed length; refuses past :data:`MAX_TEXT`."""
        if isinstance(value, TEXT):
            found = len(value)
        elif isinstance(value, (bool, float)) or value is None:
            found = 24
        elif isinstance(value, int):
            found = _int_digits(value)
        elif isinstance(value, (list, tuple, dict)):
            found = self._container_size(value)
        else:
            found = 64
        if found > MAX_TEXT:
            raise _text_limit()
        return found

    def _container_size(self, value: list[Any] | tuple[Any, ...] | dict[Any, Any]) -> int:
        known = self.sizes.get(id(value))
        if known is not None:
            return known[1]
        total = 2
        items: Iterable[Any] = value.items() if isinstance(value, dict) else value
        for item in items:
            self.tick()
            if isinstance(item, tuple) and isinstance(value, dict):
                total += self.size(item[0]) + self.size(item[1]) + 6
            else:
                total += self.size(item) + 4
            if total > MAX_TEXT:
                raise _text_limit()
        self.sizes[id(value)] = (value, total)
        return total

    def text(self, length: int) -> None:
        """Refuse a string of ``length`` characters before it is built."""
        if length > MAX_TEXT:
            raise _text_limit()

    def built(self, length: int) -> None:
        """Count a string of ``length`` characters that was built, against the render's total."""
        self.text(length)
        self.produced += length
        if self.produced > MAX_PRODUCED:
            raise TemplateLimitError(
                "the text one render may build in all", MAX_PRODUCED, "characters"
            )

    def items(self, count: int) -> None:
        """Refuse a sequence of ``count`` items about to be built."""
        if count > MAX_ITEMS:
            raise _items_limit()

    def result(self, value: Any) -> Any:
        """Account for what an operation returned (its size was checked before)."""
        if isinstance(value, TEXT):
            self.built(len(value))
        elif isinstance(value, (list, tuple)):
            self.items(len(value))
            self.tick(len(value) // 16)  # copying items is work: ``ns.l + [x]`` in a loop
        return value

    def iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """``iterable``, one step per item (what every ``for`` loop iterates through)."""
        for item in iterable:
            self.tick()
            yield item


_current: contextvars.ContextVar[Budget] = contextvars.ContextVar("dynconf_template_budget")


def current_budget() -> Budget:
    """The budget of the render in progress on this thread (a fresh one outside a render)."""
    try:
        return _current.get()
    except LookupError:
        return Budget()


class metered:
    """``with metered():`` — run one render against a fresh budget."""

    def __enter__(self) -> Budget:
        budget = Budget()
        self._token = _current.set(budget)
        return budget

    def __exit__(self, *_exc: object) -> None:
        _current.reset(self._token)


def _int_digits(value: int) -> int:
    return int(value.bit_length() * 0.302) + 2


def _int_bits(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value.bit_length()


def _count(value: Any) -> int:
    """An integer argument used as a count or width (0 when it is not an integer)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)


def _sequence_length(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple, dict, range)) else 0


def _int_limit() -> TemplateLimitError:
    return TemplateLimitError("the largest integer a template may compute", MAX_INT_BITS, "bits")


def check_binop(budget: Budget, operator: str, left: Any, right: Any) -> None:
    """Refuse ``left <operator> right`` before Python allocates its result."""
    budget.tick()
    if operator == "**":
        if _int_bits(left) > 1 and (_int_bits(left) - 1) * _count(right) > MAX_INT_BITS:
            raise _int_limit()
    elif operator == "*":
        if _int_bits(left) + _int_bits(right) > MAX_INT_BITS + 1:
            raise _int_limit()
        for sequence, times in ((left, right), (right, left)):
            if isinstance(sequence, TEXT):
                budget.text(len(sequence) * _count(times))
            elif isinstance(sequence, (list, tuple)):
                # what the items would print as is measured where they are printed
                budget.items(len(sequence) * _count(times))
    elif operator == "+":
        if isinstance(left, TEXT) and isinstance(right, TEXT):
            budget.text(len(left) + len(right))
        elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            budget.items(len(left) + len(right))
    elif operator == "%" and isinstance(left, TEXT):
        check_printf(budget, left, right)


def check_printf(budget: Budget, spec: str | bytes, arguments: Any) -> None:
    """Refuse ``spec % arguments`` whose widths or arguments would print past the limits."""
    values: list[Any]
    if isinstance(arguments, tuple):
        values = list(arguments)
    elif isinstance(arguments, Mapping):
        values = list(arguments.values())
    else:
        values = [arguments]
    total = len(spec)
    for match in _PRINTF_SPEC.finditer(spec if isinstance(spec, str) else spec.decode("latin-1")):
        for width in match.groups():
            if width == "*":
                total += sum(_count(v) for v in values)
            elif width is not None:
                total += int(width) if len(width) < 12 else MAX_TEXT + 1
    for value in values:
        total += budget.size(value)
    budget.text(total)


def format_field_width(spec: str) -> int:
    """The most characters a ``str.format`` field spec can pad to (its largest number)."""
    widest = 0
    for number in _NUMBERS.findall(spec):
        if len(number) > 9:
            raise _text_limit()
        widest = max(widest, int(number))
    return widest


def _joined(budget: Budget, parts: Iterable[Any], separator: str = "") -> int:
    total, count = 0, 0
    for part in parts:
        total += budget.size(part)
        count += 1
        if total > MAX_TEXT:
            raise _text_limit()
    return total + len(separator) * max(count - 1, 0)


def concat(parts: list[Any]) -> str:
    """The ``~`` operator (jinja2's own ``str_join``), sized before it joins."""
    budget = current_budget()
    budget.tick()
    budget.text(_joined(budget, parts))
    return str(budget.result("".join(map(str, parts))))


# ------------------------------------------------------------------------ filter arguments
def _lines(text: Any) -> int:
    return text.count("\n") + 1 if isinstance(text, str) else 1


def _width(value: Any) -> int:
    return len(value) if isinstance(value, str) else _count(value)


def _indent(budget: Budget, s: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    budget.text(budget.size(s) + _lines(s) * _width(width))


def _pad(budget: Budget, value: Any, width: Any = 80, *_: Any, **__: Any) -> None:
    budget.text(max(budget.size(value), _count(width)))


def _wordwrap(
    budget: Budget,
    s: Any,
    width: Any = 79,
    break_long_words: Any = True,
    wrapstring: Any = None,
    *_: Any,
    **__: Any,
) -> None:
    size = budget.size(s)
    breaks = size // max(_count(width), 1) + _lines(s)
    budget.text(size + breaks * (len(wrapstring) if isinstance(wrapstring, str) else 2))


def _truncate(
    budget: Budget,
    s: Any,
    length: Any = 255,
    killwords: Any = False,
    end: Any = "...",
    *_: Any,
    **__: Any,
) -> None:
    budget.text(min(budget.size(s), _count(length)) + budget.size(end))


def _join(budget: Budget, value: Any, d: Any = "", *_: Any, **__: Any) -> None:
    separator = d if isinstance(d, str) else ""
    if isinstance(value, str):
        budget.items(len(value))
        budget.text(len(value) * (len(separator) + 1))
    elif isinstance(value, (list, tuple, dict, range)):
        budget.text(_joined(budget, value, separator))


def _replace(
    budget: Budget, s: Any, old: Any = "", new: Any = "", count: Any = None, *_: Any, **__: Any
) -> None:
    if not (isinstance(s, TEXT) and type(old) is type(s) and type(new) is type(s)):
        return  # the filter itself refuses mixed types
    text: Any = s
    found = text.count(old) if old else len(s) + 1
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        found = min(found, count)
    budget.text(len(s) + found * max(len(new) - len(old), 0))


def _format(budget: Budget, value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        check_printf(budget, value, kwargs or tuple(args))


def _chunks(budget: Budget, value: Any, count: Any = 1, *_: Any, **__: Any) -> None:
    length = _sequence_length(value)
    budget.items(max(length, _count(count)))


def _tojson(budget: Budget, value: Any, indent: Any = None, *_: Any, **__: Any) -> None:
    size = budget.size(value)
    budget.text(size * (1 + _count(indent)) if indent else size)


def _escapes(budget: Budget, value: Any, *_: Any, **__: Any) -> None:
    # An escape spells one character in up to six (\u0000, &quot;); a string with nothing
    # to escape grows by its quotes only. Containers are checked on their result.
    if isinstance(value, str) and _ESCAPED.search(value) is not None:
        budget.text(len(value) * 6)


def _encodes(budget: Budget, value: Any, *_: Any, **__: Any) -> None:
    if isinstance(value, str):
        # base64 of UTF-8: 4 characters per 3 bytes, up to 4 bytes per character
        budget.text(len(value) * (4 if value.isascii() else 16) // 3 + 4)


def _iterates(budget: Budget, value: Any, *_: Any, **__: Any) -> None:
    if isinstance(value, str):
        budget.items(len(value))


def _sum(budget: Budget, value: Any, *args: Any, **kwargs: Any) -> None:
    _iterates(budget, value)
    start = kwargs.get("start", args[1] if len(args) > 1 else 0)
    if isinstance(start, (list, tuple)) and isinstance(value, (list, tuple)):
        # summing lists concatenates them: the result holds every item of every list
        total = len(start)
        for item in value:
            budget.tick()
            total += len(item) if isinstance(item, (list, tuple, str)) else 1
            budget.items(total)
        if budget.size(value) > MAX_TEXT:
            raise _text_limit()


FILTER_CHECKS: Final[dict[str, Any]] = {
    "indent": _indent,
    "center": _pad,
    "wordwrap": _wordwrap,
    "truncate": _truncate,
    "join": _join,
    "replace": _replace,
    "format": _format,
    "batch": _chunks,
    "slice": _chunks,
    "tojson": _tojson,
    "sum": _sum,
    "b64encode": _encodes,
    **dict.fromkeys(
        ("escape", "e", "forceescape", "json", "quote", "pprint", "urlencode", "urlize", "yaml"),
        _escapes,
    ),
    **dict.fromkeys(
        (
            "list",
            "sort",
            "unique",
            "reverse",
            "map",
            "select",
            "reject",
            "selectattr",
            "rejectattr",
            "groupby",
            "min",
            "max",
            "items",
            "dictsort",
        ),
        _iterates,
    ),
}
"""Pre-checks of the filters whose output can outgrow their input, by filter name.

Each is called as ``check(budget, *args, **kwargs)`` with the filter's own arguments
(without jinja2's passed environment or context) and refuses before the filter runs.
"""


STRUCTURAL_FILTERS: Final = frozenset(
    {
        "length",
        "count",
        "first",
        "last",
        "default",
        "d",
        "random",
        "list",
        "sort",
        "unique",
        "reverse",
        "select",
        "reject",
        "selectattr",
        "rejectattr",
        "map",
        "groupby",
        "min",
        "max",
        "items",
        "dictsort",
        "batch",
        "slice",
        "attr",
        "abs",
        "int",
        "float",
        "round",
        "wordcount",
        "required",
    }
)
"""Filters that answer a part, a count or a reordering of their input, never its text.

Their arguments are not measured (measuring walks a container once per render), so a
document near the 8 MiB ceiling still has a ``length``; the filters that print are measured.
"""


# ------------------------------------------------------------------------ string methods
def _method_pad(budget: Budget, text: str, width: Any = 0, *_: Any, **__: Any) -> None:
    budget.text(max(len(text), _count(width)))


def _method_expandtabs(budget: Budget, text: str, tabsize: Any = 8, *_: Any, **__: Any) -> None:
    tab = "\t" if isinstance(text, str) else b"\t"
    budget.text(len(text) + text.count(tab) * _count(tabsize))


def _method_join(budget: Budget, text: str, iterable: Any = (), *_: Any, **__: Any) -> None:
    if isinstance(iterable, TEXT):
        budget.text(len(iterable) * (len(text) + 1))
    elif isinstance(iterable, (list, tuple, dict, range)):
        budget.text(_joined(budget, iterable, text))


def _method_replace(budget: Budget, text: str, *args: Any, **kwargs: Any) -> None:
    _replace(budget, text, *args, **kwargs)


def _method_splits(budget: Budget, text: str, *_: Any, **__: Any) -> None:
    budget.items(len(text) // 2)


METHOD_CHECKS: Final[dict[str, Any]] = {
    "center": _method_pad,
    "ljust": _method_pad,
    "rjust": _method_pad,
    "zfill": _method_pad,
    "expandtabs": _method_expandtabs,
    "join": _method_join,
    "replace": _method_replace,
    "split": _method_splits,
    "rsplit": _method_splits,
    "splitlines": _method_splits,
}
"""Pre-checks of the ``str`` methods that can outgrow their string, called with it first."""


def check_lipsum(
    n: Any = 5, html: Any = True, fewest: Any = 20, most: Any = 100, *_: Any, **kwargs: Any
) -> None:
    """Refuse a ``lipsum(...)`` asking for more words than one string may hold."""
    most = kwargs.get("max", most)
    fewest = kwargs.get("min", fewest)
    words = _count(n) * max(_count(fewest), _count(most))
    if words > MAX_ITEMS:
        raise _text_limit()
    current_budget().tick(words)
