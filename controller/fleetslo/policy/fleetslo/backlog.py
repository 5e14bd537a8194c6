"""The backlog: requests in the fleet beyond what the arrival rate keeps there.

By Little's law a fleet in a steady state that completes ``λ`` requests/s holds ``λ·W`` of them,
running or waiting, where ``W`` is how long a request stays. Whatever is held beyond that is a
queue that built up, to be drained on top of the arrivals. ``W`` is the performance model's
(``Prediction.stay_s``: prefill queue, prefill and decode at this window's request mix) times a
ratio learned on clean windows, observed over predicted. It is not a stay time measured once and
kept: when the mix moves to longer outputs (reasoning traffic), requests stay longer and the fleet
holds more of them at the same arrival rate, and a stay time learned on the earlier mix reads
that as a queue. On ServeGen's reasoning day it did: the fleet grew from 14 to 52 replicas while
arrivals fell from 14 to 8 per second (the oracle needed 8-13).

Where the model has no steady state for the current fleet (the queue grows: ``stay_s`` infinite),
the requests waiting for admission are the backlog.

A backlog is not spread over the replicas added for it: vLLM keeps a request on the replica that
queued it, so a new replica only takes the *arrivals* off the ones holding the queue, which then
drain it alone at their full rate (``useful``). Sized as load spread over the new fleet, a queue
that one replica built while 95 started (ServeGen's data going from nothing to 143 requests/s
under a 10-minute cold start) held the maximum fleet for 35 minutes after the traffic had been
served, where 14 carried the arrivals. Pure functions.
"""

from __future__ import annotations

import math

from fleetslo.core.model import Observation
from fleetslo.policy.fleetslo import signals

#: Smoothing of the learned stay ratio, per clean window: ``running`` is an instant gauge that
#: swings ±50 % between scrapes while the completion rate is a one-minute average.
STAY_SMOOTHING = 0.1


def stay_ratio(obs: Observation, predicted_stay_s: float, previous: float | None) -> float | None:
    """The smoothed ratio of the stay the fleet showed (requests held / completion rate, Little's
    law) to the model's ``predicted_stay_s`` for this window; ``previous`` when this window cannot
    tell (no rate, no gauge, no finite prediction)."""
    held = signals.outstanding(obs)
    rate = obs.request_rate
    if not rate or not held or not (0 < predicted_stay_s < math.inf):
        return previous
    return signals.smooth(held / rate / predicted_stay_s, previous, STAY_SMOOTHING)


def backlog(obs: Observation, arrival: float, stay_s: float) -> float:
    """Requests held beyond ``arrival × stay_s`` across the ready fleet (never below zero); the
    waiting ones where ``stay_s`` is not finite."""
    scale = signals.reporting_scale(obs)
    if not math.isfinite(stay_s):
        return (obs.waiting or 0.0) * scale
    held = (signals.outstanding(obs) or 0.0) * scale
    return max(0.0, held - arrival * stay_s)


def useful(need: int, for_arrivals: int, ready: int) -> tuple[int, int | None]:
    """The replicas a backlog can use: at most those the arrivals need alone (``for_arrivals``)
    plus the ``ready`` ones that may hold the queue, which drain it while the others take every
    new request. Returns the count and, where it capped ``need``, the ready replicas it counted.
    The policy sizes ``for_arrivals`` at what *arrives* (the top of the window's samples of the
    forecast: completions plus the growth of the requests held), not at the completion rate: an
    overloaded fleet completes only what it can serve; its KV floor and its predicted p90s are
    the arrivals' on the replicas that take them: the queue's KV stays where the queue is."""
    cap = for_arrivals + ready
    return (need, None) if need <= cap else (cap, ready)
