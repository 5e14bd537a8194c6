"""Recording rules and burn-rate alerts for the latency objectives of one FleetSLO.

The SLI is the share of requests over the threshold **as the user sees them**, for one target (the
pods of one workload: ``namespace`` + ``pod`` name, never the model name alone — two Deployments
serving one model are two SLOs):

* where the target's pods run the fleetslo gate and it saw requests in the window, the gate's own
  histograms count (``fleetslo_gate_ttft_seconds`` runs from arrival at the gate, so time in the
  gate's queue is inside TTFT), and for TTFT every request the gate **rejected** (queue full,
  timed out, draining) is a bad event: it never got a first token;
* otherwise vLLM's histograms: requests (``_count``) minus requests at or under the edge
  (``_bucket{le=…}``), summed over engines and replicas.

Never both in one window (``gate or (vllm unless on() gate)``): one bucket layout, nothing counted
twice. Each window's ratio divides by ``(requests > 0)``, so a window without traffic has no ratio
at all (an alert cannot fire on it, a dashboard shows "no data") instead of NaN. The period ratio
sums recorded 5-minute *rates* (0 without traffic, never NaN), so one idle minute cannot poison 28
days, and weighs every request the same (events, not an average of ratios).

Generation only: returns ``Group`` values; ``render`` writes them.
"""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.generate.alerts import promql as pq
from fleetslo.generate.alerts.buckets import le_label
from fleetslo.generate.alerts.rules import Alert, Recording, Rule, duration
from fleetslo.generate.alerts.spec import LatencySlo, TargetSpec
from fleetslo.generate.alerts.windows import BurnAlert

M = cv.MODEL_LABEL
_BURN_ALERT = {cv.SloName.TTFT: cv.AlertName.TTFT_BUDGET_BURN, cv.SloName.TPOT: cv.AlertName.TPOT_BUDGET_BURN}
_WHAT = {cv.SloName.TTFT: "time to first token", cv.SloName.TPOT: "time per output token"}
_GATE_HISTOGRAM = {cv.SloName.TTFT: cv.GATE_TTFT, cv.SloName.TPOT: cv.GATE_TPOT}


def windows_of(slo: LatencySlo) -> list[float]:
    """Every window a ratio is recorded for: 5m (dashboards) and each tier's two windows."""
    seen = {300.0}
    for burn in slo.burns:
        seen.update((burn.tier.long, burn.tier.short))
    return sorted(seen)


def _pods(slo: LatencySlo, **labels: str) -> str:
    """The target's pods (and ``labels``): the gate's and the GPUs' series carry no model."""
    where = {cv.LABEL_NAMESPACE: slo.scope.namespace, **labels}
    return pq.matchers(where, regex={cv.LABEL_POD: slo.scope.pods})


def _selector(slo: LatencySlo, **labels: str) -> str:
    """vLLM's series of the target's pods serving the model."""
    return _pods(slo, **{M: slo.model_name, **labels})


def labels_of(slo: LatencySlo) -> dict[str, str]:
    """Whose SLO a recorded series is: the target (namespace, workload), its model, the objective."""
    return {**slo.scope.labels, M: slo.model_name, cv.LABEL_SLO: slo.name.value}


def _ours(slo: LatencySlo) -> str:
    """Selects this SLO's recorded series."""
    return pq.matchers({**slo.scope.labels, cv.LABEL_SLO: slo.name.value})


def _sum(inner: str) -> str:
    """One series for the whole target; its labels come from the recording rule."""
    return f"sum(\n{pq.indent(inner)}\n)" if "\n" in inner else f"sum({inner})"


def _vllm_requests(slo: LatencySlo, window: str) -> str:
    return _sum(pq.vllm_rate(slo.histogram, "_count", _selector(slo), window))


def _vllm_good(slo: LatencySlo, window: str) -> str:
    return _sum(pq.vllm_rate(slo.histogram, "_bucket", _selector(slo, le=slo.bucket.le), window))


def _gate_requests(slo: LatencySlo, window: str) -> str:
    """What reached the gate: measured requests, plus (TTFT) the rejected ones, bad by definition."""
    family = _GATE_HISTOGRAM[slo.name]
    measured = f"sum(rate({family}_count{_pods(slo)}[{window}]))"
    if slo.name != cv.SloName.TTFT:
        return measured
    rejected = f"sum(rate({cv.GATE_REJECTED}_total{_pods(slo)}[{window}]))"
    return f"(\n  {measured}\n  +\n  {rejected}\n)\nor\n{measured}"


def _gate_good(slo: LatencySlo, window: str) -> str:
    # The gate's buckets have the threshold itself as an edge (SLO-aligned): exact, not the
    # nearest vLLM edge below.
    family = _GATE_HISTOGRAM[slo.name]
    return f"sum(rate({family}_bucket{_pods(slo, le=le_label(slo.threshold))}[{window}]))"


def gate_counts(slo: LatencySlo, window: str) -> str:
    """Non-empty while the gate saw requests in ``window`` and has the threshold's bucket."""
    requests = pq.indent(_gate_requests(slo, window), "    ")
    return f"(\n  (\n{requests}\n  ) > 0\n  and on()\n  {_gate_good(slo, window)}\n)"


def _gate_or_vllm(gate: str, vllm: str, slo: LatencySlo, window: str) -> str:
    counts = gate_counts(slo, window)
    return (
        f"(\n(\n{pq.indent(gate)}\n)\nand on()\n{counts}\n)\nor\n"
        f"(\n(\n{pq.indent(vllm)}\n)\nunless on()\n{counts}\n)"
    )


def requests_rate(slo: LatencySlo, window: str) -> str:
    return _gate_or_vllm(_gate_requests(slo, window), _vllm_requests(slo, window), slo, window)


def good_rate(slo: LatencySlo, window: str) -> str:
    return _gate_or_vllm(_gate_good(slo, window), _vllm_good(slo, window), slo, window)


def sli_recordings(slo: LatencySlo) -> list[Recording]:
    """Per window: requests and good requests (gate or vLLM), then the ratio from those two.

    The long gate-or-vLLM expressions are evaluated once per window; the ratio, the 5-minute
    errors and the period ratio are arithmetic on recorded series (rules of one group run in
    order, so each sees the ones above it at the same evaluation)."""
    labels, ours = labels_of(slo), _ours(slo)
    rules = []
    for window in (duration(w) for w in windows_of(slo)):
        requests, good = cv.rule_slo_requests(window), cv.rule_slo_good(window)
        rules += [
            Recording(requests, requests_rate(slo, window), labels),
            Recording(good, good_rate(slo, window), labels),
            # 1 - good/total; no traffic divides by nothing (absent), never 0/0 = NaN.
            Recording(
                cv.rule_slo_error_ratio(window), f"1 - {good}{ours}\n/\n({requests}{ours} > 0)", labels
            ),
        ]
    # Never below 0: both sides come from one evaluation, but rate() rounding must not make a
    # negative error count that would cancel real errors in the period sum.
    errors = (
        f"clamp_min(\n  {cv.rule_slo_requests('5m')}{ours}\n  -\n  {cv.rule_slo_good('5m')}{ours},\n  0\n)"
    )
    rules.append(Recording(cv.RULE_SLO_ERRORS_RATE5M, errors, labels))
    period = duration(slo.period)
    rules.append(
        Recording(
            cv.RULE_SLO_ERROR_RATIO_PERIOD,
            f"sum_over_time({cv.RULE_SLO_ERRORS_RATE5M}{ours}[{period}])\n/\n"
            f"(sum_over_time({cv.RULE_SLO_REQUESTS_RATE5M}{ours}[{period}]) > 0)",
            labels,
        )
    )
    rules.append(
        Recording(
            cv.RULE_SLO_BUDGET_REMAINING,
            f"1 - {cv.RULE_SLO_ERROR_RATIO_PERIOD}{ours} / {pq.fmt(slo.budget)}",
            labels,
        )
    )
    return rules


def meta_recordings(slo: LatencySlo) -> list[Recording]:
    """The spec's constants as series, so dashboards draw exactly what the alerts use."""
    labels = labels_of(slo)
    constants = (
        (cv.RULE_SLO_OBJECTIVE, slo.objective),
        (cv.RULE_SLO_ERROR_BUDGET, slo.budget),
        (cv.RULE_SLO_THRESHOLD, slo.threshold),
        (cv.RULE_SLO_THRESHOLD_BUCKET, slo.bucket.edge),
        (cv.RULE_SLO_PERIOD, slo.period),
    )
    return [Recording(name, f"vector({pq.fmt(value)})", labels) for name, value in constants]


def burn_alert(slo: LatencySlo, burn: BurnAlert) -> Alert:
    long, short = duration(burn.tier.long), duration(burn.tier.short)
    threshold = pq.fmt(burn.error_ratio_threshold)
    ours = _ours(slo)
    expr = (
        f"{cv.rule_slo_error_ratio(long)}{ours} > {threshold}\n"
        f"and\n{cv.rule_slo_error_ratio(short)}{ours} > {threshold}"
    )
    what, limit = _WHAT[slo.name], f"{slo.threshold:g}s"
    days = burn.exhaustion_seconds / 86_400
    return Alert(
        alert=_BURN_ALERT[slo.name],
        expr=expr,
        hold=duration(burn.tier.hold),
        labels={
            cv.LABEL_SEVERITY: burn.tier.severity,
            **labels_of(slo),
            cv.LABEL_LONG_WINDOW: long,
            cv.LABEL_SHORT_WINDOW: short,
        },
        summary=f"{who(slo)}: {what} over {limit} for too many requests ({long} burn)",
        description=(
            f"{{{{ $value | humanizePercentage }}}} of the requests to {who(slo)} had a {what} "
            f"over {limit} in the last {long} (and over {pct(burn.error_ratio_threshold)} in the last "
            f"{short}); "
            f"the p{slo.objective * 100:g} objective allows {pct(slo.budget)}. "
            f"Burning at {pq.fmt(burn.factor)}x or faster, the {duration(slo.period)} error budget lasts "
            f"{days:.3g} days or less."
        ),
        runbook=(
            f"Open the fleet dashboard for {slo.model_name}: check replicas desired vs ready, the gate's "
            "rejections and "
            "queue and KV cache, and the controller's decisions. If replicas are pinned at max, raise "
            "replicas.max or GPU quota; if the controller is in advisory mode, apply its recommendation."
        ),
    )


def who(slo: LatencySlo) -> str:
    """How an alert names its SLO's target: the model, then the workload serving it."""
    return f"{slo.model_name} ({slo.scope.namespace}/{slo.scope.workload})"


def pct(ratio: float) -> str:
    return f"{ratio * 100:.3g}%"


def bucket_missing_alert(slo: LatencySlo) -> Alert:
    count = pq.vllm_any(slo.histogram, "_count", _selector(slo))
    bucket = pq.vllm_any(slo.histogram, "_bucket", _selector(slo, le=slo.bucket.le))
    return Alert(
        alert=cv.AlertName.SLO_BUCKET_MISSING,
        expr=f"{_sum(count)}\nunless\n{_sum(bucket)}",
        hold="15m",
        labels={cv.LABEL_SEVERITY: cv.SEVERITY_TICKET, **labels_of(slo)},
        summary=f'{who(slo)}: no le="{slo.bucket.le}" bucket, the {slo.name.value} SLO alerts are blind',
        description=(
            f"vLLM has counted {{{{ $value | humanize }}}} requests in {slo.histogram.value} for "
            f'{who(slo)} but serves no bucket at le="{slo.bucket.le}", so the share of '
            f"requests over {slo.threshold:g}s cannot be counted and the burn-rate alerts for this SLO "
            "are blind wherever the gate does not measure."
        ),
        runbook=(
            "Make vLLM's buckets match the FleetSLO: start vLLM with --custom-histogram-buckets listing "
            f"{slo.bucket.edge:g}, or list vLLM's actual edges under "
            f"spec.objectives.{slo.name.value}.buckets "
            "and rebuild the rules (fleetslo alerts build)."
        ),
    )


def slo_rules(slo: LatencySlo) -> list[Rule]:
    rules: list[Rule] = [*meta_recordings(slo), *sli_recordings(slo)]
    rules.extend(burn_alert(slo, burn) for burn in slo.burns)
    rules.append(bucket_missing_alert(slo))
    return rules


def notes(target: TargetSpec) -> tuple[str, ...]:
    """Comments for the group: the burn table and any bucket fallback, in words."""
    lines = []
    for slo in target.slos:
        lines.append(
            f"{slo.name.value}: p{slo.objective * 100:g} <= {slo.threshold:g}s over {duration(slo.period)}, "
            f'budget {pct(slo.budget)}, counted at le="{slo.bucket.le}"'
            + ("" if slo.bucket.exact else " (NOT the threshold: nearest edge below)")
        )
        for burn in slo.burns:
            capped = f" (capped from {pq.fmt(burn.nominal_factor)}x: unreachable)" if burn.capped else ""
            lines.append(
                f"  {burn.tier.severity:6} {duration(burn.tier.long):>3}/{duration(burn.tier.short):<3} "
                f"burn {pq.fmt(burn.factor)}x{capped} -> error ratio > {pq.fmt(burn.error_ratio_threshold)}"
            )
    lines.extend(f"WARNING {w}" for w in target.warnings())
    return tuple(lines)
