"""The controller dashboard: leadership, mode (advisory or enforce), tick duration, decisions by
reason over time, actuation errors, and each target's replicas and batch limit.

The mode comes from ``fleetslo:target_info`` (the spec); decisions from the controller's own
counters, labelled ``target`` and ``reason`` (the same ``Reason`` the logs and Events carry).
"""

from __future__ import annotations

from grafanalib import core as g

from fleetslo.core import conventions as cv
from fleetslo.generate.dashboards.panels import (
    Layout,
    Q,
    dashboard,
    datasource_variable,
    query_variable,
    stat,
    table,
    timeseries,
)

UID = "fleetslo-controller"
T = '{target=~"$target"}'


def variables() -> list[g.Template]:
    return [
        datasource_variable(),
        query_variable("target", "Target", f"label_values({cv.RULE_TARGET_INFO}, target)"),
    ]


def tick_quantile(q: str) -> str:
    return (
        f"histogram_quantile({q}, sum by (le) (rate({cv.CONTROLLER_TICK_DURATION}_bucket[$__rate_interval])))"
    )


def state(layout: Layout) -> None:
    layout.row("State")
    layout.add(
        stat(
            "Leader",
            "Controllers holding the leader lease now: exactly 1 is healthy.",
            [Q(f"sum({cv.CONTROLLER_LEADER})")],
            "none",
            [("red", None), ("green", 1), ("red", 2)],
        ),
        w=4,
        h=6,
    )
    layout.add(
        table(
            "Targets and mode",
            "Each FleetSLO: its workload, model and whether the controller "
            "acts (enforce) or only recommends (advisory).",
            [Q(f"{cv.RULE_TARGET_INFO}{T}", instant=True)],
        ),
        w=20,
        h=6,
    )


def decisions(layout: Layout) -> None:
    layout.row("Decisions")
    layout.add(
        timeseries(
            "Decisions by reason",
            "Decisions per interval by reason (ScaleUpSLOBreach, HoldStaleData, TooManyReplicas, ...).",
            [
                Q(
                    f"sum by (target, reason) (increase({cv.CONTROLLER_DECISIONS}_total{T}"
                    "[$__rate_interval]))",
                    "{{target}} {{reason}}",
                )
            ],
            "none",
            drawStyle="bars",
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=60,
        ),
        w=16,
    )
    layout.add(
        table(
            "Decisions in the range",
            "How often each reason was decided over the dashboard's range.",
            [
                Q(
                    f"sum by (target, reason) (increase({cv.CONTROLLER_DECISIONS}_total{T}[$__range])) > 0",
                    instant=True,
                )
            ],
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "Replicas",
            "Desired (what the controller decided) and current replicas per target.",
            [
                Q(f"{cv.CONTROLLER_DESIRED_REPLICAS}{T}", "{{target}} desired"),
                Q(f"{cv.CONTROLLER_CURRENT_REPLICAS}{T}", "{{target}} current"),
                Q(f"{cv.RULE_TARGET_REPLICAS_MAX}{T}", "{{target}} max"),
            ],
            "short",
        )
    )
    layout.add(
        timeseries(
            "Batch limit",
            "The per-replica concurrent-sequence limit the controller set.",
            [Q(f"{cv.CONTROLLER_BATCH_LIMIT}{T}", "{{target}}")],
            "short",
        )
    )


def health(layout: Layout) -> None:
    layout.row("Health")
    layout.add(
        timeseries(
            "Tick duration",
            "Time one control tick took (source, decide, actuate, audit).",
            [
                Q(tick_quantile("0.5"), "p50"),
                Q(tick_quantile("0.99"), "p99"),
            ],
            "s",
        )
    )
    layout.add(
        timeseries(
            "Actuation errors",
            "Failed actuations per second by target and kind (scale, gate limit, engine args).",
            [
                Q(
                    f"sum by (target, kind) (rate({cv.CONTROLLER_ACTUATION_ERRORS}_total{T}"
                    "[$__rate_interval]))",
                    "{{target}} {{kind}}",
                )
            ],
            "ops",
        )
    )


def build() -> g.Dashboard:
    layout = Layout()
    for row in (state, decisions, health):
        row(layout)
    return dashboard(
        "fleetslo / controller",
        UID,
        "The fleetslo controller: leader, mode, decisions by reason, actuation errors and tick duration.",
        variables(),
        layout,
    )
