"""The controller's fault suite in virtual time: bad data, a misbehaving API server, leadership.

The real ``Controller``, ``FleetActuator``, ``LeaderElector`` and policies run against an
in-memory cluster (``Cluster``): one workload with a desired count and a resourceVersion, a Lease
with compare-and-swap, and drained pods. Faults are injected at the edges — the observation, each
API call (409, 429, 5xx, a hung call that times out), the Lease during a drain, a person scaling
the workload during a drain — and the cluster itself counts what must never happen:

* scale-downs while the data is missing, stale, partial or NaN;
* scale writes by a controller that does not hold the Lease (checked against the Lease itself);
* writes planned on a count that changed meanwhile, and pods removed without being drained;
* exceptions escaping a tick; API time of one reconcile beyond its budget;
* drains still in force after the controller that made them was killed and a new one started.

``run(quick)`` returns the figures; ``tests/scenarios/loop/test_fault_scenarios.py`` runs the same
scenarios small and asserts every "must never" figure is 0.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fleetslo.control import deadline
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import LeaderElector
from fleetslo.control.loop import Binding, Controller
from fleetslo.core.errors import ApiUnavailable, SourceUnavailable
from fleetslo.core.model import Observation, Quantiles, ReplicaCounts
from fleetslo.core.spec import FleetSLO, Target
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakeClock, FakeSource

from benchmarks.faults import Figure
from benchmarks.faults._cluster import (
    API_BUDGET,
    ApiFaults,
    Cluster,
    ClusterDrainer,
    ClusterLease,
    ClusterReplicas,
)
from tests.loop_support import make_slo

SUITE = "control"
POLICIES = ("fleetslo", "hpa-util", "hpa-running", "keda-waiting", "llmd-slo")


# --------------------------------------------------------------------------------------------
# controllers on the cluster
# --------------------------------------------------------------------------------------------


def low_load(slo: FleetSLO, replicas: ReplicaCounts, limit: int | None, now: float) -> Observation:
    """A healthy, nearly idle fleet: every policy wants fewer replicas from it."""
    ready = replicas.ready
    return Observation(
        slo.metadata.name, now, 60.0, replicas, batch_limit=limit, replicas_reporting=ready, data_age=2.0,
        ttft=Quantiles(0.05, 0.1, 0.2), itl=Quantiles(0.01, 0.012, 0.015), tpot=Quantiles(0.01, 0.012, 0.015),
        ttft_attainment=1.0, tpot_attainment=1.0, request_rate=0.2, prompt_tokens_rate=100.0,
        generation_tokens_rate=40.0, preemption_rate=0.0, running=0.5, waiting=0.0, kv_cache_usage=0.02,
        gpu_utilization=0.05,
    )  # fmt: skip


def _nan_everywhere(obs: Observation) -> Observation:
    nan = math.nan
    names = ("ttft_attainment", "tpot_attainment", "request_rate", "prompt_tokens_rate",
             "generation_tokens_rate", "preemption_rate", "running", "waiting", "kv_cache_usage",
             "gpu_utilization")  # fmt: skip
    floats = dict.fromkeys(names, nan)
    q = Quantiles(nan, nan, nan)
    return replace(obs, ttft=q, itl=q, tpot=q, **floats)


#: How the data goes bad: each turns the low-load observation into what a broken pipeline gives.
BAD_DATA: dict[str, Callable[[Observation], Observation] | None] = {
    "none": None,  # the source cannot observe at all
    "stale": lambda obs: replace(obs, data_age=900.0),
    "partial": lambda obs: replace(obs, replicas_reporting=1),
    "nan": _nan_everywhere,
}


@dataclass
class Rig:
    cluster: Cluster
    controllers: dict[str, Controller]
    electors: dict[str, LeaderElector]
    leases: dict[str, ClusterLease]
    crashes: int = 0
    longest_api_time: float = 0.0

    def tick(self, name: str) -> None:
        try:
            self.controllers[name].tick(self.cluster.clock())
        except Exception:  # counting what escapes is the point
            self.crashes += 1


def rig(
    policy: str, *, desired: int = 8, names: Sequence[str] = ("a",), source: FakeSource | None = None,
    during_drain: Callable[[Rig], None] | None = None, faults: ApiFaults | None = None,
) -> Rig:  # fmt: skip
    clock = FakeClock(0.0)
    cluster = Cluster(desired, clock, faults or ApiFaults())
    slo = make_slo("qwen", replicas=(1, 20))
    box: dict[str, Rig] = {}
    controllers, electors, leases = {}, {}, {}
    for name in names:
        leases[name] = ClusterLease(cluster)
        electors[name] = LeaderElector(leases[name], name, clock=clock, wall=lambda: 1.8e9 + clock())
        drainer = ClusterDrainer(cluster, lambda: during_drain(box["rig"]) if during_drain else None)
        fleet = FleetActuator(ClusterReplicas(cluster, name), drainer=drainer)
        binding = Binding(slo, make_policy(policy, slo.spec), source or FakeSource(low_load), fleet)
        controllers[name] = Controller([binding], Auditor(ControllerMetrics()), leader=electors[name],
                                       perf_clock=clock, api_budget=API_BUDGET)  # fmt: skip
    box["rig"] = Rig(cluster, controllers, electors, leases)
    return box["rig"]


def run_for(r: Rig, seconds: float, step: float = 5.0) -> None:
    """Every controller campaigns (every 2 s) and ticks (every ``step``) for ``seconds``."""
    clock, ticks = r.cluster.clock, int(seconds / step)
    for _ in range(ticks):
        for name in r.controllers:
            r.electors[name].step()
            started = clock()
            r.tick(name)
            r.longest_api_time = max(r.longest_api_time, clock() - started)
        clock.advance(step)


# --------------------------------------------------------------------------------------------
# scenarios: each returns what happened
# --------------------------------------------------------------------------------------------


def bad_data(policy: str, kind: str, seconds: float) -> Rig:
    """An hour of nearly idle traffic seen through a broken pipeline: nothing may scale down."""
    corrupt = BAD_DATA[kind]
    source = FakeSource((lambda s, rc, lim, now: corrupt(low_load(s, rc, lim, now))) if corrupt else low_load)
    if corrupt is None:
        source.error = SourceUnavailable("connection refused")
    r = rig(policy, source=source)
    run_for(r, seconds)
    return r


def good_data_scales_down(policy: str, seconds: float) -> bool:
    """The control: the same idle traffic seen whole makes the policy scale down."""
    r = rig(policy)
    run_for(r, seconds)
    return r.cluster.desired < 8


def lease_lost_mid_drain() -> Rig:
    """a drains; meanwhile it is cut off from the API server and b takes the Lease."""

    def partition(r: Rig) -> None:
        if r.cluster.holder() != "a":
            return
        r.leases["a"].partitioned = True
        for _ in range(15):  # 30 s: b's lease duration passes on its clock, it takes over
            r.cluster.clock.advance(2.0)
            r.electors["b"].step()
        r.leases["a"].partitioned = False

    r = rig("static", names=("a", "b"), during_drain=partition)  # static: replicas.min, 1
    run_for(r, 120.0)
    return r


def concurrent_scale() -> Rig:
    """A person scales 8 -> 12 while the controller drains for a scale-down."""
    scaled: list[int] = []

    def person(r: Rig) -> None:
        if not scaled:
            r.cluster.desired, r.cluster.version = 12, r.cluster.version + 1
            scaled.append(12)

    r = rig("static", during_drain=person)
    run_for(r, 60.0)
    return r


def api_faults(seed: int, seconds: float) -> Rig:
    """409, 429, 5xx and hung calls on every API call, at random; then the API heals."""
    faults = ApiFaults(conflict=0.1, rate_limited=0.05, unavailable=0.1, hung=0.1, rng=random.Random(seed))
    r = rig("static", faults=faults)
    run_for(r, seconds)
    r.cluster.faults = ApiFaults()
    run_for(r, 600.0)
    return r


def killed_mid_drain() -> tuple[int, int]:
    """a drains and dies before writing; b becomes leader: drains left behind, before and after."""
    killed: list[bool] = []

    def die(r: Rig) -> None:
        killed.append(True)
        raise SystemExit("killed")  # not an Exception: nothing in the loop catches it

    r = rig("static", names=("a",), during_drain=die)
    r.electors["a"].step()
    with contextlib.suppress(SystemExit):
        r.controllers["a"].tick(r.cluster.clock())
    left = len(r.cluster.drains_in_force)
    r.cluster.lease = None  # its Lease expires; a new controller starts
    b = rig("static", names=("b",))
    b.cluster.desired, b.cluster.drains_in_force = r.cluster.desired, set(r.cluster.drains_in_force)
    run_for(b, 10.0)
    return left, len(b.cluster.drains_in_force)


def hung_attempts() -> int:
    """The real Kubernetes client against a socket that never answers, inside a 0.5 s budget."""
    import time

    from fleetslo.control.kube.client import client_for
    from fleetslo.control.kube.workloads import Workloads

    from tests.adapters.kube.kapi import HungServer

    server = HungServer()
    try:
        api = client_for(server.url)
        workloads = Workloads(api)
        with (
            contextlib.closing(api),
            deadline.within(0.5, time.monotonic),
            contextlib.suppress(ApiUnavailable),
        ):
            workloads.get(Target(namespace="infer", name="qwen", model_name="qwen"))
        return server.connections
    finally:
        server.close()


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


def bad_data_scale_downs(policy: str, kind: str, seconds: float) -> int:
    r = bad_data(policy, kind, seconds)
    return sum(1 for _, _, before, after in r.cluster.writes if after < before) + 1000 * r.crashes


def run(quick: bool) -> list[Figure]:
    logger = logging.getLogger("fleetslo")
    level, logger.level = logger.level, logging.CRITICAL  # thousands of audited holds are not news
    try:
        return _figures(quick)
    finally:
        logger.setLevel(level)


def _figures(quick: bool) -> list[Figure]:
    policies = POLICIES[:2] if quick else POLICIES
    seconds = 900.0 if quick else 3600.0
    seeds = range(3) if quick else range(20)
    figures: list[Figure] = []
    scaled_down: dict[str, int] = {}
    crashes = 0
    for kind in BAD_DATA:
        by_policy = {p: bad_data_scale_downs(p, kind, seconds) for p in policies}
        scaled_down[kind] = sum(by_policy.values())
        acting = [p for p, n in by_policy.items() if n]
        if acting:
            figures.append(
                Figure(SUITE, f"  policies that scale down on {kind} data", ", ".join(acting), "none")
            )
    # The control: a hold on bad data is evidence only from a policy that scales the same idle
    # data down when it is whole (the fleetslo policy holds there too while it learns its model).
    controls = [p for p in policies if good_data_scales_down(p, seconds)]
    figures.insert(0, Figure(SUITE, f"bad-data scenarios ({len(BAD_DATA)} kinds x {len(policies)} policies)",
                             len(BAD_DATA) * len(policies)))  # fmt: skip
    figures.append(Figure(SUITE, "policies that scale the same data down when whole", ", ".join(controls),
                          "the control"))  # fmt: skip
    figures += [Figure(SUITE, f"scale-downs on {kind} data", n, "0") for kind, n in scaled_down.items()]
    lost = lease_lost_mid_drain()
    figures.append(Figure(SUITE, "scale writes by a non-leader (Lease lost mid-drain)",
                          lost.cluster.non_leader_writes, "0"))  # fmt: skip
    figures.append(
        Figure(SUITE, "pods left drained by the deposed leader", len(lost.cluster.drains_in_force), "0")
    )
    race = concurrent_scale()
    overwritten = sum(1 for _, _, before, after in race.cluster.writes if before == 12 and after == 7)
    figures.append(
        Figure(SUITE, "stale writes over a concurrent scale", race.cluster.stale_writes + overwritten, "0")
    )
    figures.append(Figure(SUITE, "pods removed without a drain", race.cluster.undrained_removals, "0"))
    worst_api, api_crashes, api_bad_writes, converged = 0.0, 0, 0, 0
    for seed in seeds:
        r = api_faults(seed, seconds)
        worst_api = max(worst_api, r.longest_api_time)
        api_crashes += r.crashes
        api_bad_writes += r.cluster.undrained_removals + r.cluster.stale_writes
        converged += r.cluster.desired == 1
    crashes += lost.crashes + race.crashes + api_crashes
    figures += [
        Figure(SUITE, f"API-fault runs (409/429/5xx/hung, {len(seeds)} seeds)", len(seeds)),
        Figure(SUITE, "longest API time of one reconcile (s)", round(worst_api, 1), f"<= {API_BUDGET:g}"),
        Figure(SUITE, "stale or undrained writes under API faults", api_bad_writes, "0"),
        Figure(SUITE, "runs that reach the decision once the API heals", converged, str(len(seeds))),
    ]
    figures.append(Figure(SUITE, "attempts per call on a hung API server (real client)", hung_attempts(),
                          "1 (urllib3's default made 4)"))  # fmt: skip
    before, after = killed_mid_drain()
    figures.append(
        Figure(SUITE, "drains left by a killed controller, after restart", after, f"0 (was {before})")
    )
    figures.append(Figure(SUITE, "exceptions escaping a tick", crashes, "0"))
    return figures
