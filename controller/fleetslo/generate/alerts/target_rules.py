"""The rule group of one FleetSLO: its SLO rules plus the alerts that need the spec.

Alerts here know something only the spec says — which model must be served, the replica
ceiling, which controller target serves which model — so they carry ``model_name`` even when
the metric they read (the controller's, labelled ``target``) does not.

Generation only: returns a ``Group``.
"""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.generate.alerts import promql as pq
from fleetslo.generate.alerts.rules import Alert, Group, Recording, Rule
from fleetslo.generate.alerts.slo_rules import notes, slo_rules
from fleetslo.generate.alerts.spec import TargetSpec

M, T = cv.MODEL_LABEL, cv.LABEL_TARGET
#: Decisions that mean "I cannot see the fleet well enough to act".
BLIND_REASONS = ("HoldNoData", "HoldStaleData", "HoldPartialData")


def target_meta(t: TargetSpec) -> list[Recording]:
    labels = {T: t.name, M: t.model_name}
    info = {
        **labels,
        cv.LABEL_NAMESPACE: t.namespace,
        "workload": t.workload,
        "kind": t.kind,
        cv.LABEL_MODE: t.mode,
    }
    constants = (
        (cv.RULE_TARGET_REPLICAS_MIN, float(t.replicas_min)),
        (cv.RULE_TARGET_REPLICAS_MAX, float(t.replicas_max)),
        (cv.RULE_TARGET_REPLICA_COST, t.cost_per_replica_hour),
        (cv.RULE_TARGET_GPUS_PER_REPLICA, float(t.gpus_per_replica)),
    )
    return [
        Recording(cv.RULE_TARGET_INFO, "vector(1)", info),
        *(Recording(name, f"vector({pq.fmt(v)})", labels) for name, v in constants),
    ]


def who(t: TargetSpec) -> str:
    """How an alert names its target: the model, then the workload serving it."""
    return f"{t.model_name} ({t.namespace}/{t.workload})"


def _scope(t: TargetSpec) -> dict[str, str]:
    """Whose alert it is: the target (namespace, workload) and the model it serves."""
    return {**t.scope.labels, M: t.model_name}


def model_not_scraped(t: TargetSpec) -> Alert:
    # absent() takes its labels from the equality matchers; the rule adds the workload.
    regex = cv.promql_name_regex(cv.Gauge.RUNNING)
    selector = pq.matchers(
        {M: t.model_name, cv.LABEL_NAMESPACE: t.namespace}, regex={cv.LABEL_POD: t.scope.pods}
    )
    return Alert(
        alert=cv.AlertName.MODEL_NOT_SCRAPED,
        expr=f'absent({{__name__=~"{regex}", {selector[1:-1]}}})',
        hold="5m",
        labels={cv.LABEL_SEVERITY: cv.SEVERITY_PAGE, **_scope(t)},
        summary=f"{who(t)}: no vLLM server is reporting metrics",
        description=(
            f"Prometheus has no {cv.Gauge.RUNNING.value} series for model {t.model_name} (FleetSLO {t.name}, "
            f"{t.kind} {t.namespace}/{t.workload}): every replica is down, or none is scraped."
        ),
        runbook=(
            f"kubectl -n {t.namespace} get pods for {t.workload}; check the ServiceMonitor/PodMonitor "
            "selects the vLLM port and that --served-model-name matches target.model_name."
        ),
    )


def _burning(t: TargetSpec) -> str:
    """Non-empty while any objective's 1h error ratio is above its budget (burn > 1)."""
    parts = [
        f"max({cv.rule_slo_error_ratio('1h')}{pq.matchers({**t.scope.labels, cv.LABEL_SLO: s.name.value})}) "
        f"> {pq.fmt(s.budget)}"
        for s in t.slos
    ]
    return "\n  or on()\n  ".join(f"({p})" for p in parts)


def pinned_at_max(t: TargetSpec) -> Alert:
    desired = f"max({cv.CONTROLLER_DESIRED_REPLICAS}{pq.matchers({T: t.name})})"
    return Alert(
        alert=cv.AlertName.PINNED_AT_MAX,
        expr=f"{desired} >= {t.replicas_max}\nand on()\n(\n  {_burning(t)}\n)",
        hold="15m",
        labels={cv.LABEL_SEVERITY: cv.SEVERITY_PAGE, **_scope(t), T: t.name},
        summary=f"{who(t)}: the controller is at its max of {t.replicas_max} replicas, the SLO burns",
        description=(
            f"The controller has wanted {{{{ $value }}}} replicas of {t.namespace}/{t.workload} "
            "(replicas.max "
            f"{t.replicas_max}) for 15 minutes while more requests than the budget allows miss their latency "
            "threshold over the last hour. Autoscaling cannot help any more."
        ),
        runbook=(
            f"Raise replicas.max in FleetSLO {t.name} if GPUs are available (check quota and node capacity), "
            "or shed load (lower batch limits / admission) until capacity arrives."
        ),
    )


def actuation_failing(t: TargetSpec) -> Alert:
    errors = f"{cv.CONTROLLER_ACTUATION_ERRORS}_total{pq.matchers({T: t.name})}"
    return Alert(
        alert=cv.AlertName.CONTROLLER_ACTUATION_FAILING,
        expr=f"sum by ({T}, kind) (rate({errors}[10m])) > 0",
        hold="15m",
        labels={cv.LABEL_SEVERITY: cv.SEVERITY_PAGE, **_scope(t)},
        summary=f"{who(t)}: the controller cannot apply its decisions ({{{{ $labels.kind }}}})",
        description=(
            f"{{{{ $value | humanize }}}} {{{{ $labels.kind }}}} actuation errors per second for target "
            f"{t.name} "
            "over the last 10 minutes, for 15 minutes: replica or batch-limit changes are not taking effect."
        ),
        runbook=(
            "Read the controller's logs and Kubernetes Events for the target: RBAC on the scale "
            "subresource, an admission webhook, or an unreachable gate admin API are the usual causes."
        ),
    )


def controller_blind(t: TargetSpec) -> Alert:
    decisions = f"{cv.CONTROLLER_DECISIONS}_total"
    blind = pq.matchers({T: t.name}, regex={cv.LABEL_REASON: "|".join(BLIND_REASONS)})
    every = pq.matchers({T: t.name})
    expr = (
        f"sum by ({T}) (increase({decisions}{blind}[10m]))\n/\n"
        f"(sum by ({T}) (increase({decisions}{every}[10m])) > 0)\n> 0.5"
    )
    return Alert(
        alert=cv.AlertName.CONTROLLER_STALE_METRICS,
        expr=expr,
        hold="10m",
        labels={cv.LABEL_SEVERITY: cv.SEVERITY_TICKET, **_scope(t)},
        summary=f"{who(t)}: the controller holds because its metrics are missing or stale",
        description=(
            f"{{{{ $value | humanizePercentage }}}} of the controller's decisions for {t.name} in the "
            "last 10 "
            "minutes were holds for missing, stale or partial data: it cannot scale this target."
        ),
        runbook=(
            "Check the sidecars of the target are up and scraped, and the controller's Prometheus source "
            "(URL, credentials, query latency); the fleet dashboard's 'replicas reporting' shows the gap."
        ),
    )


def target_group(t: TargetSpec) -> Group:
    rules: list[Rule] = [*target_meta(t)]
    for slo in t.slos:
        rules.extend(slo_rules(slo))
    rules.extend((model_not_scraped(t), pinned_at_max(t), actuation_failing(t), controller_blind(t)))
    return Group(name=f"fleetslo-slo-{t.name}", rules=tuple(rules), notes=notes(t))
