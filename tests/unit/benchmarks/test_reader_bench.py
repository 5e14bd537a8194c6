"""``benchmarks reader``: its three shapes are read as what they claim to be, and both ways of
reading give the same rows (the comparison it reports is of like with like)."""

from __future__ import annotations

from fleetslo.sim.traces import parse_trace
from fleetslo.sim.traces.csv_rows import csv_format

from benchmarks import bench_reader


def test_each_shape_reads_back_as_its_format_at_the_rate_it_was_written() -> None:
    for shape, fmt in (("azure 2023", "azure"), ("azure 2024", "azure"), ("plain", "plain")):
        read = parse_trace(bench_reader.lines(shape, 2_000), shape)
        assert read.format == fmt and len(read.trace) == 2_000
        assert 80 < read.trace.duration_s < 120  # 2,000 requests at 20/s


def test_every_shape_is_one_the_block_reader_takes() -> None:
    for shape in bench_reader.HEADERS:
        text = bench_reader.lines(shape, 1_000)
        _, parser, _ = csv_format(text[0], shape, 1)
        assert parser.block(text[1:]) is not None  # type: ignore[attr-defined]


def test_blocks_and_lines_give_the_same_rows() -> None:
    out = bench_reader.measure(5_000, rounds=1)
    assert set(out) == {"azure 2023", "azure 2024", "plain"}
    assert all(r["same"] and r["rows"] == 5_000 for r in out.values())
