"""Metric families declared once, as data: what a collector may yield, and how it describes itself.

prometheus_client's registry learns a collector's names from ``describe()`` — and only from there
when ``auto_describe`` is off, as on every registry of ours (auto-describing would call
``collect()`` at registration, before any data exists). A collector that describes nothing lets two
families of one name share a registry unnoticed. So each collector keeps a table of ``FamilySpec``,
builds its fresh families per scrape from it (``spec.family()``) and describes itself from the same
table (``describe``): the two cannot disagree, and a clash fails at ``register()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
    UnknownMetricFamily,
)

Kind = Literal["gauge", "counter", "histogram", "info", "unknown"]

_CLASSES: dict[str, type[Metric]] = {
    "gauge": GaugeMetricFamily,
    "counter": CounterMetricFamily,
    "histogram": HistogramMetricFamily,
    "info": InfoMetricFamily,
    "unknown": UnknownMetricFamily,
}


@dataclass(frozen=True, slots=True)
class FamilySpec:
    """One family a collector may yield: name (as exposed), type, help text and label names."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()

    def family(self) -> Metric:
        """A fresh, empty family of this spec's type (what ``describe()`` returns)."""
        return _CLASSES[self.kind](self.name, self.help, labels=list(self.labels))  # type: ignore[call-arg]

    def gauge(self, value: float | None = None) -> GaugeMetricFamily:
        """A fresh gauge family to fill this scrape, or with ``value`` its one unlabelled sample."""
        self._check("gauge")
        if value is not None:
            return GaugeMetricFamily(self.name, self.help, value=value)
        return GaugeMetricFamily(self.name, self.help, labels=list(self.labels))

    def counter(self, value: float | None = None) -> CounterMetricFamily:
        self._check("counter")
        if value is not None:
            return CounterMetricFamily(self.name, self.help, value=value)
        return CounterMetricFamily(self.name, self.help, labels=list(self.labels))

    def histogram(self) -> HistogramMetricFamily:
        self._check("histogram")
        return HistogramMetricFamily(self.name, self.help, labels=list(self.labels))

    def unknown(self) -> UnknownMetricFamily:
        self._check("unknown")
        return UnknownMetricFamily(self.name, self.help, labels=list(self.labels))

    def info(self, value: dict[str, str] | None = None) -> InfoMetricFamily:
        """A fresh info family (labelled, to fill), or with ``value`` its one unlabelled sample."""
        self._check("info")
        if value is not None:
            return InfoMetricFamily(self.name, self.help, value=value)
        return InfoMetricFamily(self.name, self.help, labels=list(self.labels))

    def _check(self, kind: Kind) -> None:
        if self.kind != kind:
            raise TypeError(f"{self.name} is declared a {self.kind}, not a {kind}")


def describe(specs: Iterable[FamilySpec]) -> list[Metric]:
    """Empty families of every spec: what ``Collector.describe()`` returns."""
    return [spec.family() for spec in specs]


def by_name(specs: Iterable[FamilySpec]) -> dict[str, FamilySpec]:
    return {spec.name: spec for spec in specs}
