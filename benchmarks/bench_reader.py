"""Trace rows parsed per CPU-second: the block reader against line by line, side by side.

A day of a busy service is a billion rows, so reading them is part of what a replay costs. The CSV
reader (``fleetslo.sim.traces.csv_rows``) reads a block of lines of the usual shape with one regular
expression and falls back to reading line by line (split on commas, each cell by ``cells``) where a
block is not all of that shape. This runs both over the same rows in one process, each stage by
itself (``numbered_blocks``, the line-by-line path forced by a parser without a block reader) and
the whole streamed read (``stream_lines``, blocks), for three shapes: Azure 2023
(``2023-11-16 18:17:03.9799600``), Azure 2024 (``2024-05-10 00:00:00.009930+00:00``) and plain CSV
(``arrival_s``). It checks that both give the same rows and reports rows per CPU-second and their
ratio; the best of ``BENCH_READER_ROUNDS`` rounds (default 3), since a shared machine only ever
slows a round down. ``BENCH_READER_ROWS`` rows per shape (default 500,000).

``python -m benchmarks reader``.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections.abc import Callable
from typing import Any

from fleetslo.sim.traces.cells import Row
from fleetslo.sim.traces.csv_rows import RowParser, csv_format, numbered_blocks
from fleetslo.sim.traces.stream import stream_lines

HEADERS = {
    "azure 2023": "TIMESTAMP,ContextTokens,GeneratedTokens\n",
    "azure 2024": "TIMESTAMP,ContextTokens,GeneratedTokens\n",
    "plain": "arrival_s,input_tokens,output_tokens\n",
}


def lines(shape: str, n: int, seed: int = 7) -> list[str]:
    """``n`` rows of ``shape`` at 20 requests/s (Poisson), header first."""
    rng = random.Random(seed)
    start = dt.datetime(2024, 5, 13, tzinfo=dt.UTC)
    out = [HEADERS[shape]]
    t = 0.0
    for _ in range(n):
        t += rng.expovariate(20.0)
        prompt, output = rng.randint(1, 8000), rng.randint(1, 800)
        if shape == "plain":
            out.append(f"{t!r},{prompt},{output}\n")
            continue
        stamp = (start + dt.timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f")
        out.append(
            f"{stamp}0,{prompt},{output}\n" if shape == "azure 2023" else f"{stamp}+00:00,{prompt},{output}\n"
        )
    return out


def _line_by_line(parser: RowParser) -> RowParser:
    """The same parser without its block reader: ``numbered_blocks`` then reads line by line."""

    def row(cells: list[str]) -> Row:
        return parser(cells)

    return row


def _rows(text: list[str], by_lines: bool) -> list[Row]:
    _, parser, width = csv_format(text[0], "bench", 1)
    chosen = _line_by_line(parser) if by_lines else parser
    return [row for _, block in numbered_blocks(iter(text[1:]), 1, "bench", chosen, width) for row in block]


def _best(work: Callable[[], Any], rounds: int) -> tuple[Any, float]:
    best, result = float("inf"), None
    for _ in range(rounds):
        started = time.process_time()
        result = work()
        best = min(best, time.process_time() - started)
    return result, best


def measure(n: int, rounds: int) -> dict[str, dict[str, Any]]:
    return {shape: _shape(lines(shape, n), n, rounds) for shape in HEADERS}


def _shape(text: list[str], n: int, rounds: int) -> dict[str, Any]:
    by_lines, lines_s = _best(lambda: _rows(text, by_lines=True), rounds)
    by_blocks, blocks_s = _best(lambda: _rows(text, by_lines=False), rounds)
    streamed, stream_s = _best(lambda: sum(1 for _ in stream_lines(text, "bench")), rounds)
    return {
        "rows": n,
        "same": by_lines == by_blocks and streamed == n,
        "lines_per_cpu_s": n / lines_s,
        "blocks_per_cpu_s": n / blocks_s,
        "ratio": lines_s / blocks_s,
        "streamed_per_cpu_s": n / stream_s,
    }


def main() -> dict[str, dict[str, Any]]:
    n = int(os.environ.get("BENCH_READER_ROWS", "500000"))
    rounds = int(os.environ.get("BENCH_READER_ROUNDS", "3"))
    print(f"{n:,} rows per shape, the best of {rounds} rounds; rows parsed per CPU-second")
    out = measure(n, rounds)
    for shape, r in out.items():
        print(
            f"  {shape:10s}  line by line {r['lines_per_cpu_s']:>9,.0f}  "
            f"blocks {r['blocks_per_cpu_s']:>9,.0f}  ({r['ratio']:.2f}x; the same rows: {r['same']})  "
            "streamed, whole reader: "
            f"{r['streamed_per_cpu_s']:,.0f}"
        )
    return out


if __name__ == "__main__":
    main()
