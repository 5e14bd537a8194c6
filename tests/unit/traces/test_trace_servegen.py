"""The ServeGen reader: parsing, rates and burstiness per window, lengths, determinism, streaming."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import fixed_tokens
from fleetslo.sim.traces.servegen import WINDOW_S, arrivals, load_servegen, parse_windows, window_rates

REAL = Path("/work/shared/traces/servegen/language/m-small")


def write_client(
    folder: Path, ident: int, rows: list[str], dataset: dict[str, dict[str, str]] | None = None
) -> None:
    (folder / f"chunk-{ident}-trace.csv").write_text("\n".join(rows) + "\n")
    if dataset is not None:
        (folder / f"chunk-{ident}-dataset.json").write_text(json.dumps(dataset))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    # client 0: Poisson-like (Gamma shape 1) at 2/s, then idle, then 6/s; its fitted scale is nonsense
    write_client(
        tmp_path,
        0,
        ["0,2.0,1.0,Gamma,1.0,0.001", "600,0,0,,0,0", "1200,6.0,1.0,Gamma,1.0,5.0"],
        {
            "0": {"input_tokens": "{100: 0.5, 300: 0.5}", "output_tokens": "{10: 1.0}"},
            "1200": {"input_tokens": "{}", "output_tokens": "{}"},
        },
    )
    # client 1: very bursty (Gamma shape 0.0625, CV 4) at 1/s throughout, no lengths
    write_client(
        tmp_path, 1, ["0,1.0,4.0,Gamma,0.0625,1.0", "600,1.0,4.0,Gamma,0.0625,1", "1200,1.0,4,Gamma,0.0625,1"]
    )
    return tmp_path


def per_window(reqs: list, start: float) -> int:
    return sum(1 for r in reqs if start <= r.arrival_s < start + WINDOW_S)


def test_rates_follow_the_windows_not_the_fitted_scale(folder: Path) -> None:
    data = load_servegen(folder)
    assert window_rates(data) == [(0.0, 3.0), (600.0, 1.0), (1200.0, 7.0)]
    reqs = list(arrivals(data, seed=1, fallback=fixed_tokens(50, 5)))
    assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)
    assert per_window(reqs, 1200) / WINDOW_S == pytest.approx(7.0, rel=0.25)
    # ×0.5 halves every client's rate
    half = list(arrivals(data, seed=1, rate_scale=0.5, fallback=fixed_tokens(50, 5)))
    assert len(half) / len(reqs) == pytest.approx(0.5, rel=0.2)


def test_the_fitted_shape_sets_the_burstiness(tmp_path: Path) -> None:
    write_client(tmp_path, 3, [f"{600 * k},5.0,4.0,Gamma,0.0625,9" for k in range(6)])
    write_client(tmp_path, 4, [f"{600 * k},5.0,1.0,Gamma,1.0,9" for k in range(6)])
    bursty = list(arrivals(load_servegen(tmp_path, clients=[3]), seed=2, fallback=fixed_tokens(1, 1)))
    smooth = list(arrivals(load_servegen(tmp_path, clients=[4]), seed=2, fallback=fixed_tokens(1, 1)))

    def cv(reqs: list) -> float:
        gaps = [b.arrival_s - a.arrival_s for a, b in itertools.pairwise(reqs)]
        return statistics.pstdev(gaps) / statistics.fmean(gaps)

    assert cv(smooth) == pytest.approx(1.0, abs=0.1)
    assert cv(bursty) > 2.5


def test_lengths_come_from_the_nearest_earlier_dataset_window(folder: Path) -> None:
    reqs = list(arrivals(load_servegen(folder, clients=[0]), seed=3, fallback=fixed_tokens(7, 7)))
    assert {(r.input_tokens, r.output_tokens) for r in reqs} == {(100, 10), (300, 10)}
    # client 1 has no dataset: the fallback sampler gives its lengths
    other = list(arrivals(load_servegen(folder, clients=[1]), seed=3, fallback=fixed_tokens(7, 8)))
    assert {(r.input_tokens, r.output_tokens) for r in other} == {(7, 8)}


def test_deterministic_and_a_sub_span_reproduces_the_whole(folder: Path) -> None:
    data = load_servegen(folder)
    tokens = fixed_tokens(5, 5)
    whole = list(arrivals(data, seed=9, fallback=tokens))
    assert whole == list(arrivals(data, seed=9, fallback=tokens))
    assert whole != list(arrivals(data, seed=10, fallback=tokens))
    part = list(arrivals(data, seed=9, start_s=1200.0, fallback=tokens))
    assert [r.arrival_s + 1200.0 for r in part] == pytest.approx(
        [r.arrival_s for r in whole if r.arrival_s >= 1200]
    )


def test_arrivals_are_streamed(folder: Path) -> None:
    stream = arrivals(load_servegen(folder), seed=1, fallback=fixed_tokens(5, 5))
    first = next(stream)
    assert first.arrival_s < WINDOW_S


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("0,1.0,1.0,Poisson,1,1", "pattern"),
        ("0,1.0,1.0,Gamma,-1,1", "shape"),
        ("0,x,1.0,Gamma,1,1", "numbers"),
        ("0,1.0,1.0,Gamma", "6 fields"),
        ("0,-2,1.0,Gamma,1,1", "rate"),
    ],
)
def test_bad_rows_name_the_line(row: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as err:
        parse_windows(["0,0,0,,0,0", row], "chunk-1-trace.csv")
    assert "chunk-1-trace.csv:2" in str(err.value)


def test_bad_pdf_is_a_clear_error(tmp_path: Path) -> None:
    write_client(
        tmp_path,
        0,
        ["0,1.0,1.0,Gamma,1,1"],
        {"0": {"input_tokens": "os.system('x')", "output_tokens": "{1: 1}"}},
    )
    with pytest.raises(ConfigError, match="literal"):
        list(arrivals(load_servegen(tmp_path), fallback=fixed_tokens(1, 1)))


def test_missing_folder() -> None:
    with pytest.raises(ConfigError, match="ServeGen folder"):
        load_servegen("/nonexistent/servegen")


@pytest.mark.skipif(not REAL.is_dir(), reason="the shared ServeGen data is not on this machine")
def test_real_m_small_has_two_weeks_and_a_day_shape() -> None:
    data = load_servegen(REAL)
    rates = window_rates(data)
    assert data.span_s == pytest.approx(14 * 86_400)
    assert statistics.fmean(r for _, r in rates) == pytest.approx(1174, rel=0.05)
    head = list(itertools.islice(arrivals(data, rate_scale=0.01, fallback=fixed_tokens(1, 1)), 2000))
    assert all(r.input_tokens >= 1 and r.output_tokens >= 1 for r in head)
