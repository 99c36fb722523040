"""The long fuzz run: each class of issue 14 for N examples, failures counted, not fatal.

    uv run python bench/fuzz_long.py [N] [--class NAME ...]

Runs the properties of ``tests/fuzz`` (same strategies, same checks) under the ``long``
hypothesis profile: fresh random examples, no shrinking, and every broken promise caught and
counted instead of stopping the run. Prints one line per class::

    admission: 1000 tried, 3 failed

then, per class, every distinct failure (by what broke) with the first input that showed it,
summarised with long strings cut and every planted secret replaced by ``<SECRET>``
(``--dump FILE`` writes each one whole, secrets still replaced).
Exit status is 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import given, settings
from hypothesis import strategies as st

import tests.fuzz.profiles  # noqa: F401 - registers the long profile
from tests.fuzz import test_admission, test_csi, test_formats, test_notify, test_templates
from tests.fuzz.support import Violation, redact, summarise, worker

CLASSES: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], None]]] = {
    "admission": (test_admission.ADMISSION, test_admission.check_review),
    "csi": (test_csi.volumes(), test_csi.check_volume),
    "formats": (test_formats.CASES, test_formats.check_document),
    "templates": (test_templates.TEMPLATES, test_templates.check_template),
    "notify": (test_notify.URLS, test_notify.check_url),
}


@dataclass
class Tally:
    tried: int = 0
    failed: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)
    whole: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def run(name: str, examples: int) -> Tally:
    strategy, check = CLASSES[name]
    tally = Tally()

    @settings(parent=settings.get_profile("long"), max_examples=examples)
    @given(example=strategy)
    def explore(example: Any) -> None:
        tally.tried += 1
        try:
            check(example)
        except Violation as violation:
            label = violation.label
        except Exception as error:  # a check that crashed is a failure too, by its type
            label = f"check raised {type(error).__name__}: {redact(str(error), 80)}"
        else:
            return
        tally.failed += 1
        tally.labels[label] += 1
        if label not in tally.first:
            tally.first[label] = summarise(example)
            tally.whole[label] = redact(example, limit=10**9)

    started = time.monotonic()
    explore()
    tally.seconds = time.monotonic() - started
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("examples", nargs="?", type=int, default=1000, help="N per class")
    parser.add_argument("--class", dest="classes", action="append", choices=sorted(CLASSES))
    parser.add_argument(
        "--dump", type=Path, help="write each distinct failure's whole first input here"
    )
    options = parser.parse_args(argv)
    names = options.classes or list(CLASSES)
    tallies: dict[str, Tally] = {}
    try:
        for name in names:
            tallies[name] = run(name, options.examples)
            tally = tallies[name]
            print(
                f"{name}: {tally.tried} tried, {tally.failed} failed ({tally.seconds:.0f} s)",
                flush=True,
            )
    finally:
        worker().stop()
    print()
    for name, tally in tallies.items():
        if not tally.failed:
            continue
        print(f"## {name}: {len(tally.labels)} distinct failures")
        for label, count in tally.labels.most_common():
            print(f"- {label} ({count}x)")
            print(f"    first input: {tally.first[label]}")
    if options.dump is not None:
        with options.dump.open("w", encoding="utf-8") as out:
            for name, tally in tallies.items():
                for label, whole in tally.whole.items():
                    out.write(f"{name}: {label}\n{whole}\n\n")
    return 1 if any(t.failed for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
