"""The policy's view of a simulated fleet: the shared observation builder, re-exported.

The builder lives in ``fleetslo.control.observation`` so the direct source in production and the
simulator run the same code; this module keeps the simulator's import path.
"""

from __future__ import annotations

from fleetslo.control.observation import build_observation

__all__ = ["build_observation"]
