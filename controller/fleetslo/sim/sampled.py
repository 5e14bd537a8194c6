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

Pure plumbing over the exact engine: it samples arrivals and rescales a spec and a result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from itertools import islice

from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.sim.workload import Request


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


def _check_m(m: int) -> None:
    if not isinstance(m, int) or m < 1:
        raise ConfigError(f"sample: must be a whole number >= 1 (one replica simulated in m; got {m!r})")
