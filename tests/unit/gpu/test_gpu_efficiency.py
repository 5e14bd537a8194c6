"""Efficiency math: tokens per joule and GPU-seconds per 1k tokens, with resets and gaps."""

from __future__ import annotations

import pytest
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.efficiency import GpuTotals, GpuWindow, advance, efficiency, gpu_window


def gpus(energy: list[float | None], util: list[float | None]) -> list[GpuSample]:
    return [
        GpuSample(i, uuid=f"g{i}", energy_joules=e, utilization=u)
        for i, (e, u) in enumerate(zip(energy, util, strict=True))
    ]


def history(
    steps: list[tuple[float, list[GpuSample]]], max_gap: float = 10.0
) -> list[tuple[float, GpuTotals]]:
    out: list[tuple[float, GpuTotals]] = []
    for at, samples in steps:
        out.append((at, advance(out[-1] if out else None, at, samples, max_gap)))
    return out


def window(start: tuple[float, GpuTotals], end: tuple[float, GpuTotals]) -> GpuWindow:
    w = gpu_window(start, end)
    assert w is not None
    return w


def test_energy_and_busy_time_over_a_window() -> None:
    h = history([(0, gpus([100, 200], [0.5, 1.0])), (5, gpus([600, 1200], [0.5, 1.0])),
                 (10, gpus([1100, 2200], [0.5, 1.0]))])  # fmt: skip
    w = window(h[0], h[-1])
    assert w == GpuWindow(seconds=10, gpus=2, energy_joules=3000.0, busy_gpu_seconds=15.0)


def test_a_counter_reset_counts_from_zero() -> None:
    h = history([(0, gpus([5000], [1.0])), (5, gpus([6000], [1.0])), (10, gpus([300], [1.0]))])
    assert window(h[0], h[-1]).energy_joules == 300.0  # from the newest value only, as increase()


def test_energy_is_absent_unless_every_gpu_has_a_counter_at_both_ends() -> None:
    h = history(
        [(0, gpus([100, None], [1, 1])), (5, gpus([200, 300], [1, 1])), (10, gpus([300, 400], [1, 1]))]
    )
    assert window(h[0], h[-1]).energy_joules is None
    assert window(h[1], h[-1]).energy_joules == 200.0


def test_busy_time_is_absent_when_utilization_was_unreadable_for_part_of_the_window() -> None:
    h = history([(0, gpus([0], [1.0])), (5, gpus([1], [None])), (10, gpus([2], [1.0]))])
    assert window(h[0], h[-1]).busy_gpu_seconds is None


def test_a_long_gap_between_reads_is_not_credited_with_the_current_utilization() -> None:
    h = history([(0, gpus([0], [1.0])), (100, gpus([1], [1.0]))], max_gap=10)
    assert window(h[0], h[-1]).busy_gpu_seconds is None


def test_tokens_per_joule_and_gpu_seconds_per_1k_tokens() -> None:
    window = GpuWindow(seconds=60, gpus=4, energy_joules=60 * 2000.0, busy_gpu_seconds=120.0)
    e = efficiency(tokens=60 * 1000.0, tokens_seconds=60, gpu=window)
    assert e.tokens_per_joule == pytest.approx(0.5)  # 1000 tok/s at 2000 W
    assert e.allocated_gpu_seconds_per_1k_tokens == pytest.approx(4.0)  # 4 GPUs / (1000 tok/s) * 1000
    assert e.busy_gpu_seconds_per_1k_tokens == pytest.approx(2.0)  # 2 busy GPUs on average


def test_windows_of_different_spans_are_joined_as_rates() -> None:
    window = GpuWindow(seconds=62, gpus=1, energy_joules=62 * 500.0, busy_gpu_seconds=None)
    e = efficiency(tokens=58 * 100.0, tokens_seconds=58, gpu=window)
    assert e.tokens_per_joule == pytest.approx(0.2)
    assert e.busy_gpu_seconds_per_1k_tokens is None


def test_missing_data_gives_absent_values_and_no_tokens_gives_a_true_zero() -> None:
    window = GpuWindow(seconds=60, gpus=1, energy_joules=6000.0, busy_gpu_seconds=30.0)
    assert efficiency(None, 60, window).tokens_per_joule is None
    assert efficiency(100, 60, None).tokens_per_joule is None
    no_energy = GpuWindow(seconds=60, gpus=1, energy_joules=None, busy_gpu_seconds=30.0)
    assert efficiency(100, 60, no_energy).tokens_per_joule is None
    idle = efficiency(0, 60, window)
    assert idle.tokens_per_joule == 0.0
    assert idle.allocated_gpu_seconds_per_1k_tokens is None  # infinite: not a number to publish
