"""The Alertmanager configuration: severity → receiver, grouping, and inhibitions.

Routes by ``severity`` (``page`` → the pager, ``ticket`` → the team channel), groups each
notification by cluster and model, and inhibits alerts that only restate a cause already
firing: a target none of whose engines is scraped silences that target's latency alerts (one
broken pod of sixteen does not: the other fifteen still serve, and their latency is real), a page
silences the ticket of the same SLO of the same target, a GPU collector that is down silences that
sidecar's GPU alerts, and no leader silences the per-target controller alerts. The receivers are
examples to replace.

Generation only: returns a dict; ``render`` writes it.
"""

from __future__ import annotations

from typing import Any

from fleetslo.core import conventions as cv

A = cv.AlertName
RECEIVER_PAGE, RECEIVER_TICKET, RECEIVER_DEFAULT = "fleetslo-page", "fleetslo-ticket", "fleetslo-default"
GROUP_BY = ["cluster", cv.MODEL_LABEL, "alertname"]
LATENCY_ALERTS = (A.TTFT_BUDGET_BURN, A.TPOT_BUDGET_BURN, A.PINNED_AT_MAX)
#: Only a whole target gone explains its latency; single engines down are alerts of their own.
TARGET_GONE = (A.MODEL_NOT_SCRAPED,)
#: What one SLO is about: a workload in a namespace (two Deployments of one model are two SLOs).
TARGET_LABELS = [cv.LABEL_NAMESPACE, cv.LABEL_WORKLOAD]
GPU_ALERTS = (A.GPU_LOST, A.GPU_TEMPERATURE_HIGH, A.GPU_ECC_CORRECTABLE, A.GPU_POWER_THROTTLING)
CONTROLLER_ALERTS = (A.CONTROLLER_ACTUATION_FAILING, A.CONTROLLER_STALE_METRICS, A.PINNED_AT_MAX)


def _names(alerts: tuple[A, ...]) -> str:
    return "|".join(a.value for a in alerts)


def routes() -> dict[str, Any]:
    severity = cv.LABEL_SEVERITY
    return {
        "receiver": RECEIVER_DEFAULT,
        "group_by": GROUP_BY,
        "group_wait": "30s",
        "group_interval": "5m",
        "repeat_interval": "4h",
        "routes": [
            {"receiver": RECEIVER_PAGE, "matchers": [f'{severity}="{cv.SEVERITY_PAGE}"'],
             "repeat_interval": "1h"},
            {"receiver": RECEIVER_TICKET, "matchers": [f'{severity}="{cv.SEVERITY_TICKET}"'],
             "group_wait": "5m", "repeat_interval": "24h"},
        ],
    }  # fmt: skip


def inhibitions() -> list[dict[str, Any]]:
    severity, model = cv.LABEL_SEVERITY, cv.MODEL_LABEL
    return [
        # A target with no engine scraped is the actionable page; its latency burn is the symptom.
        {"source_matchers": [f'alertname=~"{_names(TARGET_GONE)}"'],
         "target_matchers": [f'alertname=~"{_names(LATENCY_ALERTS)}"'],
         "equal": ["cluster", *TARGET_LABELS, model]},
        # A page already says what the ticket of the same SLO of the same target would.
        {"source_matchers": [f'{severity}="{cv.SEVERITY_PAGE}"'],
         "target_matchers": [f'{severity}="{cv.SEVERITY_TICKET}"'],
         "equal": ["cluster", "alertname", *TARGET_LABELS, model, cv.LABEL_SLO]},
        # Without telemetry the GPU alerts of that sidecar describe stale or missing data.
        {"source_matchers": [f'alertname="{A.GPU_COLLECTOR_DOWN.value}"'],
         "target_matchers": [f'alertname=~"{_names(GPU_ALERTS)}"'], "equal": ["cluster", "instance"]},
        # Without a leader nothing actuates; the per-target controller alerts follow from it.
        {"source_matchers": [f'alertname="{A.CONTROLLER_NO_LEADER.value}"'],
         "target_matchers": [f'alertname=~"{_names(CONTROLLER_ALERTS)}"'], "equal": ["cluster"]},
    ]  # fmt: skip


def receivers() -> list[dict[str, Any]]:
    """Example receivers: webhooks to replace with PagerDuty / Slack / e-mail configs."""
    return [
        {"name": RECEIVER_DEFAULT},
        {"name": RECEIVER_PAGE,
         "webhook_configs": [{"url": "http://alert-receiver.example.invalid/page", "send_resolved": True}]},
        {"name": RECEIVER_TICKET,
         "webhook_configs": [{"url": "http://alert-receiver.example.invalid/ticket", "send_resolved": True}]},
    ]  # fmt: skip


def alertmanager_config() -> dict[str, Any]:
    return {"route": routes(), "inhibit_rules": inhibitions(), "receivers": receivers()}
