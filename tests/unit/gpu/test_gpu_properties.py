"""Property tests: the JSON readers are total. Any document — "N/A" anywhere, keys missing, values
of the wrong type — gives samples whose every value is absent or a plausible base-unit number,
or a ``GpuReadError`` for a document with no GPU list; never any other exception."""

from __future__ import annotations

import json
import math
from typing import Any

from fleetslo.core.errors import GpuReadError
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu import amdsmi_cli, rocm_smi, units
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.gpu.gpu_fakes import fixture

AMD_KEYS = [
    "gpu", "gpu_data", "usage", "gfx_activity", "umc_activity", "power", "socket_power",
    "current_socket_power", "mem_usage", "used_vram", "total_vram", "temperature", "hotspot", "edge", "mem",
    "clock", "gfx_0", "mem_0", "clk", "ecc", "total_correctable_count", "energy", "total_energy_consumption",
    "value", "unit", "asic", "market_name", "bus", "bdf", "limit", "uuid",
]  # fmt: skip
ROCM_KEYS = [
    "card0", "card1", "system", "GPU use (%)", "GPU memory use (%)", "VRAM Total Memory (B)",
    "VRAM Total Used Memory (B)", "Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)",
    "Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)",
    "Accumulated Energy (uJ)", "sclk clock speed:", "Unique ID", "Driver version",
]  # fmt: skip
UNITS = st.sampled_from(["W", "mW", "uW", "MB", "B", "C", "MHz", "%", "J", "uJ", "mV", "GT/s", "", "N/A"])
LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["N/A", "n/a", "", "35.0", "(300Mhz)", "0x1f", "234 W", "nan", "inf", "-1", "1e400"]),
    st.text(max_size=8), st.builds(lambda v, u: {"value": v, "unit": u}, st.one_of(st.integers(), st.floats(),
                                                                                   st.just("N/A")), UNITS),
)  # fmt: skip


def documents(keys: list[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(st.sampled_from(keys), st.text(max_size=3)), inner, max_size=5),
        ),
        max_leaves=12,
    )  # fmt: skip


def assert_plausible(samples: list[GpuSample]) -> None:
    for s in samples:
        assert isinstance(s.index, int) and s.index >= 0
        ratios = (s.utilization, s.memory_bandwidth_utilization)
        assert all(r is None or 0.0 <= r <= 1.0 for r in ratios)
        scalars = (*ratios, s.memory_used_bytes, s.memory_total_bytes, s.power_watts, s.power_limit_watts,
                   s.energy_joules)  # fmt: skip
        values = [
            *scalars,
            *s.temperatures_celsius.values(),
            *s.clocks_hertz.values(),
            *s.ecc_errors.values(),
        ]
        assert all(v is None or (isinstance(v, float) and math.isfinite(v)) for v in values)
        assert all(v is None or v >= 0 for v in (*scalars, *s.clocks_hertz.values(), *s.ecc_errors.values()))
        for name in ("uuid", "model", "serial", "pci_bus_id", "driver_version"):
            assert getattr(s, name) is None or isinstance(getattr(s, name), str)


def amd(metric: Any, listed: Any, static: Any) -> list[GpuSample]:
    try:
        identity = amdsmi_cli.identities(listed, static)
    except GpuReadError:
        identity = {}
    try:
        return amdsmi_cli.samples(metric, identity)
    except GpuReadError:
        return []


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(documents(AMD_KEYS), documents(AMD_KEYS), documents(AMD_KEYS))
def test_amd_smi_reader_never_crashes_on_arbitrary_json(metric: Any, listed: Any, static: Any) -> None:
    assert_plausible(amd(metric, listed, static))


@FAST
@given(st.lists(st.dictionaries(st.sampled_from(AMD_KEYS), documents(AMD_KEYS), max_size=8), max_size=3))
def test_amd_smi_reader_never_crashes_on_gpu_lists_of_arbitrary_sections(
    entries: list[dict[str, Any]],
) -> None:
    for i, entry in enumerate(entries):
        entry["gpu"] = i
    assert len(amd(entries, entries, entries)) == len(entries)
    assert_plausible(amd(entries, entries, entries))


@FAST
@given(documents(ROCM_KEYS))
def test_rocm_smi_reader_never_crashes_on_arbitrary_json(doc: Any) -> None:
    try:
        assert_plausible(rocm_smi.samples(doc))
    except GpuReadError:
        assert not isinstance(doc, dict)


def mutate(node: Any, choices: st.DataObject) -> Any:
    """Walk a real document, replacing some leaves with "N/A"/wrong types and dropping some keys."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "gpu":
                out[key] = value  # the index stays: a GPU without one is rightly skipped
            elif choices.draw(st.integers(0, 9)) > 0:
                out[key] = mutate(value, choices)  # else the key goes missing
        return out
    if isinstance(node, list):
        return [mutate(v, choices) for v in node]
    return choices.draw(st.one_of(st.just(node), st.just(node), LEAVES))


@settings(FAST, max_examples=20)  # each example makes hundreds of draws: one per leaf
@given(st.data())
def test_real_outputs_with_random_na_missing_keys_and_wrong_types_still_read(data: st.DataObject) -> None:
    metric = mutate(json.loads(fixture("amd-smi_metric_json_MI300X_rocm6_SYNTHETIC.json")), data)
    static = mutate(json.loads(fixture("amd-smi_static_json_MI210_rocm7.json")), data)
    assert len(amd(metric, [], static)) == 2
    assert_plausible(amd(metric, [], static))
    cards = mutate(json.loads(fixture("rocm-smi_json_MI100_rocm602.json")), data)
    assert_plausible(rocm_smi.samples(cards))


@FAST
@given(LEAVES, st.sampled_from(sorted(units.UNITS)))
def test_quantity_is_total(raw: Any, unit: str) -> None:
    value = units.quantity(raw, unit)
    assert value is None or math.isfinite(value)
