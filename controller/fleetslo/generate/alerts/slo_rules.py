"""Recording rules and burn-rate alerts for the latency objectives of one FleetSLO.

The SLI is the share of requests over the threshold, counted from vLLM's histogram: requests
(``_count``) minus requests at or under the edge (``_bucket{le=…}``), summed over engines and
replicas. Each window's ratio divides by ``(requests > 0)``, so a window without traffic has no
ratio at all (an alert cannot fire on it, a dashboard shows "no data") instead of NaN. The period
ratio sums recorded 5-minute *rates* (0 without traffic, never NaN), so one idle minute cannot
poison 28 days, and weighs every request the same (events, not an average of ratios).

Generation only: returns ``Group`` values; ``render`` writes them.
"""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.generate.alerts import promql as pq
from fleetslo.generate.alerts.rules import Alert, Recording, Rule, duration
from fleetslo.generate.alerts.spec import LatencySlo, TargetSpec
from fleetslo.generate.alerts.windows import BurnAlert

M = cv.MODEL_LABEL
_BURN_ALERT = {cv.SloName.TTFT: cv.AlertName.TTFT_BUDGET_BURN, cv.SloName.TPOT: cv.AlertName.TPOT_BUDGET_BURN}
_WHAT = {cv.SloName.TTFT: "time to first token", cv.SloName.TPOT: "time per output token"}


def windows_of(slo: LatencySlo) -> list[float]:
    """Every window a ratio is recorded for: 5m (dashboards) and each tier's two windows."""
    seen = {300.0}
    for burn in slo.burns:
        seen.update((burn.tier.long, burn.tier.short))
    return sorted(seen)


def _selector(slo: LatencySlo) -> str:
    return pq.matchers({M: slo.model_name})


def _ours(slo: LatencySlo) -> str:
    """Selects this SLO's recorded series."""
    return pq.matchers({M: slo.model_name, cv.LABEL_SLO: slo.name.value})


def requests_rate(slo: LatencySlo, window: str) -> str:
    return pq.sum_by(M, pq.vllm_rate(slo.histogram, "_count", _selector(slo), window))


def good_rate(slo: LatencySlo, window: str) -> str:
    selector = pq.matchers({M: slo.model_name, "le": slo.bucket.le})
    return pq.sum_by(M, pq.vllm_rate(slo.histogram, "_bucket", selector, window))


def errors_rate(slo: LatencySlo, window: str) -> str:
    # Never below 0: both sides come from one scrape, but rate() rounding must not make a
    # negative error count that would cancel real errors in the period sum.
    inner = f"{requests_rate(slo, window)}\n-\n{good_rate(slo, window)}"
    return f"clamp_min(\n{pq.indent(inner)},\n  0\n)"


def error_ratio(slo: LatencySlo, window: str) -> str:
    """1 − good/total; no traffic divides by nothing (absent), never 0/0 = NaN."""
    total = f"(\n{pq.indent(requests_rate(slo, window))}\n  > 0\n)"
    return f"1 - (\n{pq.indent(good_rate(slo, window))}\n  /\n{pq.indent(total)}\n)"


def sli_recordings(slo: LatencySlo) -> list[Recording]:
    labels = {cv.LABEL_SLO: slo.name.value}
    ours = _ours(slo)
    rules = [
        Recording(cv.RULE_SLO_REQUESTS_RATE5M, requests_rate(slo, "5m"), labels),
        Recording(cv.RULE_SLO_ERRORS_RATE5M, errors_rate(slo, "5m"), labels),
        Recording(
            cv.rule_slo_error_ratio("5m"),
            f"{cv.RULE_SLO_ERRORS_RATE5M}{ours}\n/\n({cv.RULE_SLO_REQUESTS_RATE5M}{ours} > 0)",
            labels,
        ),
    ]
    for window in windows_of(slo):
        if window != 300.0:
            rules.append(
                Recording(
                    cv.rule_slo_error_ratio(duration(window)), error_ratio(slo, duration(window)), labels
                )
            )
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
    labels = {M: slo.model_name, cv.LABEL_SLO: slo.name.value}
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
            cv.LABEL_SLO: slo.name.value,
            M: slo.model_name,
            cv.LABEL_LONG_WINDOW: long,
            cv.LABEL_SHORT_WINDOW: short,
        },
        summary=f"{{{{ $labels.model_name }}}}: {what} over {limit} for too many requests ({long} burn)",
        description=(
            f"{{{{ $value | humanizePercentage }}}} of {{{{ $labels.model_name }}}} requests had a {what} "
            f"over {limit} in the last {long} (and over {pct(burn.error_ratio_threshold)} in the last "
            f"{short}); "
            f"the p{slo.objective * 100:g} objective allows {pct(slo.budget)}. "
            f"Burning at {pq.fmt(burn.factor)}x or faster, the {duration(slo.period)} error budget lasts "
            f"{days:.3g} days or less."
        ),
        runbook=(
            f"Open the fleet dashboard for {slo.model_name}: check replicas desired vs ready, the "
            "queue and KV cache, and the controller's decisions. If replicas are pinned at max, raise "
            "replicas.max or GPU quota; if the controller is in advisory mode, apply its recommendation."
        ),
    )


def pct(ratio: float) -> str:
    return f"{ratio * 100:.3g}%"


def bucket_missing_alert(slo: LatencySlo) -> Alert:
    count = pq.vllm_any(slo.histogram, "_count", _selector(slo))
    bucket = pq.vllm_any(slo.histogram, "_bucket", pq.matchers({M: slo.model_name, "le": slo.bucket.le}))
    return Alert(
        alert=cv.AlertName.SLO_BUCKET_MISSING,
        expr=f"{pq.sum_by(M, count)}\nunless\n{pq.sum_by(M, bucket)}",
        hold="15m",
        labels={cv.LABEL_SEVERITY: cv.SEVERITY_TICKET, cv.LABEL_SLO: slo.name.value, M: slo.model_name},
        summary=(
            f'{{{{ $labels.model_name }}}}: no le="{slo.bucket.le}" bucket, '
            f"the {slo.name.value} SLO alerts are blind"
        ),
        description=(
            f"vLLM has counted {{{{ $value | humanize }}}} requests in {slo.histogram.value} for "
            f'{{{{ $labels.model_name }}}} but serves no bucket at le="{slo.bucket.le}", so the share of '
            f"requests over {slo.threshold:g}s cannot be counted and the burn-rate alerts for this SLO "
            "cannot fire."
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
