"""The sim-server's ``/metrics``: the engine model's counters as a vLLM page, byte for byte in form.

``VllmCollector`` is a prometheus-client custom collector that builds fresh families on every scrape
from the engine's ``EngineMetrics`` and the ``RequestStats`` (labels ``engine`` and ``model_name``,
vLLM's help texts, ``_total`` counters with ``_created`` series, vLLM's buckets or the custom ones
the server was started with). ``render`` negotiates the format exactly as vLLM does (prometheus-client's
``choose_encoder``), so a scraper asking for text 0.0.4 gets names with colons and one asking for
OpenMetrics gets what vLLM would give it. The GC, platform and process collectors vLLM's page also
carries are registered beside it.

Latencies are simulated seconds. It builds pages; it must not advance the engine (the caller hands
in metrics already brought up to date).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from fleetslo.core.families import FamilySpec, describe
from fleetslo.sim.server import families as f
from fleetslo.sim.vllm_metrics import ENGINE, EngineMetrics, Hist

LABELS = ("engine", "model_name")
#: ``le`` label values exactly as prometheus-client writes them (``"0.1"``, ``"+Inf"``); it is untyped.
_go_float = cast(Callable[[float], str], floatToGoString)
#: vLLM's default block size on GPUs; only ``cache_config_info`` shows it.
BLOCK_SIZE = 16


@dataclass(frozen=True, slots=True)
class PageSource:
    """What a scrape reads: the engine's metrics (brought up to date), the request stats, identity."""

    metrics: Callable[[], EngineMetrics]
    requests: f.RequestStats
    model_name: str
    #: Wall-clock time (epoch seconds) the engine's series started: every ``_created`` value.
    created: float
    kv_capacity_tokens: int


class VllmCollector:
    """Fresh vLLM families per scrape (never cached, so a scrape always sees the present)."""

    def __init__(self, source: PageSource) -> None:
        self.source = source

    def describe(self) -> list[Metric]:
        """Every vLLM family this page has, from the help tables ``collect()`` also reads."""
        specs = [
            *(FamilySpec(f.PREFIX + name, "gauge", text) for name, text in f.GAUGE_HELP.items()),
            *(FamilySpec(f.PREFIX + name, "counter", text) for name, text in f.COUNTER_HELP.items()),
            *(FamilySpec(f.PREFIX + name, "histogram", text) for name, text in f.HISTOGRAM_HELP.items()),
            FamilySpec(f.PREFIX + "cache_config_info", "gauge", f.CACHE_CONFIG_HELP),
        ]
        return describe(specs)

    def collect(self) -> Iterator[Metric]:
        m = self.source.metrics()
        yield from self._gauges(m)
        yield from self._counters(m)
        yield from self._histograms(m)
        yield self._cache_config()

    def _labels(self, *extra: str) -> list[str]:
        return [ENGINE, self.source.model_name, *extra]

    def _gauges(self, m: EngineMetrics) -> Iterator[Metric]:
        values = {
            "num_requests_running": m.running,
            "num_requests_waiting": m.waiting,
            "kv_cache_usage_perc": m.kv_usage,
        }
        for name, help_text in f.GAUGE_HELP.items():
            if name == "num_requests_waiting_by_reason":
                # Every waiting request here waits for capacity (nothing is deferred in the model).
                split = {"capacity": float(m.waiting), "deferred": 0.0}
                yield self._gauge(name, help_text, "reason", split)
            elif name == "engine_sleep_state":
                yield self._gauge(
                    name,
                    help_text,
                    "sleep_state",
                    {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0},
                )
            else:
                family = GaugeMetricFamily(f.PREFIX + name, help_text, labels=LABELS)
                family.add_metric(self._labels(), float(values[name]))
                yield family

    def _gauge(self, name: str, help_text: str, sub: str, values: dict[str, float]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(f.PREFIX + name, help_text, labels=(*LABELS, sub))
        for value_label, value in values.items():
            family.add_metric(self._labels(value_label), value)
        return family

    def _counters(self, m: EngineMetrics) -> Iterator[Metric]:
        prompt = float(m.prompt_tokens)
        plain = {
            "prefix_cache_queries": prompt,
            "num_preemptions": float(m.preemptions),
            "prompt_tokens": prompt,
            "generation_tokens": float(m.generation_tokens),
        }
        split: dict[str, tuple[str, dict[str, float]]] = {
            "prompt_tokens_by_source": (
                "source",
                {s: prompt if s == "local_compute" else 0.0 for s in f.PROMPT_SOURCES},
            ),
            "prompt_tokens_cached_by_source": ("source", dict.fromkeys(f.CACHE_TIERS, 0.0)),
            # The model always generates max_tokens tokens: every request finishes for "length".
            "request_success": (
                "finished_reason",
                {r: float(m.success) if r == "length" else 0.0 for r in f.FINISHED_REASONS},
            ),
        }
        created = self.source.created
        for name, help_text in f.COUNTER_HELP.items():
            if name == "admission_rejections":
                yield self._rejections(help_text)
                continue
            sub, values = split.get(name, ("", {"": plain.get(name, 0.0)}))
            family = CounterMetricFamily(f.PREFIX + name, help_text, labels=(*LABELS, sub) if sub else LABELS)
            for value_label, value in values.items():
                labels = self._labels(value_label) if sub else self._labels()
                family.add_metric(labels, value, created=created)
            yield family

    def _rejections(self, help_text: str) -> CounterMetricFamily:
        # vLLM's frontend counter: labelled by model and reason only, no engine.
        family = CounterMetricFamily(
            f.PREFIX + "admission_rejections", help_text, labels=("model_name", "reason")
        )
        for reason in f.REJECTION_REASONS:
            family.add_metric([self.source.model_name, reason], 0.0, created=self.source.created)
        return family

    def _histograms(self, m: EngineMetrics) -> Iterator[Metric]:
        engine_hists = m.histograms()
        request_hists = self.source.requests.histograms()
        for name, help_text in f.HISTOGRAM_HELP.items():
            hist = engine_hists.get(name) or request_hists[name]
            yield self._histogram(name, help_text, hist)

    def _histogram(self, name: str, help_text: str, hist: Hist) -> HistogramMetricFamily:
        cumulative = hist.cumulative()
        family = HistogramMetricFamily(f.PREFIX + name, help_text, labels=LABELS)
        buckets = [(_go_float(b), c) for b, c in zip(cumulative.bounds, cumulative.counts, strict=True)]
        family.add_metric(self._labels(), buckets, cumulative.sum)
        created = dict(zip(LABELS, self._labels(), strict=True))
        family.samples.append(Sample(f"{f.PREFIX}{name}_created", created, self.source.created))
        return family

    def _cache_config(self) -> GaugeMetricFamily:
        capacity = self.source.kv_capacity_tokens
        config = {
            "block_size": str(BLOCK_SIZE),
            "cache_dtype": "auto",
            "enable_prefix_caching": "False",
            "engine": ENGINE,
            "gpu_memory_utilization": "0.9",
            "kv_cache_size_tokens": str(capacity),
            "num_gpu_blocks": str(capacity // BLOCK_SIZE),
        }
        family = GaugeMetricFamily(f.PREFIX + "cache_config_info", f.CACHE_CONFIG_HELP, labels=list(config))
        family.add_metric(list(config.values()), 1.0)
        return family


def vllm_registry(source: PageSource) -> CollectorRegistry:
    """A private registry with the process collectors vLLM's page has, then the vLLM families."""
    registry = CollectorRegistry(auto_describe=False)
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)
    ProcessCollector(registry=registry)
    registry.register(VllmCollector(source))
    return registry


def render(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The page in the format ``accept`` asks for (text 0.0.4 by default) and its content type."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
