"""The burn-rate alerts, run by promtool on generated rules: each tier fires on the breach it is
for, at the minute the window math predicts (long and short window over the threshold, then
``for:``), and stays quiet on healthy traffic, on a burn below its threshold, and on a short spike.

Scenarios are per-interval bad fractions; ``simulate`` predicts every tier's state at every
evaluation from exactly the ratio Prometheus computes (samples on both window edges, 2.x).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from fleetslo.core import conventions as cv
from fleetslo.generate.alerts.rules import Alert
from fleetslo.generate.alerts.spec import target_spec
from fleetslo.generate.alerts.target_rules import target_group

from tests.unit.alerts.promtool_support import (
    MODEL,
    OTHER_POD,
    POD,
    SLO_LABELS,
    expected,
    run_promtool,
    spec,
    write_rules,
)

pytestmark = pytest.mark.integration

REQUESTS_PER_STEP = 100
BASE = 100_000  # counters start high so rate() never extrapolates below zero


@dataclass(frozen=True)
class Scenario:
    step_minutes: int
    bad: Sequence[float]  # share of requests over the threshold during each step

    @cached_property
    def counts(self) -> tuple[list[int], list[int]]:
        """Cumulative ``_count`` and ``_bucket{le=threshold}`` samples, one per step boundary."""
        total, good = [BASE], [BASE]
        for b in self.bad:
            total.append(total[-1] + REQUESTS_PER_STEP)
            good.append(good[-1] + round(REQUESTS_PER_STEP * (1 - b)))
        return total, good

    def ratio(self, t: int, window_minutes: float) -> float | None:
        """The error ratio over ``window`` at step ``t``, as Prometheus computes it, or None."""
        total, good = self.counts
        start = max(0, t - int(window_minutes // self.step_minutes))
        if t - start < 1:
            return None
        return 1 - (good[t] - good[start]) / (total[t] - total[start])


def burn_alerts(name: cv.AlertName) -> list[Alert]:
    return [a for a in target_group(target_spec(spec())).alerts() if a.alert == name]


def threshold(alert: Alert) -> float:
    return float(alert.expr.split(" > ")[1].split("\n")[0])


def minutes(label: str) -> float:
    value, unit = float(label[:-1]), label[-1]
    return value * {"m": 1, "h": 60, "d": 1440}[unit]


def simulate(scenario: Scenario, alerts: Sequence[Alert]) -> list[list[Alert]]:
    """The alerts firing at each evaluation step (evaluation interval = the scenario's step)."""
    since: dict[int, int | None] = dict.fromkeys(range(len(alerts)))
    firing = []
    for t in range(len(scenario.bad) + 1):
        now = []
        for i, a in enumerate(alerts):
            thr = threshold(a)
            long = scenario.ratio(t, minutes(a.labels[cv.LABEL_LONG_WINDOW]))
            short = scenario.ratio(t, minutes(a.labels[cv.LABEL_SHORT_WINDOW]))
            for r in (long, short):
                assert r is None or abs(r - thr) > 1e-9, "scenario sits on a threshold: pick another"
            if long is not None and short is not None and long > thr and short > thr:
                since[i] = t if since[i] is None else since[i]
                if (t - since[i]) * scenario.step_minutes >= minutes(a.hold):
                    now.append(a)
            else:
                since[i] = None
        firing.append(now)
    return firing


def alert_test(name: cv.AlertName, scenario: Scenario, t: int, firing: list[Alert]) -> dict[str, Any]:
    series = {cv.MODEL_LABEL: MODEL, cv.LABEL_SLO: firing[0].labels[cv.LABEL_SLO]} if firing else {}
    exp = []
    for a in firing:
        value = scenario.ratio(t, minutes(a.labels[cv.LABEL_LONG_WINDOW]))
        assert value is not None
        exp.append(expected(a, series, value))
    return {"eval_time": f"{t * scenario.step_minutes}m", "alertname": name.value, "exp_alerts": exp}


def checks(name: cv.AlertName, scenario: Scenario, alerts: Sequence[Alert]) -> list[dict[str, Any]]:
    """An alert test at every step where the firing set changes, and the step before it."""
    timeline = simulate(scenario, alerts)
    times = {0, len(timeline) - 1}
    for t in range(1, len(timeline)):
        if timeline[t] != timeline[t - 1]:
            times.update((t - 1, t))
    return [alert_test(name, scenario, t, timeline[t]) for t in sorted(times)]


def labelled(labels: dict[str, str]) -> str:
    return ", ".join(f'{k}="{v}"' for k, v in labels.items())


def histogram_series(
    scenario: Scenario, base: str, le: str, engines: int = 1, pod: dict[str, str] = POD
) -> list[dict[str, str]]:
    """The histogram split evenly over ``engines`` data-parallel engines (each its own series)."""
    total, good = scenario.counts
    out = []
    for engine in range(engines):
        labels = f'model_name="{MODEL}", engine="{engine}", {labelled(pod)}'
        out.append(
            {"series": f"{base}_count{{{labels}}}", "values": " ".join(str(v / engines) for v in total)}
        )
        out.append(
            {
                "series": f'{base}_bucket{{{labels}, le="{le}"}}',
                "values": " ".join(str(v / engines) for v in good),
            }
        )
    return out


def promtool_case(
    name: cv.AlertName, scenario: Scenario, base: str, le: str, engines: int = 1
) -> dict[str, Any]:
    return {
        "name": f"{name.value} {scenario.step_minutes}m x {len(scenario.bad)}",
        "interval": f"{scenario.step_minutes}m",
        "input_series": histogram_series(scenario, base, le, engines),
        "alert_rule_test": checks(name, scenario, burn_alerts(name)),
    }


TTFT = cv.AlertName.TTFT_BUDGET_BURN
TTFT_BASE = "vllm:time_to_first_token_seconds"


def outage() -> Scenario:
    """3 h healthy, then 95 % of requests slow for 5 h: each tier fires in turn."""
    return Scenario(1, [0.0] * 180 + [0.95] * 300)


def test_every_ttft_tier_fires_at_the_predicted_minute_of_an_outage(tmp_path: Path) -> None:
    timeline = simulate(outage(), burn_alerts(TTFT))
    fired = {
        a.labels[cv.LABEL_LONG_WINDOW]: next(t for t, f in enumerate(timeline) if a in f)
        for a in burn_alerts(TTFT)
    }
    # p90 over 28d: error-ratio thresholds 0.55 (1h, 6h), 0.28 (1d), 0.0933 (3d). A full window
    # of w minutes with k bad ones holds 0.95 k / w: over 0.55 after k = 35 (1h) and k = 209 (6h,
    # full from t = 360). The 1d and 3d windows reach back to the start of the data, where the
    # ratio is 0.95 (t - 180) / t: over 0.28 from t = 256, over 0.0933 from t = 200. Then each
    # tier's for: 2m, 15m, 1h, 3h.
    assert fired == {"1h": 180 + 35 + 2, "6h": 180 + 209 + 15, "1d": 256 + 60, "3d": 200 + 180}
    rules = write_rules(tmp_path, [spec()])
    run_promtool(tmp_path, rules, [promtool_case(TTFT, outage(), TTFT_BASE, "0.5")])


def test_a_burn_below_the_page_threshold_only_opens_tickets(tmp_path: Path) -> None:
    scenario = Scenario(1, [0.5] * 200)
    timeline = simulate(scenario, burn_alerts(TTFT))
    assert {a.labels[cv.LABEL_SEVERITY] for f in timeline for a in f} == {cv.SEVERITY_TICKET}
    # Two data-parallel engines: the SLI sums them (and would sum replicas the same way).
    case = promtool_case(TTFT, scenario, TTFT_BASE, "0.5", engines=2)
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), [case])


def test_healthy_traffic_within_budget_never_alerts(tmp_path: Path) -> None:
    scenario = Scenario(1, [0.05, 0.09, 0.0, 0.08] * 60)
    assert not any(simulate(scenario, burn_alerts(TTFT)))
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), [promtool_case(TTFT, scenario, TTFT_BASE, "0.5")])


def test_a_short_spike_after_a_long_healthy_history_does_not_page(tmp_path: Path) -> None:
    """20 minutes of total outage after a healthy day: the long windows keep every tier quiet."""
    scenario = Scenario(5, [0.0] * 288 + [1.0] * 4 + [0.0] * 24)
    assert not any(simulate(scenario, burn_alerts(TTFT)))
    case = promtool_case(TTFT, scenario, TTFT_BASE, "0.5")
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), [case], evaluation_interval="5m")


def test_tpot_tiers_fire_on_escaped_vllm_underscore_names(tmp_path: Path) -> None:
    """Prometheus 2.x scraping prometheus-client >= 0.23 stores vllm_…: the rules read it too."""
    name = cv.AlertName.TPOT_BUDGET_BURN
    scenario = Scenario(1, [0.0] * 60 + [0.73] * 120)
    assert any(simulate(scenario, burn_alerts(name)))
    case = promtool_case(name, scenario, "vllm_request_time_per_output_token_seconds", "0.05")
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), [case])


def test_an_idle_window_has_no_ratio_and_does_not_poison_the_period(tmp_path: Path) -> None:
    """30 minutes at 50 % slow, then no traffic: the 5m ratio is absent (not NaN, not 0), the period
    ratio and the budget keep their values (a NaN in the 28d sum would blank them for 28 days)."""
    scenario = Scenario(1, [0.5] * 30 + [0.0] * 20)
    total, good = scenario.counts
    flat = total[:31] + [total[30]] * 20, good[:31] + [good[30]] * 20
    labels = f'model_name="{MODEL}", engine="0", {labelled(POD)}'
    series = [
        {"series": f"{TTFT_BASE}_count{{{labels}}}", "values": " ".join(map(str, flat[0]))},
        {"series": f'{TTFT_BASE}_bucket{{{labels}, le="0.5"}}', "values": " ".join(map(str, flat[1]))},
    ]
    ttft = "{" + labelled({**SLO_LABELS, "slo": "ttft"}) + "}"
    checks = [
        {"expr": f"{cv.rule_slo_error_ratio('5m')}{ttft}", "eval_time": "50m", "exp_samples": []},
        {"expr": f"{cv.RULE_SLO_REQUESTS_RATE5M}{ttft}", "eval_time": "50m",
         "exp_samples": [{"labels": f"{cv.RULE_SLO_REQUESTS_RATE5M}{ttft}", "value": 0}]},
        {"expr": f"round({cv.RULE_SLO_ERROR_RATIO_PERIOD}{ttft}, 0.0001)", "eval_time": "50m",
         "exp_samples": [{"labels": ttft, "value": 0.5}]},
        {"expr": f"round({cv.RULE_SLO_BUDGET_REMAINING}{ttft}, 0.0001)", "eval_time": "50m",
         "exp_samples": [{"labels": ttft, "value": -4}]},
    ]  # fmt: skip
    case = {"interval": "1m", "input_series": series, "promql_expr_test": checks}
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), [case])


def test_two_deployments_of_one_model_are_two_slos(tmp_path: Path) -> None:
    """A canary Deployment of the same model in the same namespace burns; this target does not."""
    # Summed by model the two would be 52 % slow after two hours and open the 1d ticket.
    healthy, broken = Scenario(1, [0.05] * 150), Scenario(1, [0.0] * 30 + [1.0] * 120)
    series = [
        *histogram_series(healthy, TTFT_BASE, "0.5"),
        *histogram_series(broken, TTFT_BASE, "0.5", pod=OTHER_POD),
    ]
    assert not any(simulate(healthy, burn_alerts(TTFT)))
    case = {"name": "canary outage", "interval": "1m", "input_series": series,
            "alert_rule_test": checks(TTFT, healthy, burn_alerts(TTFT))}  # fmt: skip
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), [case])


def gate_series(measured: int, good: int, rejected: int, minutes: int = 30) -> list[dict[str, str]]:
    """Per minute: ``measured`` requests through the gate, ``good`` of them first-token within
    0.5 s (queue wait included), ``rejected`` turned away."""
    pod = labelled(POD)

    def counter(per_minute: int) -> str:
        return " ".join(str(BASE + per_minute * t) for t in range(minutes + 1))

    return [
        {"series": f"fleetslo_gate_ttft_seconds_count{{{pod}}}", "values": counter(measured)},
        {"series": f'fleetslo_gate_ttft_seconds_bucket{{{pod}, le="0.5"}}', "values": counter(good)},
        {
            "series": f'fleetslo_gate_rejected_total{{{pod}, reason="queue_full"}}',
            "values": counter(rejected),
        },
    ]


def test_the_gate_counts_queue_wait_and_rejections_where_vllm_sees_only_fast_requests(tmp_path: Path) -> None:
    """vLLM sees every request it serves start fast (0 % slow). The gate saw half of the requests
    wait too long in its queue, and turned as many away again: 75 % of what users sent was bad."""
    vllm = histogram_series(Scenario(1, [0.0] * 30), TTFT_BASE, "0.5")
    ttft = "{" + labelled({**SLO_LABELS, "slo": "ttft"}) + "}"
    ratio = {"expr": f"round({cv.rule_slo_error_ratio('5m')}{ttft}, 0.001)", "eval_time": "30m"}
    cases = [
        {"name": "gate: queue wait and rejections are bad events", "interval": "1m",
         "input_series": [*vllm, *gate_series(measured=100, good=50, rejected=100)],
         "promql_expr_test": [{**ratio, "exp_samples": [{"labels": ttft, "value": 0.75}]}]},
        {"name": "no gate: vLLM's own histogram", "interval": "1m", "input_series": vllm,
         "promql_expr_test": [{**ratio, "exp_samples": [{"labels": ttft, "value": 0}]}]},
        {"name": "an idle gate: vLLM's histogram (requests that bypass the gate)", "interval": "1m",
         "input_series": [*vllm, *gate_series(measured=0, good=0, rejected=0)],
         "promql_expr_test": [{**ratio, "exp_samples": [{"labels": ttft, "value": 0}]}]},
    ]  # fmt: skip
    run_promtool(tmp_path, write_rules(tmp_path, [spec()]), cases)
