"""The direct source sees the gate's queue: a binding limit holds requests at the gate, where vLLM
neither counts them as waiting nor starts their TTFT. The demo's case: users saw ~3 s, vLLM ~0.1 s."""

from __future__ import annotations

import httpx
import pytest
from fleetslo.control.ports import PodEndpoint
from fleetslo.control.sources.direct import DirectSource
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.testing import FakePodDirectory

from tests.gate_support import gate_page, vllm_page
from tests.loop_support import make_slo

SLO = make_slo("qwen", model="tiny-llama", window="30s", ttft="0.5s")
STEPS = 3  # scrapes 15 s apart: one full 30 s window
PER_STEP = 30  # requests per step, each queued ~2.9 s at the gate, 0.08 s inside vLLM


class Sidecar:
    """One pod's sidecar after ``step`` steps: its raw vLLM page and its own page with the gate."""

    def __init__(self) -> None:
        self.step = 0
        self.status = 200

    def __call__(self, request: httpx.Request) -> httpx.Response:
        served = PER_STEP * self.step
        if request.url.path == "/vllm/metrics":
            return httpx.Response(200, text=vllm_page(served, waiting=1))
        page = gate_page(queued=7, ttft=[2.9] * served, tpot=[0.03] * served)
        return httpx.Response(self.status, text=page)


def observe(*, gate: bool, last_status: int = 200) -> Observation:
    pods = FakePodDirectory()
    pods.set(SLO.spec.target, [PodEndpoint("qwen-a", "10.0.0.1", ready=True)])
    sidecar = Sidecar()
    transport = httpx.MockTransport(sidecar)
    source = DirectSource(pods, interval=15.0, gpu_utilization=False, gate=gate, transport=transport)
    for step in range(STEPS):
        sidecar.step, sidecar.status = step, last_status if step == STEPS - 1 else 200
        obs = source.observe(SLO, ReplicaCounts(1), 4, 1000.0 + 15.0 * step)
    source.close()
    return obs


def test_the_gate_queue_counts_as_waiting_and_its_ttft_is_what_the_policy_sees() -> None:
    obs = observe(gate=True)
    assert obs.replicas_reporting == 1
    assert obs.waiting == 8.0  # 1 in vLLM's queue + 7 in the gate's
    assert obs.ttft.p90 is not None and obs.ttft.p90 == pytest.approx(2.95)
    assert obs.ttft_attainment == 0.0  # nobody got a first token under 0.5 s
    assert obs.tpot.p90 is not None and obs.tpot_attainment == 1.0  # the gate's exact TPOT


def test_without_the_gate_the_controller_is_blind_to_its_own_queue() -> None:
    obs = observe(gate=False)
    assert obs.waiting == 1.0
    assert obs.ttft.p90 is not None and obs.ttft.p90 < 0.1 and obs.ttft_attainment == 1.0


def test_a_sidecar_page_that_fails_adds_no_sample_rather_than_one_without_the_gate() -> None:
    obs = observe(gate=True, last_status=500)
    assert obs.data_age == 15.0  # the newest sample is the previous, whole one
    assert obs.waiting == 8.0 and obs.ttft.p90 == pytest.approx(2.95)
