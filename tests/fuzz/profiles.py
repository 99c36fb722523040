"""The fuzz suite's hypothesis profiles: ``ci`` by default, ``long`` for ``bench/fuzz_long.py``.

``ci`` is derandomized with no example database, so a CI failure reproduces byte for byte on
any machine, and small enough that the whole suite takes a few minutes on two cores. ``long``
draws fresh random examples, many more of them, and does not shrink (the long run counts
failures instead of stopping at the first). Hypothesis' own deadline is off in both: the
properties enforce their own per-example bound, in a worker they can kill.

Set ``DYNCONF_FUZZ_PROFILE=long`` (or ``dev``: random, shrinking) to run the pytest suite
under another profile. Profiles are passed as ``parent=`` rather than loaded, so running the
fuzz suite never changes the settings of other hypothesis tests in the same session.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final

from hypothesis import HealthCheck, Phase, settings

_QUIET: Final = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]

settings.register_profile(
    "ci",
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=_QUIET,
)
settings.register_profile(
    "long",
    max_examples=1000,
    derandomize=False,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=_QUIET,
)
settings.register_profile(
    "dev",
    max_examples=100,
    deadline=None,
    print_blob=True,
    suppress_health_check=_QUIET,
)

PROFILE: Final = os.environ.get("DYNCONF_FUZZ_PROFILE", "ci")

# Per-example wall-clock bound for parse/render/template work, on a loaded two-core machine;
# issue 14's cases took minutes, a kept bound answers in milliseconds.
EXAMPLE_SECONDS: Final = float(os.environ.get("DYNCONF_FUZZ_EXAMPLE_SECONDS", "10"))


def fuzz_settings(scale: float = 1.0, profile: str | None = None) -> Callable[[Any], Any]:
    """``@settings`` from the active profile, with ``scale`` times its example budget."""
    parent = settings.get_profile(profile or PROFILE)
    return settings(parent=parent, max_examples=max(1, round(parent.max_examples * scale)))
