"""The probes: the policy benchmark on engines, cold starts and targets the suite never uses."""

from __future__ import annotations

from dataclasses import replace

from fleetslo.sim.profile import builtin_profiles

from benchmarks.bench_policy import PROFILE, choose, scenario
from benchmarks.heldout import HELDOUT, VARIANTS, summary
from benchmarks.probes import PROBES
from benchmarks.workloads import WORKLOADS


def test_the_probes_are_apart_from_every_other_set_and_selectable_on_their_own() -> None:
    names = {w.name for w in PROBES}
    others = {w.name for w in WORKLOADS + HELDOUT + VARIANTS}
    assert len(names) == len(PROBES) == 8 and not names & others
    assert [w.name for w in choose("probes", False, "")] == [w.name for w in PROBES]
    assert not names & {w.name for w in choose("all", False, "")}  # make bench does not run them


def test_the_probes_change_what_the_suite_keeps_fixed() -> None:
    """Other engines (each a packaged profile), other cold starts, other target pairs."""
    profiles = {w.profile for w in PROBES} - {None}
    assert len(profiles) >= 3 and profiles <= set(builtin_profiles()) and PROFILE not in profiles
    assert {w.cold_start_s for w in PROBES} - {None} == {120.0, 600.0}
    assert len({(w.ttft_s, w.tpot_s) for w in PROBES}) >= 4


def test_a_workload_runs_on_its_own_engine_and_cold_start() -> None:
    probe = next(w for w in PROBES if w.cold_start_s == 600.0)
    sc = scenario(probe)
    assert sc.profile.name == probe.profile == "mi300x-qwen3-235b-fp8-tp4"
    assert sc.spec.replicas.cold_start == 600.0
    default = scenario(replace(probe, profile=None, cold_start_s=None))
    assert default.profile.name == PROFILE and default.spec.replicas.cold_start == 300.0


def test_the_small_probes_build() -> None:
    for w in PROBES:
        if w.name.startswith(("MI300X", "code")):
            figures = summary(w.build())
            assert figures["requests"] > 20_000 and figures["minutes"] >= 55, (w.name, figures)
