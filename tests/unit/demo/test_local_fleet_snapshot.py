"""The router reads the local fleet on the event loop for every request: ``gates()`` and
``counts()`` must not wait while another thread holds the fleet's lock (``scale`` starting
processes holds it for hundreds of milliseconds on a busy host, time every request would lose)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fleetslo.control.local.fleet import LocalFleet
from fleetslo.control.local.replica import ReplicaRecipe
from fleetslo.core.model import ReplicaCounts
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import make_spec


@pytest.mark.timeout(30)  # a blocked read hangs here: the timeout is the failure
def test_gates_and_counts_do_not_wait_for_the_fleets_lock(tmp_path: Path) -> None:
    spec = make_spec(builtin_profile("mi300x-llama3.1-8b-fp8-tp1"), name="demo")
    recipe = ReplicaRecipe(
        profile="mi300x-llama3.1-8b-fp8-tp1", model_name=spec.target.model_name, speedup=10.0,
        cold_start_s=60.0, token_file=tmp_path / "token", log_dir=tmp_path, slo_ttft_s=2.0, slo_tpot_s=0.05,
    )  # fmt: skip
    fleet = LocalFleet(spec.target, recipe, lambda: 0.0)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with fleet._lock:  # as `scale` does while it starts processes
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait()
        assert fleet.gates() == [] and fleet.counts() == ReplicaCounts(0, 0, 0)
    finally:
        release.set()
        holder.join()
