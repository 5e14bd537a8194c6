"""The typed result serialises to exactly the JSON the dict-built result had (the contract of
``fleetslo simulate --json``, ``results.json`` and the report).

``golden_result.json`` was first written by the dict-building ``build_result`` (before the typed
result) on the run below, and matched key for key and value for value; it was rewritten since:
when the capacity model changed the ``fleetslo`` policy's decisions and added the ``decisions`` key
(every other key and the order unchanged), and a second time when the decision message gained the
measured margins (one message, nothing else), and a third time when a window the model called
saturated started to add the random walk to the speed's variance (predicted p90s move in the eighth
digit, nothing else), and a fourth time when the model's TTFT gained the wait for a slot of the
batch limit (predicted p90 TTFT up by about 1e-5 where 40 of the tiny engine's 64 slots are held,
nothing else), and a fifth time when the backlog was read against the model's stay at the window's
mix (one scale-up sized for 10.04/s instead of 10.03/s, so its reason is ``ScaleUpQueue`` instead
of ``ScaleUpForecast``; the same 14 replicas, nothing else), and a sixth time when a target out of
the model's reach at any size was relaxed instead of the model given up (the tiny engine's 20 ms
TPOT target is under the conservative prior's idle step: the fleet is now sized for TTFT with TPOT
held to 1.3x the idle step, 8 scale events instead of 5, request attainment 0.67 -> 0.78, mean
replicas 6.9 -> 17.2; the JSON's shape unchanged), and a seventh time when a window replicas
joined stopped teaching the model TTFT (the learned TTFT bias x1.23 -> x1.10 by the end, so the
predicted p90 TTFT in the messages and decisions; the same events and windows), and an eighth
time when the request mix was read off whole windows only (the decisions of the first window carry
no prediction, having no mix; the first sizing reads 520 tokens per request, not 573, and asks 3
replicas instead of 4: 10 scale events instead of 8, mean replicas 17.2 -> 18.6, request
attainment 0.78 -> 0.72 on this 5-minute spike; the JSON's shape unchanged), and a ninth time
when a breach in a window replicas joined was fed back on the fleet before they joined, and a
drained backlog stopped reading as arrivals (the breach scale-up at 120 s, 4 -> 6, became the
backlog's at 135 s; the spike's peak asks 28 replicas, not 34, before the maximum: the same 10
events and windows met, replica-hours 1.57 -> 1.51, request attainment 0.72 -> 0.70), and a tenth
time when a target an idle replica meets with less than the headroom to spare was held as an
unreachable one is (at 210 s the learned engine's idle TPOT reads 19.6 ms against the 20 ms target:
15 replicas asked, not 28 and then the maximum of 50; 9 scale events instead of 10, replica-hours
1.51 -> 0.70, the same windows met and request attainment 0.70), and an eleventh time when the
model's TTFT took the step chain in place of one prompt per step (the first window, overloaded
at 2 replicas, teaches a TTFT bias of x1.75 instead of x1.30 against the lower raw prediction, so
the predicted p90 TTFT in the messages and decisions moves; the same events, windows and
replicas), and a twelfth when the chain's variance took its third cumulant exactly (x1.70; the
same events, windows and replicas), and a thirteenth when the p90 TTFT was read between the prompt
points (``RequestMix.prompt_band``; x1.69, predicted p90 TTFT down by under 1 %, TPOT in the
sixteenth digit; the same events, windows and replicas). Only ``wall_seconds`` varies between
runs, so the golden file holds a marker there and the test checks it is present and a number.
Rewrite it only for an intended change of the JSON or of the policy, and review the diff.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetslo.policy.registry import make_policy
from fleetslo.sim.result_types import BaselineTried, RunStop, SimResult
from fleetslo.sim.scenario import Scenario, run_policy
from fleetslo.sim.traces import lognormal_tokens, step_spike

from tests.unit.sim.sim_support import spec_for, tiny_profile

GOLDEN = Path(__file__).with_name("golden_result.json")


def _golden_run() -> SimResult:
    profile = tiny_profile()
    spec = spec_for(profile, ttft_s=0.5, tpot_s=0.02, cold_start_s=60.0)
    trace = step_spike(
        10.0, 300.0, lognormal_tokens(300, 60, 0.8), spike_at_s=120, spike_duration_s=90, factor=3, seed=7
    )
    scenario = Scenario(
        trace=trace, trace_name="golden spike", profile=profile, spec=spec, initial_replicas=1, seed=7
    )
    return run_policy(scenario, make_policy("fleetslo", spec))


def test_to_dict_is_todays_json_on_a_deterministic_run() -> None:
    result = _golden_run()
    golden: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    produced: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    assert isinstance(produced["wall_seconds"], float)
    produced["wall_seconds"] = golden["wall_seconds"]
    assert result.scale_events > 0 and result.windows  # the run exercises events and windows
    assert list(produced) == list(golden)  # same keys, same order
    assert produced == golden


def test_optional_fields_are_absent_until_set_and_flat_where_they_were() -> None:
    base = _golden_run()
    bare = replace(base, initial_replicas=None, cold_start_s=None, seed=None)
    assert not {"initial_replicas", "cold_start_s", "seed", "speedup", "host", "stopped_by"} & set(
        bare.to_dict()
    )
    demo = replace(
        base,
        speedup=4.0,
        max_num_seqs=64,
        stop=RunStop(interrupted=True, stopped_by="SIGINT", judged_until_s=None),
        host={"kept_up": True},
        baselines_tried=(BaselineTried("static ×2", 0.5, None, 1.25),),
    )
    out = demo.to_dict()
    # the demo's keys follow the run's, the stop's flat at the top level as the demo wrote them
    assert list(out)[list(out).index("events") + 1 :] == [
        "initial_replicas",
        "cold_start_s",
        "seed",
        "speedup",
        "max_num_seqs",
        "interrupted",
        "stopped_by",
        "judged_until_s",
        "host",
        "baselines_tried",
    ]
    assert out["interrupted"] is True and out["stopped_by"] == "SIGINT" and out["judged_until_s"] is None
    assert out["host"] == {"kept_up": True} and out["speedup"] == 4.0 and out["max_num_seqs"] == 64
    assert out["baselines_tried"] == [
        {"policy": "static ×2", "window_attainment": 0.5, "request_attainment": None, "replica_hours": 1.25}
    ]
