"""``fleetslo exporter`` keeps the collector's pauses off the gate: startup objects frozen, young
collections rarer. Process-wide, so checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import gc
from fleetslo.sidecar.app import tune_gc_for_serving
tune_gc_for_serving()
assert gc.get_threshold() == (10_000, 20, 100), gc.get_threshold()
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
"""


def test_the_exporter_freezes_startup_objects_and_collects_young_ones_less_often() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
