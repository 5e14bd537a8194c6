"""The source protocol: everything the policy may know about one target, at one instant.

A source turns metrics into an ``Observation``; it never decides anything. It reports missing,
stale or partial data in the observation (``None`` signals, ``data_age``, ``replicas_reporting``)
and raises ``NoData``/``StaleData``/``Transient`` only when it could not observe at all.
"""

from __future__ import annotations

from typing import Protocol

from controller.model import Observation, ReplicaCounts
from controller.settings import FleetSLO


class Source(Protocol):
    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        """The observation of ``slo``'s target over its objectives' window, as of ``now``."""
        ...
