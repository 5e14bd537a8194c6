"""The PromQL behind the dashboards, in one place, reading every name from ``conventions``.

vLLM series are read under every stored name (``alerts.promql``: rate per name, joined with
``or`` before summing), filtered by the ``$namespace`` and ``$model`` variables; SLO numbers come
from the recording rules ``fleetslo alerts build`` generates, so the lines drawn here are the
ones the alerts use. Controller series carry ``target``; joining them with ``fleetslo:target_info``
(a rule) gives them ``model_name``. String building only.
"""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.generate.alerts import promql as pq

M = cv.MODEL_LABEL
RATE = "$__rate_interval"
#: vLLM and sidecar series of the selected namespace(s) and model(s).
SEL = '{namespace=~"$namespace", model_name=~"$model"}'
#: Recording-rule series (they carry model_name, not namespace).
RULE_SEL = '{model_name=~"$model"}'


def slo_sel(slo: cv.SloName) -> str:
    return f'{{model_name=~"$model", slo="{slo.value}"}}'


def vllm_rate_sum(canonical: str, suffix: str, by: str = M, extra: str = "") -> str:
    selector = SEL[:-1] + (f", {extra}" if extra else "") + "}"
    return pq.sum_by(by, pq.vllm_rate(canonical, suffix, selector, RATE))


def vllm_quantile(histogram: cv.Histogram) -> str:
    rates = pq.vllm_rate(histogram, "_bucket", SEL, RATE)
    return f"histogram_quantile($quantile, {pq.sum_by(f'le, {M}', rates)})"


def vllm_gauge_sum(gauge: cv.Gauge, by: str = M) -> str:
    return pq.sum_by(by, pq.vllm_gauge(gauge, SEL))


def vllm_gauge_max(gauge: cv.Gauge, by: str) -> str:
    return f"max by ({by}) ({pq.vllm_gauge(gauge, SEL)})"


def with_model(expr: str) -> str:
    """A controller series (``target``) with the ``model_name`` of its FleetSLO, filtered by $model."""
    info = f"{cv.RULE_TARGET_INFO}{RULE_SEL}"
    return f"{expr}\n* on ({cv.LABEL_TARGET}) group_left ({M})\n{info}"


def ready_replicas() -> str:
    """Replicas whose sidecar reads vLLM successfully: what is actually serving."""
    return f"sum by ({M}) ({cv.ENGINE_UP}{SEL} == bool 1)"


def burn_rate(window: str) -> str:
    ratio = f"{cv.rule_slo_error_ratio(window)}{RULE_SEL}"
    return f"{ratio}\n/ on ({M}, {cv.LABEL_SLO})\n{cv.RULE_SLO_ERROR_BUDGET}{RULE_SEL}"


def cost_per_million_tokens() -> str:
    """Replicas serving × the spec's price per replica-hour ÷ generated tokens per hour, × 1e6."""
    replicas = ready_replicas()
    price = f"max by ({M}) ({cv.RULE_TARGET_REPLICA_COST}{RULE_SEL})"
    tokens = vllm_rate_sum(cv.Counter.GENERATION_TOKENS, "_total")
    spend = f"(\n{pq.indent(replicas)}\n  * on ({M})\n  {price}\n)"
    return f"{spend}\n/ on ({M})\n(\n{pq.indent(tokens)} * 3600\n) * 1e6"


def decisions_annotation() -> str:
    """Each change of decision counts, except the steady ones: one marker per decision."""
    quiet = "Steady|WithinTolerance"
    return (
        f"sum by ({cv.LABEL_TARGET}, {cv.LABEL_REASON}) "
        f'(increase({cv.CONTROLLER_DECISIONS}_total{{{cv.LABEL_REASON}!~"{quiet}"}}[2m])) > 0'
    )
