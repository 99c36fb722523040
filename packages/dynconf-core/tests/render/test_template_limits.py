"""Templates are bounded: work, sizes and nesting are refused in one line, fast and small.

Each payload once hung for minutes or took more than a GiB (the agent's limit is 64 MiB);
each must now be refused within the wall-clock guard, allocating at most a few limits'
worth, with a message that names the limit and the template line — and the templates people
write (the examples', the book's, and every construct they use) render exactly as jinja2's
unmetered sandbox renders them.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from dynconf.errors import InvalidError, Origin
from dynconf.template import BUILTIN_FILTERS, render_template
from dynconf.template_filters import _as_text

REPO = Path(__file__).resolve().parents[4]
SECRET = "s3cr3t-value-never-shown"
DOCUMENT: dict[str, Any] = {
    "db": {"host": "db.internal", "port": 5432, "user": "app", "password": SECRET},
    "big": 10**100,
    "many": list(range(1000)),
    "text": "word " * 1000,
}
CPU_SECONDS = 2.0
"""The bound on work: CPU time, which other processes on a shared machine do not inflate."""
WALL_CLOCK = 10.0
"""A gross hang detector on top (the payloads once took minutes)."""
PEAK_BYTES = 32 * 1024 * 1024

NESTED_LITERALS = "{% set a = [1,2,3,4,5,6,7,8,9,10] %}" + "".join(
    f"{{% set {b} = [{a},{a},{a},{a},{a},{a},{a},{a},{a},{a}] %}}"
    for a, b in zip("abcdef", "bcdefg", strict=True)
)

# name → (template, the limit its refusal names)
PAYLOADS: dict[str, tuple[str, str]] = {
    "nested ranges": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "steps",
    ),
    "nested loops over a document list": (
        "{% for x in many %}{% for y in many %}{% for z in many %}{% endfor %}{% endfor %}"
        "{% endfor %}",
        "steps",
    ),
    "power tower of document values": ("{{ big ** big ** big }}", "bits"),
    "integer past the bits": ("{{ 2 ** 16384 * 2 ** 16384 }}", "bits"),
    "string repetition": ("{{ 'a' * 2**28 }}", "characters"),
    "printf repetition": ("{{ '%s' % ('a' * 100) * 10**8 }}", "characters"),
    "list repetition": ("{{ [1] * 10**9 }}", "items"),
    "indent width": ("{{ 'a\nb\nc' | indent(10**9) }}", "characters"),
    "indent by a string": ("{{ text | replace(' ', '\n') | indent('x' * 10000) }}", "characters"),
    "lipsum": ("{{ lipsum(10**6) }}", "characters"),
    "center": ("{{ 'x' | center(10**9) }}", "characters"),
    "center method": ("{{ 'x'.center(10**9) }}", "characters"),
    "ljust method": ("{{ 'x'.ljust(10**9) }}", "characters"),
    "expandtabs": ("{{ ('\t' * 1000).expandtabs(100000) }}", "characters"),
    "format width": ("{{ '%0999999999d' | format(1) }}", "characters"),
    "format star width": ("{{ '%*d' | format(10**9, 1) }}", "characters"),
    "str.format width": ("{{ '{:>1000000000}'.format(1) }}", "characters"),
    "str.format fields": ("{{ ('{:>8000000}' * 20).format(*range(20)) }}", "characters"),
    "replace the empty string": ("{{ text | replace('', 'b' * 100000) }}", "characters"),
    "join of a huge list": ("{{ (['a' * 1000000] * 100) | join }}", "characters"),
    "join with a huge separator": ("{{ range(100000) | join('x' * 10000) }}", "characters"),
    "join method": ("{{ ' '.join(['a' * 1000000] * 100) }}", "characters"),
    "wordwrap": ("{{ (text * 4) | wordwrap(1, wrapstring='x' * 1000) }}", "characters"),
    "truncate end": ("{{ 'a' | truncate(10, end='x' * 100000000) }}", "characters"),
    "tojson indent": ("{{ (['x'] * 100000) | tojson(indent=1000) }}", "characters"),
    "batch fill": ("{{ many | batch(10**9, fill_with=1) | list }}", "items"),
    "slice count": ("{{ many | slice(10**8) | list }}", "items"),
    "list of a long string": ("{{ ('€' * 1000000) | list | length }}", "items"),
    "filesizeformat of a huge power": ("{{ (big ** 10**6) | filesizeformat }}", "bits"),
    "doubling through a namespace": (
        "{% set ns = namespace(x='ab') %}{% for i in range(40) %}"
        "{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x | length }}",
        "characters",
    ),
    "doubling by addition": (
        "{% set ns = namespace(x='ab') %}{% for i in range(40) %}"
        "{% set ns.x = ns.x + ns.x %}{% endfor %}{{ ns.x | length }}",
        "characters",
    ),
    "nested list literals printed": (NESTED_LITERALS + "{{ g }}", "characters"),
    "nested list literals as json": (NESTED_LITERALS + "{{ g | json }}", "characters"),
    "nested list literals as a string": (NESTED_LITERALS + "{{ g | string }}", "characters"),
    "output past the ceiling": (
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        "bytes",
    ),
    "block set past the limit": (
        "{% set x %}{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}{% endset %}{{ x }}",
        "characters",
    ),
    "sum of lists": ("{{ ([[1] * 5000] * 100) | sum(start=[]) | length }}", "items"),
    "constants folded at compile time": ("{{ 'x' | center(4000000) }}" * 20, "bytes"),
    "bytes repetition": ("{{ 'a'.encode() * 10**9 }}", "characters"),
    "bytes padding": ("{{ 'a'.encode().center(10**9) }}", "characters"),
    "bytes replace": (
        "{{ ('a' * 1000).encode().replace(''.encode(), ('b' * 100000).encode()) }}",
        "characters",
    ),
    "escaping a built string": ("{{ ('\x00' * 1000000) | json }}", "characters"),
    "quadratic list growth": (
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}"
        "{% endfor %}",
        "steps",
    ),
    "recursive macro": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "depth"),
    "21 nested for loops": (
        "".join(f"{{% for a{i} in [1] %}}" for i in range(21)) + "{% endfor %}" * 21,
        "16 deep",
    ),
    "5000 parentheses": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "too deeply"),
    "150 parentheses": ("{{ " + "(" * 150 + "1" + ")" * 150 + " }}", "too deeply"),
}


def refuse(source: str) -> str:
    with pytest.raises(InvalidError) as caught:
        render_template(source, DOCUMENT, origin=Origin.inline())
    return str(caught.value)


@pytest.mark.parametrize("name", PAYLOADS)
def test_payload_is_refused_in_one_line_naming_the_limit_within_two_cpu_seconds(name: str) -> None:
    source, limit = PAYLOADS[name]
    started, cpu = time.monotonic(), time.process_time()
    message = refuse(source)
    elapsed, used = time.monotonic() - started, time.process_time() - cpu
    assert used < CPU_SECONDS, f"{name}: refused after {used:.2f} s of CPU"
    assert elapsed < WALL_CLOCK, f"{name}: refused after {elapsed:.2f} s"
    assert limit in message
    assert "\n" not in message and "Traceback" not in message
    assert SECRET not in message


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text("ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/self/status has no {field}")


def peak_growth(run: Callable[[], object]) -> int:
    """Bytes the process's peak RSS grew by while ``run`` ran.

    Linux resets the peak (VmHWM) to the current RSS when ``5`` is written to
    ``/proc/self/clear_refs``; this is the resident memory the kernel would OOM-kill on,
    and unlike tracemalloc it does not slow the step-bound payloads tenfold.
    """
    clear = Path("/proc/self/clear_refs")
    if not clear.exists():
        tracemalloc.start()
        try:
            run()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    before = _status_kib("VmRSS")
    clear.write_text("5", encoding="ascii")
    run()
    return (_status_kib("VmHWM") - before) * 1024


@pytest.mark.parametrize("name", PAYLOADS)
def test_payload_is_refused_within_bounded_memory(name: str) -> None:
    source, _ = PAYLOADS[name]
    peak = peak_growth(lambda: refuse(source))
    assert peak < PEAK_BYTES, f"{name}: peak grew {peak / 2**20:.1f} MiB"


def test_limit_errors_name_the_template_line() -> None:
    assert "line 3" in refuse("a\nb\n{{ 'a' * 2**28 }}\n")


# ------------------------------------------------------------------ normal templates
def _book_templates() -> list[str]:
    example = yaml.safe_load_all((REPO / "examples" / "env-inject.yaml").read_text("utf-8"))
    templates = [doc["data"]["template"] for doc in example if doc.get("kind") == "ConfigMap"]
    assert templates, "examples/env-inject.yaml has no template any more"
    return templates


NORMAL_TEMPLATES = [
    *_book_templates(),
    "db={{ db.host }}:{{ db.port }}",
    "host: {{ db.host }}\npool_size: {{ db.pool_size | default(8) }}\n"
    "cache: {{ features.cache | default(false) }}\n",
    "DATABASE_URL=postgres://{{ db.user }}:{{ db.password }}@postgres:5432/appdb\n",
    "{% for k, v in db | dictsort %}{{ k | upper }}={{ v | quote }}\n{% endfor %}",
    "{% for x in many if x is even %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}"
    "{% endfor %}",
    "{% macro row(k, v) %}{{ k }} = {{ v }}{% endmacro %}{{ row('a', 1) }}\n{{ row('b', true) }}\n",
    "{% set header %}# {{ db.host | center(30) }}{% endset %}{{ header }}\n{{ '-' * 30 }}\n",
    "{{ db | json }}\n{{ db | yaml }}\n{{ db.password | b64encode | b64decode }}\n",
    "{{ '%s:%d' % (db.host, db.port) }} {{ '{}:{}'.format(db.host, db.port) }} "
    "{{ '%-10s|' | format(db.user) }}",
    "{{ many[:5] | join(', ') }} {{ many | sum }} {{ many | max }} {{ (many | batch(3) | first) }}",
    "{{ text | wordwrap(30) | indent(2) | truncate(60) }}",
    "{{ db.host ~ ':' ~ db.port }} {{ [1, 2] + [3] }} {{ 2 ** 10 }} {{ 'ab' * 3 }}",
    "{% set ns = namespace(total=0) %}{% for x in many %}{% set ns.total = ns.total + x %}"
    "{% endfor %}{{ ns.total }}",
    "{% for item in tree recursive %}{{ item.name }}{% if item.children %}({{ loop(item.children) }})"
    "{% endif %}{% endfor %}",
    "{{ db.host.replace('.', '-').upper().rjust(20, '.') }} {{ 'a b c'.split() | list }}",
    "{{ 'line\n' * 3 }}{{ text | replace('word', 'w') | length }}\n",
]
NORMAL_DOCUMENT = {
    **DOCUMENT,
    "flags": {"beta": True},
    "features": {},
    "tree": [
        {"name": "a", "children": [{"name": "b", "children": []}]},
        {"name": "c", "children": []},
    ],
}


def _unmetered(source: str, document: dict[str, Any]) -> str:
    """What jinja2's own sandbox renders, with dynconf's settings and filters, unbounded."""

    def finalize(value: Any) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, (dict, list, tuple)):
            return _as_text(value)
        return value

    environment = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined, finalize=finalize, keep_trailing_newline=True
    )
    environment.filters.update(BUILTIN_FILTERS)
    return environment.from_string(source).render(document)


@pytest.mark.parametrize("source", NORMAL_TEMPLATES)
def test_normal_templates_render_as_the_unmetered_sandbox_does(source: str) -> None:
    expected = _unmetered(source, NORMAL_DOCUMENT)
    assert render_template(source, NORMAL_DOCUMENT, origin=Origin.inline()) == expected


def test_counting_a_document_near_the_ceiling_is_not_refused() -> None:
    document = {"m": {f"key-{i}": [i, f"value-{i}"] for i in range(300_000)}}
    assert render_template("{{ m | length }}", document, origin=Origin.inline()) == "300000"


def test_a_large_document_renders_within_the_limits() -> None:
    document = {"m": {f"k{i}": {"host": f"h{i}", "port": i} for i in range(20000)}}
    source = "{% for k, v in m.items() %}{{ k }}={{ v.host }}:{{ v.port }}\n{% endfor %}"
    assert render_template(source, document, origin=Origin.inline()) == _unmetered(source, document)
