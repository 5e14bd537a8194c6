"""Days of a trace file from the command line: ``fleetslo simulate`` reading it whole against ``--stream``.

A trace file of ``BENCH_STREAM_DAYS`` days (default 1) is written first: the Azure 2023 conversation
trace's (prompt, output) pairs drawn at random, Poisson arrivals on a daily curve (±60 % around
``BENCH_STREAM_RATE`` requests/s, default 20), as an Azure CSV. Then the same command,
``fleetslo simulate --trace FILE --policy fleetslo --sample 4 --json``, runs twice, each in its own
process, with ``--stream`` and without. Each run's peak resident memory (the child's own
``ru_maxrss``, written at its exit) and wall time are reported side by side, with the ratio, and
whether both judged the fleet the same (window and request attainment, replica-hours, requests,
scale events, to the last digit: the reader and the loop are the same, only memory differs).
Target: the streamed run's peak memory does not grow with the trace (tens of MB for any length);
the whole-file run's grows about 550 bytes a request.

``python -m benchmarks stream``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fleetslo.sim.traces import load_trace

from benchmarks.workloads import CONV, TRACES

SAME = ("window_attainment", "request_attainment", "replica_hours", "requests", "scale_events")


def write_days(path: Path, days: float, mean_rate: float, seed: int = 7) -> int:
    """An Azure-format CSV of ``days`` days on a daily curve; the number of requests written."""
    lengths = [(r.input_tokens, r.output_tokens) for r in load_trace(TRACES / CONV).requests]
    rng = random.Random(seed)
    start = dt.datetime(2024, 5, 13, tzinfo=dt.UTC)
    t, n, end = 0.0, 0, days * 86_400
    with path.open("w", encoding="utf-8") as out:
        out.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        while True:
            hour = t / 3600 % 24
            t += rng.expovariate(mean_rate * (1 + 0.6 * math.sin((hour - 9) / 24 * 2 * math.pi)))
            if t >= end:
                return n
            prompt, output = lengths[rng.randrange(len(lengths))]
            stamp = (start + dt.timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f")
            out.write(f"{stamp}0,{prompt},{output}\n")
            n += 1


#: Runs the CLI in this child and writes the child's own peak RSS (KB) to the file named first.
_MEASURED = (
    "import resource, sys\n"
    "from fleetslo.cli import main\n"
    "code = main(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def run(trace: Path, *flags: str) -> dict[str, Any]:
    """One ``fleetslo simulate`` in its own process: its JSON, wall seconds and peak RSS (MB)."""
    args = ["simulate", "--trace", str(trace), "--policy", "fleetslo", "--sample", "4"]
    args += ["--max-replicas", "200", "--json", *flags]
    with tempfile.NamedTemporaryFile(suffix=".rss") as peak:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED, peak.name, *args], capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"fleetslo {' '.join(args)} failed: {done.stderr[-2000:]}")
        peak_mb = int(Path(peak.name).read_text(encoding="utf-8")) / 1024
    return {"result": json.loads(done.stdout), "wall_s": wall, "peak_mb": peak_mb}


def main() -> dict[str, Any]:
    days = float(os.environ.get("BENCH_STREAM_DAYS", "1"))
    rate = float(os.environ.get("BENCH_STREAM_RATE", "20"))
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "days.csv"
        n = write_days(trace, days, rate)
        size = trace.stat().st_size / 1e6
        print(f"{days:g} days at {rate:g} requests/s on a daily curve: {n:,} requests, {size:.0f} MB of CSV")
        streamed, whole = run(trace, "--stream"), run(trace)
    same = all(streamed["result"][k] == whole["result"][k] for k in SAME)
    for label, r in (("whole file", whole), ("--stream", streamed)):
        res = r["result"]
        print(
            f"  {label:10s}  peak {r['peak_mb']:8.0f} MB  wall {r['wall_s']:6.1f} s  "
            f"windows met {res['window_attainment']:.4f}  replica-h {res['replica_hours']:.2f}"
        )
    ratio = whole["peak_mb"] / streamed["peak_mb"]
    print(f"  peak memory whole / streamed: {ratio:.1f}x; the same judgement: {same}")
    return {"requests": n, "whole": whole, "streamed": streamed, "memory_ratio": ratio, "same": same}


if __name__ == "__main__":
    main()
