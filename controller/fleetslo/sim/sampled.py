"""Representative replicas: simulate one replica in ``m`` and scale the fleet's cost back up.

A least-outstanding router spreads a fleet's traffic evenly: each of N replicas sees about 1/N of
the arrivals, and what one replica's requests experience depends on its own share, not on the
others. So a fleet of N replicas serving a stream is represented by N/m replicas serving every
m-th request of it (systematic sampling: it keeps the stream's rate curve and its bursts at 1/m,
and no random thinning noise is added), under the same policy with the spec's replica bounds
divided by m. Latency, attainment and per-replica figures are read as they are; replica-hours and
cost are multiplied by m.

What it costs in accuracy, measured against the exact fleet where both run (``benchmarks sim``):
the sampled fleet balances over fewer replicas (slightly burstier per replica), its fleet size
moves in steps of m replicas, and each judging window holds 1/m as many requests (a noisier p90).
So m must leave the sampled fleet large: tens of replicas, which is what makes fleets of
thousands replayable at all.

``fleetslo simulate --sample M`` runs a scenario this way (``sampled_scenario``) and scales the judged
result back (``scaled_result``): the fleet's size and cost and the traffic's counts are multiplied by
m (they are the simulated ones × m, estimates of the whole), latency, attainment and ratios are read
as they are, and the result says ``sample: m``.

Pure plumbing over the exact engine: it samples arrivals and rescales a spec, a scenario and a result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import replace
from itertools import islice

from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.sim.result_types import SimResult
from fleetslo.sim.scenario import Scenario
from fleetslo.sim.workload import Request, Trace


def every_mth(arrivals: Iterable[Request], m: int, offset: int = 0) -> Iterator[Request]:
    """Requests ``offset``, ``offset + m``, ``offset + 2m``, … of the stream."""
    _check_m(m)
    # islice steps through the stream in C: one in 4 of 1.16 M requests in 0.06 s instead of 0.16 s
    yield from islice(arrivals, offset % m, None, m)


def sampled_spec(spec: FleetSLOSpec, m: int) -> FleetSLOSpec:
    """The spec with its replica bounds divided by ``m`` (min rounded down but kept >= 1 if it was)."""
    _check_m(m)
    replicas = spec.replicas
    low = replicas.min // m if replicas.min % m == 0 or replicas.min == 0 else max(1, round(replicas.min / m))
    high = max(1, math.ceil(replicas.max / m))
    changed = replicas.model_copy(update={"min": min(low, high), "max": high})
    return spec.model_copy(update={"replicas": changed})


def sampled_replicas(n: int, m: int) -> int:
    """The representative count of a fleet of ``n`` (at least one)."""
    _check_m(m)
    return max(1, round(n / m))


def sampled_scenario(scenario: Scenario, m: int) -> Scenario:
    """The scenario on every m-th request, its replica bounds and warm fleet divided by ``m``."""
    _check_m(m)
    trace = scenario.trace
    requests = tuple(every_mth(trace.requests, m))
    if not requests:
        raise ConfigError(f"sample: no request left in one in {m} of the trace's {len(trace)}")
    return replace(
        scenario,
        trace=Trace(requests, f"{trace.source}, 1 request in {m}"),
        trace_name=f"{scenario.trace_name} (1 replica in {m} simulated)",
        spec=sampled_spec(scenario.spec, m),
        initial_replicas=sampled_replicas(scenario.initial_replicas, m),
    )


def scaled_result(result: SimResult, m: int) -> SimResult:
    """A sampled run's result as the whole fleet's: sizes, costs and counts × m, marked ``sample``."""
    _check_m(m)

    def times(value: float | None) -> float | None:
        return None if value is None else value * m

    def count(value: int | None) -> int | None:
        return None if value is None else value * m

    windows = tuple(
        replace(
            w,
            requests=w.requests * m,
            arrival_rate=w.arrival_rate * m,
            ready_replicas=count(w.ready_replicas),
            starting_replicas=count(w.starting_replicas),
            queue_length=times(w.queue_length),
        )
        for w in result.windows
    )
    decisions = tuple(
        replace(d, replicas=d.replicas * m, ready=d.ready * m, starting=d.starting * m)
        for d in result.decisions
    )
    events = tuple(
        replace(e, replicas_from=e.replicas_from * m, replicas_to=e.replicas_to * m) for e in result.events
    )
    return replace(
        result,
        requests=result.requests * m,
        completed=result.completed * m,
        rejected=result.rejected * m,
        in_flight_at_end=result.in_flight_at_end * m,
        replica_hours=result.replica_hours * m,
        gpu_hours=result.gpu_hours * m,
        cost_usd=result.cost_usd * m,
        tokens=result.tokens * m,
        mean_replicas=times(result.mean_replicas),
        preemptions=result.preemptions * m,
        windows=windows,
        decisions=decisions,
        events=events,
        initial_replicas=count(result.initial_replicas),
        sample=m,
    )


def _check_m(m: int) -> None:
    if not isinstance(m, int) or m < 1:
        raise ConfigError(f"sample: must be a whole number >= 1 (one replica simulated in m; got {m!r})")
