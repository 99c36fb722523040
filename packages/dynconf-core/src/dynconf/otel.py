"""The engine's ``dynamic_config_*`` series through an OpenTelemetry ``Meter``.

For an application that already has a meter provider: one observable instrument per
series, whose callback reads :func:`dynconf.metric_samples.samples` at collection time,
the same values the prometheus collector exposes (one source, no second bookkeeping)::

    ConfigMeter(metrics.get_meter("myapp")).add("db", db_config)

Counters are observable counters, everything else observable gauges; attributes are the
same labels (``config``, ``reason``, ``kind``). Needs ``opentelemetry-api``
(``pip install dynconf-core[otel]``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dynconf.metric_samples import SERIES, Series, samples

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

    from dynconf.config import DynamicConfig

__all__ = ["ConfigMeter"]


class ConfigMeter:
    """Observable instruments over the configurations :meth:`add` names."""

    def __init__(self, meter: Meter) -> None:
        self._configs: dict[str, DynamicConfig[Any]] = {}
        for series in SERIES:
            callback = self._observer(series)
            if series.kind == "counter":
                meter.create_observable_counter(
                    series.name, callbacks=[callback], description=series.doc
                )
            else:
                meter.create_observable_gauge(
                    series.name, callbacks=[callback], description=series.doc
                )

    def add(self, name: str, config: DynamicConfig[Any]) -> ConfigMeter:
        """Report ``config`` with ``config=<name>``; chains like the collector's."""
        if name in self._configs and self._configs[name] is not config:
            raise ValueError(f"the meter already reports a configuration named {name!r}")
        self._configs[name] = config
        return self

    def _observer(self, series: Series) -> Callable[[CallbackOptions], Iterable[Observation]]:
        keys = ("config", *series.labels)

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            from opentelemetry.metrics import Observation

            return [
                Observation(sample.value, dict(zip(keys, sample.labels, strict=True)))
                for sample in samples(self._configs)
                if sample.series == series.name
            ]

        return observe
