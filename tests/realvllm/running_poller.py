"""Samples vLLM's ``vllm:num_requests_running`` every ``interval`` seconds, one value a line on stdout,
until killed: the load test's check that the gate's limit holds.

Its own process, not a task in the test's event loop: parsing a /metrics page every 50 ms in the
loop that also reads the clients' streams delayed their first chunks, and the client TTFT the gate is
compared with grew by that delay (the gate looked up to 49 % early on a loaded host).
"""

from __future__ import annotations

import re
import sys
import time

import httpx

RUNNING = re.compile(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.MULTILINE)


def main(url: str, interval: float) -> None:
    with httpx.Client(timeout=5) as http:
        while True:
            try:
                values = [float(v) for v in RUNNING.findall(http.get(f"{url}/metrics").text)]
            except httpx.HTTPError:
                values = []  # a missed sample is not a value: nothing is written for it
            if values:
                print(sum(values), flush=True)  # one series per model; one model here
            time.sleep(interval)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.05)
