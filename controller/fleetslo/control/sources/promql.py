"""PromQL for one target's observation, built from ``conventions`` names: pure strings, no I/O.

Every signal of one target goes into **one** query: each part is tagged with a ``fleetslo_signal``
label (``label_replace``) and the parts are joined with ``or``, so a tick costs one HTTP request
per target whatever the number of signals, on any Prometheus-compatible API (Prometheus, Thanos
Query, Mimir, VictoriaMetrics all implement ``label_replace``, ``or`` and ``timestamp``).

Names: a vLLM series may be stored as ``vllm:x`` or, escaped by newer client libraries, ``vllm_x``
(and ``ray_vllm:x`` under Ray Serve), so selectors match ``__name__=~`` all of them. A legacy alias
(``gpu_cache_usage_perc`` for ``kv_cache_usage_perc``) is used only where the current name is absent
(``current or legacy``): some vLLM versions export both, and summing them would count twice.
Aggregations never name the ``engine`` label, so pages with and without it both work.

Behind an admission gate, requests held back by the batch limit wait in the gate's queue, which
vLLM does not see: waiting adds the gate's ``fleetslo_gate_queue_length`` (``(vllm + gate) or
vllm``, so a fleet without a gate keeps vLLM's sum and nothing is counted twice), and TTFT/TPOT come
from the gate's exact histograms (arrival at the gate to the first token) in windows where the gate
saw a streamed request, else from vLLM's (``gate or (vllm unless on() gate)``: one bucket layout,
never a mix). Gate series carry no ``model_name``; they are matched by namespace and pod, as the
GPU series are. In a fleet where only some pods run a gate, the gate's histogram covers only those.

Histograms are returned per ``le`` bucket (rates), not as ``histogram_quantile``: the caller computes
p50/p90/p99 and the attainment at the SLO threshold from one set of buckets with the same
Prometheus-exact math the sidecar uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from fleetslo.core import conventions as cv
from fleetslo.core.spec import Target

#: The label that tells the parts of the combined query apart.
SIGNAL_LABEL = "fleetslo_signal"


class Signal(StrEnum):
    TTFT = "ttft"
    ITL = "itl"
    TPOT = "tpot"
    REQUESTS = "request_rate"
    PROMPT_TOKENS = "prompt_tokens_rate"
    GENERATION_TOKENS = "generation_tokens_rate"
    PREEMPTIONS = "preemption_rate"
    RUNNING = "running"
    WAITING = "waiting"
    KV_CACHE = "kv_cache_usage"
    GPU_UTILIZATION = "gpu_utilization"
    NEWEST = "newest_sample"
    REPORTING = "replicas_reporting"


HISTOGRAMS: dict[Signal, str] = {
    Signal.TTFT: cv.Histogram.TTFT,
    Signal.ITL: cv.Histogram.ITL,
    Signal.TPOT: cv.Histogram.TPOT,
}
COUNTERS: dict[Signal, str] = {
    Signal.REQUESTS: cv.Counter.REQUEST_SUCCESS,
    Signal.PROMPT_TOKENS: cv.Counter.PROMPT_TOKENS,
    Signal.GENERATION_TOKENS: cv.Counter.GENERATION_TOKENS,
    Signal.PREEMPTIONS: cv.Counter.PREEMPTIONS,
}
#: Histogram signals the gate measures per request, from arrival at the gate (queueing included).
GATE_HISTOGRAMS: dict[Signal, str] = {Signal.TTFT: cv.GATE_TTFT, Signal.TPOT: cv.GATE_TPOT}
#: Gauge signals and how they aggregate over replicas and engines.
GAUGES: dict[Signal, tuple[str, str]] = {
    Signal.RUNNING: (cv.Gauge.RUNNING, "sum"),
    Signal.WAITING: (cv.Gauge.WAITING, "sum"),
    Signal.KV_CACHE: (cv.Gauge.KV_CACHE_USAGE, "avg"),
}

#: Pod names a workload's controller gives its pods (the name itself is escaped by the caller).


def quote(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def duration(seconds: float) -> str:
    """A PromQL range duration: whole seconds when possible, else milliseconds."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def pod_regex(target: Target) -> str:
    """An RE2 pattern for the pods of ``target`` (anchored by PromQL's ``=~``)."""
    return cv.pod_regex(target.workload_kind.value, target.name)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which series belong to one target: label names are configurable per installation."""

    target: Target
    namespace_label: str | None = "namespace"
    pod_label: str | None = "pod"
    extra_matchers: str = ""

    def matchers(self, *, model: bool = True) -> list[str]:
        out = [f"{cv.MODEL_LABEL}={quote(self.target.model_name)}"] if model else []
        if self.namespace_label:
            out.append(f"{self.namespace_label}={quote(self.target.namespace)}")
        if self.pod_label:
            out.append(f"{self.pod_label}=~{quote(pod_regex(self.target))}")
        if self.extra_matchers.strip():
            out.append(self.extra_matchers.strip().strip(","))
        return out

    def vllm(self, names: tuple[str, ...]) -> str:
        """A selector for any of ``names`` (the stored spellings of one family) of this target."""
        alternatives = "|".join(re.escape(n) for n in names)
        return "{" + ", ".join([f"__name__=~{quote(alternatives)}", *self.matchers()]) + "}"

    def plain(self, name: str) -> str:
        """A selector for a fleetslo sidecar metric of this target's pods (no ``model_name``)."""
        return name + "{" + ", ".join(self.matchers(model=False)) + "}"

    @property
    def replica_label(self) -> str:
        """The label that tells replicas apart; ``instance`` when pods are not labelled."""
        return self.pod_label or "instance"


def _current_or_legacy(canonical: str, suffix: str, selection: Selection, render: str) -> str:
    """``render`` (a template with ``{sel}``) over the current names, falling back to legacy ones."""
    names = cv.promql_names(canonical, suffix)
    current = tuple(n for n in names if n.endswith(canonical + suffix))
    legacy = tuple(n for n in names if n not in current)
    expr = render.format(sel=selection.vllm(current))
    if legacy:
        expr = f"({expr}) or ({render.format(sel=selection.vllm(legacy))})"
    return expr


def _gate_or_vllm(gate_family: str, vllm: str, selection: Selection, w: str) -> str:
    """The gate's bucket rates where it saw requests in the window, else ``vllm``'s, never both."""
    buckets = f"sum by (le) (rate({selection.plain(gate_family + '_bucket')}[{w}]))"
    seen = f"sum(rate({selection.plain(gate_family + '_count')}[{w}])) > 0"
    gate = f"({buckets} and on() ({seen}))"
    return f"{gate} or (({vllm}) unless on() {gate})"


def _plus_gate_queue(vllm: str, selection: Selection) -> str:
    """vLLM's waiting plus the gate's queue; vLLM's alone where no gate reports one."""
    return f"(({vllm}) + sum({selection.plain(cv.GATE_QUEUE_LENGTH)})) or ({vllm})"


def _tag(signal: Signal, expr: str) -> str:
    return f'label_replace({expr}, "{SIGNAL_LABEL}", "{signal.value}", "", "")'


def signal_exprs(selection: Selection, window: float, max_age: float) -> dict[Signal, str]:
    """Each signal's expression on its own (for tests and for debugging by hand)."""
    w = duration(window)
    exprs: dict[Signal, str] = {}
    for signal, family in HISTOGRAMS.items():
        exprs[signal] = _current_or_legacy(family, "_bucket", selection, f"sum by (le) (rate({{sel}}[{w}]))")
    for signal, family in COUNTERS.items():
        exprs[signal] = _current_or_legacy(family, "_total", selection, f"sum(rate({{sel}}[{w}]))")
    for signal, (family, how) in GAUGES.items():
        exprs[signal] = _current_or_legacy(family, "", selection, f"{how}({{sel}})")
    for signal, gate_family in GATE_HISTOGRAMS.items():
        exprs[signal] = _gate_or_vllm(gate_family, exprs[signal], selection, w)
    exprs[Signal.WAITING] = _plus_gate_queue(exprs[Signal.WAITING], selection)
    exprs[Signal.GPU_UTILIZATION] = f"avg({selection.plain(cv.GPU_UTILIZATION)})"
    running = selection.vllm(cv.promql_names(cv.Gauge.RUNNING))
    exprs[Signal.NEWEST] = f"max(timestamp({running}))"
    # A replica reports when its newest sample is younger than max_age: Prometheus itself would
    # keep returning a vanished pod's last value for its whole 5-minute lookback.
    by = selection.replica_label
    exprs[Signal.REPORTING] = f"count(max by ({by}) (timestamp({running})) > time() - {max_age:g})"
    return exprs


def observation_query(selection: Selection, window: float, max_age: float) -> str:
    """Every signal of one target in one instant query, each tagged with ``fleetslo_signal``."""
    return " or ".join(_tag(s, e) for s, e in signal_exprs(selection, window, max_age).items())
