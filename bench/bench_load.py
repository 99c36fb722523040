"""Load, read and reload cost: dynconf against pydantic-settings, dynaconf and the book's
binding ``dynamic-config-py``, in one run.

The same workload for all: a TOML file of 100 keys (80 top-level scalars and a ``db`` table
of 20) plus 20 environment variables, into one typed pydantic model. Every case is timed in
interleaved rounds (each round times every case once, so a neighbour's burst of load hits
all of them alike; odd rounds run the cases in reverse order, so no case always runs right
after the same neighbour) and reported as the median over the rounds, with the best round
beside it. Each ratio is paired: ours over the baseline within one round, then the median of
those per-round ratios, so the machine's speed cancels and a burst that hits one round hits
both sides of its ratio.
Times are the thread's CPU time (a neighbour's load does not count); the watched reload is
wall-clock, since it is a latency.

Targets (issue 17): load ≤ 0.5× pydantic-settings; a live nested read ≤ 1.05× a held
pydantic-settings instance (or the floor explained by measurement); a watched reload ≤ 5 ms.

The binding is optional. It is not a workspace dependency; install it in a scratch venv of
the same Python and point the bench at it::

    python3 -m venv /tmp/dcpy && /tmp/dcpy/bin/pip install dynamic-config-py==0.3.3
    DYNCONF_BENCH_DCPY=/tmp/dcpy uv run python bench/bench_load.py

(its wheel has no dependencies; it validates with this venv's pydantic). Without it the bench
prints ``dynamic-config-py: not installed`` and runs the rest.

Run: ``uv run python bench/bench_load.py [--rounds N]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import sysconfig
import tempfile
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from pydantic import BaseModel, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict, TomlConfigSettingsSource

PEER_VENV = "DYNCONF_BENCH_DCPY"


def _write_workload(directory: Path) -> Path:
    lines = [f"k{i} = {i}" for i in range(80)]
    lines.append("[db]")
    lines += [f'd{i} = "value-{i}"' for i in range(20)]
    path = directory / "settings.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for i in range(20):
        os.environ[f"BENCH_E{i}"] = str(i * 3)
    return path


Db = create_model("Db", **{f"d{i}": (str, ...) for i in range(20)})  # type: ignore[call-overload]
Model = create_model(  # type: ignore[call-overload]
    "Model",
    __base__=BaseModel,
    db=(Db, ...),
    **{f"k{i}": (int, ...) for i in range(80)},
    **{f"e{i}": (int, ...) for i in range(20)},
)


def _settings_class(toml_path: Path) -> type[BaseSettings]:
    class Settings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="BENCH_", toml_file=toml_path)
        db: Db  # type: ignore[valid-type]

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls,
            init_settings,
            env_settings,  # type: ignore[no-untyped-def, override]
            dotenv_settings,
            file_secret_settings,
        ):
            return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    fields: dict[str, Any] = {f"k{i}": (int, ...) for i in range(80)}
    fields.update({f"e{i}": (int, ...) for i in range(20)})
    return create_model("BenchSettings", __base__=Settings, **fields)  # type: ignore[no-any-return, call-overload]


def _binding() -> ModuleType | None:
    """``dynamic_config`` from this venv, or from the scratch venv ``$DYNCONF_BENCH_DCPY``."""
    venv = os.environ.get(PEER_VENV)
    if venv:
        purelib = sysconfig.get_path("purelib", vars={"base": venv, "platbase": venv})
        sys.path.append(purelib)  # appended: this venv's pydantic stays the one imported
    try:
        import dynamic_config  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return dynamic_config  # type: ignore[no-any-return, unused-ignore]


def binding_config(binding: ModuleType, toml_path: Path) -> Any:
    """The workload as a ``dynamic-config-py`` configuration (not yet loaded)."""
    return binding.DynamicConfig(Model, "").file(str(toml_path)).whole_document().env("BENCH_")


def loaders(toml_path: Path, binding: ModuleType | None) -> dict[str, Callable[[], Any]]:
    """One load of the workload per library, files + env -> the model (the binding's only
    when it is installed). ``bench/peers.py`` times the same functions."""
    from dynaconf import Dynaconf

    from dynconf.config import DynamicConfig

    settings_cls = _settings_class(toml_path)

    def load_dynconf() -> Any:
        return DynamicConfig(Model, "").file(toml_path).whole_document().env("BENCH_").init()

    def load_pydantic_settings() -> Any:
        return settings_cls()

    def load_dynaconf() -> Any:
        settings = Dynaconf(settings_files=[str(toml_path)], envvar_prefix="BENCH")
        data = {k.lower(): v for k, v in settings.as_dict().items()}
        data["db"] = {k.lower(): v for k, v in data["db"].items()}
        return Model.model_validate(data)

    found: dict[str, Callable[[], Any]] = {
        "dynconf": load_dynconf,
        "pydantic-settings": load_pydantic_settings,
        "dynaconf": load_dynaconf,
    }
    if binding is not None:
        found["dynamic-config-py"] = lambda: binding_config(binding, toml_path).init_and_current()
    return found


@dataclass
class Case:
    name: str
    fn: Callable[[], object]
    number: int
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)


def measure(cases: list[Case], rounds: int) -> None:
    """CPU seconds per call for every case, one sample per round, rounds interleaved.

    The clock is the thread's CPU time, not the wall: on a shared machine the wall clock
    also counts the time this process waited for a core, which is the neighbours' load,
    not the code's cost.
    """
    for case in cases:
        case.fn()  # warm: imports, caches, the first validation
    timers = [(case, timeit.Timer(case.fn, timer=time.thread_time)) for case in cases]
    for round_number in range(rounds):
        for case, timer in timers if round_number % 2 == 0 else reversed(timers):
            case.samples.append(timer.timeit(number=case.number) / case.number)


def _ns(seconds: float) -> str:
    return f"{seconds * 1e9:12.1f} ns" if seconds < 1e-4 else f"{seconds * 1e3:10.3f} ms  "


def line(label: str, case: Case) -> str:
    return f"  {label:<44} median {_ns(case.median)}  best {_ns(case.best)}"


def ratio(label: str, ours: Case, base: Case) -> tuple[str, float]:
    """The median of the per-round ratios (both cases were timed in every round)."""
    value = statistics.median(o / b for o, b in zip(ours.samples, base.samples, strict=True))
    return f"  {label:<64} {value:8.3f}x", value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    options = parser.parse_args()

    from dynaconf import Dynaconf

    from dynconf.config import DynamicConfig

    binding = _binding()
    with tempfile.TemporaryDirectory() as tmp:
        toml_path = _write_workload(Path(tmp))
        settings_cls = _settings_class(toml_path)

        loads = loaders(toml_path, binding)
        load_dynconf, load_pydantic_settings = loads["dynconf"], loads["pydantic-settings"]
        load_dynaconf, load_binding = loads["dynaconf"], loads.get("dynamic-config-py")

        expected = load_pydantic_settings().model_dump()
        assert load_dynconf().model_dump() == expected
        assert load_dynaconf().model_dump() == expected
        if load_binding is not None:
            assert load_binding().model_dump() == expected

        # ------------------------------------------------------------------ load
        load = {
            "dynconf": Case("dynconf", load_dynconf, 20, []),
            "pydantic-settings": Case("pydantic-settings", load_pydantic_settings, 20, []),
            "dynaconf": Case("dynaconf", load_dynaconf, 5, []),
        }
        if load_binding is not None:
            load["dynamic-config-py"] = Case("dynamic-config-py", load_binding, 20, [])
        measure(list(load.values()), options.rounds)

        # ------------------------------------------------------------------ reads
        config = DynamicConfig(Model, "").file(toml_path).whole_document().env("BENCH_")
        config.init()
        ps = settings_cls()
        app = SimpleNamespace(settings=ps)  # where a service keeps its settings object
        held = config.current()  # one unit of work's model (pinned to one generation)
        dc_settings = Dynaconf(settings_files=[str(toml_path)], envvar_prefix="BENCH")
        dc_settings.as_dict()  # force the lazy load before timing reads

        class Proxy:
            """A live proxy (the shape a `config.proxy.db` API would have): forwards."""

            def __getattr__(self, name: str) -> Any:
                return getattr(config.current(), name)

        proxy: Any = Proxy()
        n = 200_000
        reads = {
            "ps.db.d7": Case("held pydantic-settings ps.db.d7", lambda: ps.db.d7, n, []),
            "app.settings.db.d7": Case(
                "pydantic-settings on an object app.settings.db.d7",
                lambda: app.settings.db.d7,
                n,
                [],
            ),
            "current().db.d7": Case(
                "dynconf config.current().db.d7", lambda: config.current().db.d7, n, []
            ),
            "live.db.d7": Case("dynconf config.live.db.d7", lambda: config.live.db.d7, n, []),
            "held.db.d7": Case("dynconf held = current(); held.db.d7", lambda: held.db.d7, n, []),
            "proxy.db.d7": Case("a __getattr__ proxy proxy.db.d7", lambda: proxy.db.d7, n, []),
            "dynaconf": Case("dynaconf settings.DB.D7", lambda: dc_settings.DB.D7, 20_000, []),
            "ps": Case("floor: ps (the name alone)", lambda: ps, n, []),
            "current()": Case("floor: config.current()", lambda: config.current(), n, []),
            "live": Case("floor: config.live", lambda: config.live, n, []),
            "empty": Case("floor: an empty lambda", lambda: None, n, []),
        }
        if binding is not None:
            bound = binding_config(binding, toml_path)
            bound.init()
            reads["binding"] = Case(
                "dynamic-config-py config.current().db.d7", lambda: bound.current().db.d7, n, []
            )
        measure(list(reads.values()), options.rounds)

        # ------------------------------------------------------------------ reload
        samples, cpu = [], []
        for i in range(50):
            toml_path.write_text(
                toml_path.read_text(encoding="utf-8").replace(f"k0 = {i}", f"k0 = {i + 1}"),
                encoding="utf-8",
            )
            started, started_cpu = time.perf_counter(), time.thread_time()
            config.reload()
            samples.append(time.perf_counter() - started)
            cpu.append(time.thread_time() - started_cpu)
        assert config.current().k0 == 50
        assert config.live.k0 == 50

    print(f"rounds: {options.rounds} interleaved; per-call CPU time, median (best)")
    print("load (files + env -> model)")
    for case in load.values():
        print(line(case.name, case))
    if binding is None:
        print("  dynamic-config-py: not installed (set DYNCONF_BENCH_DCPY to its venv)")
    print("reads")
    for case in reads.values():
        print(line(case.name, case))
    p50 = statistics.median(samples) * 1000
    p95 = sorted(samples)[int(len(samples) * 0.95) - 1] * 1000
    print(
        f"  {'watched reload, wall (event settled -> installed)':<50} p50 {p50:5.2f} ms  p95 {p95:5.2f} ms"
    )
    cpu50 = statistics.median(cpu) * 1000
    cpu95 = sorted(cpu)[int(len(cpu) * 0.95) - 1] * 1000
    print(f"  {'the same reloads, CPU time':<50} p50 {cpu50:5.2f} ms  p95 {cpu95:5.2f} ms")

    print("ratios (median of per-round ours / baseline, this run)")
    rows: dict[str, float] = {}
    for peer in [name for name in load if name != "dynconf"]:
        text, rows[f"load/{peer}"] = ratio(f"load dynconf / {peer}", load["dynconf"], load[peer])
        print(text)
    base = reads["ps.db.d7"]
    for key in ("current().db.d7", "live.db.d7", "held.db.d7", "proxy.db.d7"):
        text, rows[key] = ratio(f"{reads[key].name} / {base.name}", reads[key], base)
        print(text)
    text, _ = ratio(
        f"{reads['live.db.d7'].name} / {reads['app.settings.db.d7'].name}",
        reads["live.db.d7"],
        reads["app.settings.db.d7"],
    )
    print(text)
    for key in ("dynaconf", "binding"):
        if key in reads:
            text, rows[key] = ratio(
                f"{reads['current().db.d7'].name} / {reads[key].name}",
                reads["current().db.d7"],
                reads[key],
            )
            print(text)
    call = reads["current()"].median - reads["ps"].median
    attribute = reads["live"].median - reads["ps"].median
    gap = reads["current().db.d7"].median - base.median
    print(
        f"  floor: the current() call costs {call * 1e9:.1f} ns over naming a held object, "
        f"config.live {attribute * 1e9:.1f} ns; current().db.d7 is {gap * 1e9:.1f} ns over "
        "ps.db.d7"
    )

    verdicts = {
        "load <= 0.5x pydantic-settings": rows["load/pydantic-settings"] <= 0.5,
        "live nested read (config.live) <= 1.05x a held pydantic-settings instance": rows[
            "live.db.d7"
        ]
        <= 1.05,
        "held model read <= 1.05x (it is a plain pydantic read)": rows["held.db.d7"] <= 1.05,
        "nested read faster than dynaconf": rows["dynaconf"] < 1,
        "reload p95 <= 5 ms": p95 <= 5.0,
    }
    for name, ok in verdicts.items():
        print(f"  {'met' if ok else 'MISSED'}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
