"""Request traces for the simulator: readers of real formats, seeded generators, pure transforms.

Everything here produces or maps ``Trace`` values; nothing runs the engine model or a policy.
"""

from fleetslo.sim.traces.readers import TraceRead, load_trace, parse_trace, read_trace
from fleetslo.sim.traces.synthetic import (
    TokenSampler,
    bursty,
    diurnal,
    fixed_tokens,
    lognormal_tokens,
    poisson,
    resampled_tokens,
    step_spike,
)
from fleetslo.sim.traces.transforms import rate_scale, splice_spike, time_scale, window

__all__ = [
    "TokenSampler",
    "TraceRead",
    "bursty",
    "diurnal",
    "fixed_tokens",
    "load_trace",
    "lognormal_tokens",
    "parse_trace",
    "poisson",
    "rate_scale",
    "read_trace",
    "resampled_tokens",
    "splice_spike",
    "step_spike",
    "time_scale",
    "window",
]
