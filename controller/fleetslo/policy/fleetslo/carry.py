"""What the ``fleetslo`` policy carries across a controller restart, and what the spec tells it ahead.

* ``learned`` / ``restore``: the performance model, request mix and measured margins (``learned``) go
  into the FleetSLO's status or a state file; a new controller resumes them, so it sizes as the
  old one did instead of relearning the engine by over-provisioning. A record of another version,
  or one that does not parse, is *discarded* with the reason (a degraded start from the prior,
  never a crash); a record learned on another engine profile gives way to the profile now named.
* The load history read from the metrics store at start fills the seasonal forecast, in the unit
  its samples are kept in: tokens per second (prompt + generated), the load the trend follows.
* ``known_events``: the spec's ``forecast.events`` (a launch at 18:00) as the forecaster's events.

Pure: dicts and samples in, state out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeGuard

from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.base import Carried, LoadSample, Restored
from fleetslo.policy.fleetslo.state import LEARNED_VERSION, FleetSLOState
from fleetslo.policy.forecast import KnownEvent


def restore(state: FleetSLOState, carried: Carried) -> tuple[FleetSLOState, Restored]:
    """``state`` with the carried model, mix and history (see the module docstring)."""
    state, learned, why = _resume(state, carried.learned)
    samples = token_history(carried.history, state)
    forecast = state.forecast
    used = 0
    if samples and forecast.seasonal is not None:
        state = replace(state, forecast=forecast.bootstrapped(samples))
        used = len(samples)
    return state, Restored(learned, why, used)


def _resume(state: FleetSLOState, learned: Mapping[str, Any] | None) -> tuple[FleetSLOState, str, str]:
    if learned is None:
        return state, "prior", "no learned model was persisted"
    if not isinstance(learned, Mapping) or learned.get("version") != LEARNED_VERSION:
        version = learned.get("version") if isinstance(learned, Mapping) else None
        return state, "discarded", f"persisted model version {version!r}, this one reads {LEARNED_VERSION}"
    if not _all_finite(learned):
        return state, "discarded", "persisted model holds a non-finite number"
    try:
        resumed = state.resume(learned)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        return state, "discarded", f"persisted model does not parse ({type(exc).__name__}: {exc})"
    if resumed is state:
        return state, "prior", "persisted model was learned on other prior step costs (profile changed)"
    return resumed, "resumed", f"resumed {resumed.model.describe()}"


def token_history(history: Sequence[LoadSample], state: FleetSLOState) -> list[tuple[float, float]]:
    """(time, tokens/s) samples: the measured token rate, else the request rate times the mean
    request of the resumed mix (the best estimate of the load's size there is), else nothing."""
    per_request = state.mix.tokens_per_request if state.mix is not None else None
    out = []
    for s in history:
        if _usable(s.tokens):
            out.append((s.at, s.tokens))
        elif per_request is not None and _usable(s.requests):
            out.append((s.at, s.requests * per_request))
    return out


def _usable(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value >= 0


def known_events(spec: FleetSLOSpec) -> tuple[KnownEvent, ...]:
    """The spec's known events as the seasonal forecaster's (Unix seconds, factor)."""
    forecast = spec.forecast
    if forecast is None:
        return ()
    return tuple(KnownEvent(e.start_s, e.end_s, e.rate_factor) for e in forecast.events)


def with_known_events(state: FleetSLOState, spec: FleetSLOSpec) -> FleetSLOState:
    events = known_events(spec)
    seasonal = state.forecast.seasonal
    if not events or seasonal is None:
        return state
    return replace(state, forecast=replace(state.forecast, seasonal=seasonal.with_events(events)))


def _all_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_all_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_all_finite(v) for v in value)
    return True
