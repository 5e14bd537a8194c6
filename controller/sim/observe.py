"""The policy's view of a simulated fleet: the shared observation builder, re-exported.

The builder lives in ``controller.observation`` so the direct source in production and the
simulator run the same code; this module keeps the simulator's import path.
"""

from __future__ import annotations

from controller.observation import build_observation

__all__ = ["build_observation"]
