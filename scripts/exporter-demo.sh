#!/usr/bin/env bash
# `make sidecar-demo` (the main job is `make demo`): a replayed real vLLM capture, the fleetslo sidecar
# scraping it, and the sidecar's windowed p50/p90/p99 TTFT/ITL/TPOT and SLO attainment printed
# as they evolve. Runs for DEMO_SECONDS (default 30), then stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
SECONDS_TO_RUN=${DEMO_SECONDS:-30}
VLLM_PORT=${DEMO_VLLM_PORT:-18000}
SIDECAR_PORT=${DEMO_SIDECAR_PORT:-19400}
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

$BIN/fleetslo --log-level warning fake-vllm --capture tests/fixtures/vllm/vllm-0.32.0-cpu_v1_after_load.txt \
  --listen "127.0.0.1:$VLLM_PORT" --rps 12 &
pids+=($!)
$BIN/fleetslo --log-level warning exporter --vllm-url "http://127.0.0.1:$VLLM_PORT" \
  --listen "127.0.0.1:$SIDECAR_PORT" --interval 1s --windows 10s,30s --slo-ttft 2.5s --slo-tpot 50ms &
pids+=($!)

echo "fake vLLM on :$VLLM_PORT, fleetslo sidecar on http://127.0.0.1:$SIDECAR_PORT/metrics (for ${SECONDS_TO_RUN}s)"
end=$((SECONDS + SECONDS_TO_RUN))
while [ $SECONDS -lt $end ]; do
  sleep 5
  echo "---- t=${SECONDS}s"
  $BIN/python - "$SIDECAR_PORT" <<'PY' || echo "(sidecar not answering yet)"
import sys, httpx
page = httpx.get(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).text
keep = ("fleetslo_engine_up", "fleetslo_ttft_seconds", "fleetslo_tpot_seconds", "fleetslo_slo_attainment_ratio",
        "fleetslo_requests_per_second")
lines = [l for l in page.splitlines() if l.startswith(keep) and 'quantile="0.5"' not in l]
print("\n".join(lines) if lines else "(no windowed signal yet: windows fill after 10s)")
PY
done
