"""The fleet overview: per model, latency against the targets, SLO attainment and budget, traffic,
load, replicas and batch limit, efficiency and cost, with the controller's decisions marked.

Latency quantiles come from vLLM's histograms across all replicas (``$quantile``, default 0.9);
the target lines, error ratios and budget from the recording rules, so they match the alerts.
"""

from __future__ import annotations

from grafanalib import core as g

from fleetslo.core import conventions as cv
from fleetslo.generate.dashboards import queries as qs
from fleetslo.generate.dashboards.panels import (
    Layout,
    Q,
    annotation,
    custom_variable,
    dashboard,
    datasource_variable,
    query_variable,
    stat,
    timeseries,
)

UID = "fleetslo-fleet"
_ENGINES = f'label_values({{__name__=~"{cv.promql_name_regex(cv.Gauge.RUNNING)}"}}'
BUDGET_STEPS: list[tuple[str, float | None]] = [
    ("red", None),
    ("orange", 0.0),
    ("yellow", 0.25),
    ("green", 0.5),
]
BURN_STEPS: list[tuple[str, float | None]] = [("green", None), ("yellow", 1.0), ("red", 5.0)]


def variables() -> list[g.Template]:
    return [
        datasource_variable(),
        query_variable("namespace", "Namespace", f"{_ENGINES}, namespace)"),
        query_variable("model", "Model", f'{_ENGINES[:-1]}, namespace=~"$namespace"}}, model_name)'),
        custom_variable("quantile", "Quantile", ["0.5", "0.9", "0.95", "0.99"], "0.9"),
        query_variable(
            "window", "Sidecar window", f"label_values({cv.TOKENS_PER_JOULE}, window)", multi=False
        ),
    ]


def slo_row(layout: Layout) -> None:
    layout.row("SLO: budget and burn")
    layout.add(
        stat(
            "Error budget left",
            "Share of the error budget of the period (spec.objectives.period) "
            "still unspent, per model and objective; below 0 the objective is missed for the period.",
            [Q(f"{cv.RULE_SLO_BUDGET_REMAINING}{qs.RULE_SEL}", "{{model_name}} {{slo}}")],
            "percentunit",
            BUDGET_STEPS,
        ),
        w=8,
        h=6,
    )
    layout.add(
        stat(
            "Burn rate (1h)",
            "Error ratio over the last hour divided by the budget: 1 spends the "
            "budget exactly over the period; the fastest page fires at 5.5x for a p90 objective.",
            [Q(qs.burn_rate("1h"), "{{model_name}} {{slo}}")],
            "suffix:x",
            BURN_STEPS,
        ),
        w=8,
        h=6,
    )
    layout.add(
        stat(
            "Attainment over the period",
            "Share of requests within the threshold since the start "
            "of the budget period (events, not an average of ratios).",
            [Q(f"1 - {cv.RULE_SLO_ERROR_RATIO_PERIOD}{qs.RULE_SEL}", "{{model_name}} {{slo}}")],
            "percentunit",
            [("blue", None)],
            decimals=2,
        ),
        w=8,
        h=6,
    )


def latency_row(layout: Layout) -> None:
    layout.row("Latency against the targets")
    for slo, histogram, what in (
        (cv.SloName.TTFT, cv.Histogram.TTFT, "Time to first token"),
        (cv.SloName.TPOT, cv.Histogram.TPOT, "Time per output token"),
    ):
        layout.add(
            timeseries(
                f"{what}, p$quantile, vs target",
                f"{what} at the chosen quantile across every "
                "replica of the model (from vLLM's histograms), and the FleetSLO threshold (dashed).",
                [
                    Q(qs.vllm_quantile(histogram), "{{model_name}}"),
                    Q(f"{cv.RULE_SLO_THRESHOLD}{qs.slo_sel(slo)}", "{{model_name}} target"),
                ],
                "s",
            )
        )
    layout.add(
        timeseries(
            "Inter-token latency, p$quantile",
            "Gap between streamed tokens (per decode step, the timely TPOT signal) at the chosen quantile.",
            [Q(qs.vllm_quantile(cv.Histogram.ITL), "{{model_name}}")],
            "s",
        )
    )
    layout.add(
        timeseries(
            "Queue time, p$quantile",
            "Time requests waited in vLLM's queue before their prefill started: the first sign of "
            "missing capacity.",
            [Q(qs.vllm_quantile(cv.Histogram.QUEUE), "{{model_name}}")],
            "s",
        )
    )
    for slo in cv.SloName:
        layout.add(
            timeseries(
                f"{slo.value.upper()}: requests over the threshold",
                "Share of requests over "
                "the latency threshold (5m and 1h), against the budget the objective allows (dashed). "
                "The burn-rate alerts compare exactly these series.",
                [
                    Q(f"{cv.rule_slo_error_ratio('5m')}{qs.slo_sel(slo)}", "{{model_name}} 5m"),
                    Q(f"{cv.rule_slo_error_ratio('1h')}{qs.slo_sel(slo)}", "{{model_name}} 1h"),
                    Q(f"{cv.RULE_SLO_ERROR_BUDGET}{qs.slo_sel(slo)}", "{{model_name}} budget"),
                ],
                "percentunit",
            )
        )
    layout.add(
        timeseries(
            "Error budget left over time",
            "Budget remaining over the period, per objective.",
            [Q(f"{cv.RULE_SLO_BUDGET_REMAINING}{qs.RULE_SEL}", "{{model_name}} {{slo}}")],
            "percentunit",
        ),
        w=12,
    )
    layout.add(
        timeseries(
            "Sidecar SLO attainment",
            "Share of requests within the threshold as each sidecar "
            "sees it over its window (what the controller reads).",
            [
                Q(
                    f'{cv.SLO_ATTAINMENT}{qs.SEL[:-1]}, window=~"$window"}}',
                    "{{model_name}} {{slo}} {{instance}}",
                )
            ],
            "percentunit",
        ),
        w=12,
    )


def traffic_row(layout: Layout) -> None:
    layout.row("Traffic and load")
    reasons = qs.vllm_rate_sum(cv.Counter.REQUEST_SUCCESS, "_total", by=f"{cv.MODEL_LABEL}, finished_reason")
    layout.add(
        timeseries(
            "Finished requests by reason",
            "Requests vLLM finished per second, by how they ended (stop, length, abort, error).",
            [Q(reasons, "{{model_name}} {{finished_reason}}")],
            "reqps",
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "Tokens per second",
            "Prompt tokens prefilled and tokens generated per second.",
            [
                Q(qs.vllm_rate_sum(cv.Counter.PROMPT_TOKENS, "_total"), "{{model_name}} prompt"),
                Q(qs.vllm_rate_sum(cv.Counter.GENERATION_TOKENS, "_total"), "{{model_name}} generated"),
            ],
            "short",
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "Running and waiting",
            "Requests in the running batch and waiting for a slot, summed over replicas.",
            [
                Q(qs.vllm_gauge_sum(cv.Gauge.RUNNING), "{{model_name}} running"),
                Q(qs.vllm_gauge_sum(cv.Gauge.WAITING), "{{model_name}} waiting"),
            ],
            "short",
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "KV-cache usage per replica",
            "KV-cache blocks in use (0-1) per replica; near 1 vLLM preempts and requests wait.",
            [
                Q(
                    qs.vllm_gauge_max(cv.Gauge.KV_CACHE_USAGE, f"{cv.MODEL_LABEL}, instance"),
                    "{{model_name}} {{instance}}",
                )
            ],
            "percentunit",
            valueMax=1,
        ),
        w=12,
    )
    layout.add(
        timeseries(
            "Preemptions",
            "Requests preempted per second (KV cache exhausted).",
            [Q(qs.vllm_rate_sum(cv.Counter.PREEMPTIONS, "_total"), "{{model_name}}")],
            "reqps",
        ),
        w=12,
    )


def capacity_row(layout: Layout) -> None:
    layout.row("Capacity: replicas and batch limit")
    layout.add(
        timeseries(
            "Replicas",
            "Desired and current replicas from the controller, replicas whose "
            "sidecar reads vLLM (ready), and the spec's bounds (dashed).",
            [
                Q(qs.with_model(cv.CONTROLLER_DESIRED_REPLICAS), "{{model_name}} desired"),
                Q(qs.with_model(cv.CONTROLLER_CURRENT_REPLICAS), "{{model_name}} current"),
                Q(qs.ready_replicas(), "{{model_name}} ready"),
                Q(f"{cv.RULE_TARGET_REPLICAS_MAX}{qs.RULE_SEL}", "{{model_name}} max"),
                Q(f"{cv.RULE_TARGET_REPLICAS_MIN}{qs.RULE_SEL}", "{{model_name}} min limit"),
            ],
            "short",
        )
    )
    layout.add(
        timeseries(
            "Batch limit",
            "The per-replica concurrent-sequence limit the controller wants, and "
            "the limit each replica's gate enforces.",
            [
                Q(qs.with_model(cv.CONTROLLER_BATCH_LIMIT), "{{model_name}} desired"),
                Q(f"{cv.GATE_LIMIT}", "gate {{instance}}"),
            ],
            "short",
        )
    )


def efficiency_row(layout: Layout) -> None:
    layout.row("Efficiency and cost")
    layout.add(
        timeseries(
            "Tokens per joule",
            "Generated tokens per joule of GPU energy, per replica, over the sidecar's window.",
            [Q(f'{cv.TOKENS_PER_JOULE}{qs.SEL[:-1]}, window=~"$window"}}', "{{model_name}} {{instance}}")],
            "short",
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "GPU-seconds per 1k tokens",
            "GPU time paid for (allocated) and used (busy) per 1,000 generated tokens.",
            [
                Q(
                    f'{cv.GPU_SECONDS_PER_1K_TOKENS}{qs.SEL[:-1]}, window=~"$window"}}',
                    "{{model_name}} {{basis}} {{instance}}",
                )
            ],
            "s",
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "Cost per 1M generated tokens",
            "Replicas serving x spec.cost.per_replica_hour / "
            "generated tokens per hour x 1e6 (in the spec's currency).",
            [Q(qs.cost_per_million_tokens(), "{{model_name}}")],
            "short",
        ),
        w=8,
    )


def build() -> g.Dashboard:
    layout = Layout()
    for row in (slo_row, latency_row, traffic_row, capacity_row, efficiency_row):
        row(layout)
    decisions = annotation(
        "Controller decisions",
        qs.decisions_annotation(),
        title="{{reason}}",
        text="{{target}}: {{reason}}",
        color="orange",
    )
    return dashboard(
        "fleetslo / fleet overview",
        UID,
        "Per model: latency against the FleetSLO targets, "
        "error budget and burn, traffic, load, replicas, batch limit, efficiency and cost.",
        variables(),
        layout,
        annotations=[decisions],
    )
