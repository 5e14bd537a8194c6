"""Builders for hand-made specs and observations shared by the baseline policy tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fleetslo.core.config import load
from fleetslo.core.model import Observation, Quantiles, ReplicaCounts
from fleetslo.core.spec import FleetSLOSpec

SpecFactory = Callable[..., FleetSLOSpec]
ObsFactory = Callable[..., Observation]


@pytest.fixture
def make_spec() -> SpecFactory:
    def build(min_replicas: int = 1, max_replicas: int = 20, batch_max: int = 256) -> FleetSLOSpec:
        return load(
            FleetSLOSpec,
            {
                "target": {"name": "qwen", "model_name": "qwen"},
                "objectives": {"ttft": {"threshold": "2s"}, "tpot": {"threshold": "50ms"}},
                "replicas": {"min": min_replicas, "max": max_replicas, "cold_start": "5m"},
                "batch_limit": {"max": batch_max},
            },
        )

    return build


@pytest.fixture
def spec(make_spec: SpecFactory) -> FleetSLOSpec:
    return make_spec()


@pytest.fixture
def observe() -> ObsFactory:
    def build(
        ready: int = 4,
        starting: int = 0,
        ttft: float | None = None,
        tpot: float | None = None,
        **signals: Any,
    ) -> Observation:
        return Observation(
            target="qwen",
            at=0.0,
            window=60.0,
            replicas=ReplicaCounts(ready, starting),
            batch_limit=128,
            replicas_reporting=ready,
            data_age=1.0,
            ttft=Quantiles(p90=ttft),
            tpot=Quantiles(p90=tpot),
            **signals,
        )

    return build
