"""preStop hook of a vLLM pod: stop admitting at the gate, then wait until every request finished.

Both containers run it when the pod terminates (standard library only: it runs in the fleetslo
image and in the vLLM image):

- the sidecar, ``drain``: ``POST /admin/drain`` on the gate's admin API (bearer token from a file)
  until it answers 200 (nothing in flight or queued);
- the vLLM container, ``wait``: reads the sidecar's ``/metrics`` until the gate is draining with
  nothing in flight or queued, so vLLM gets SIGTERM only after its last request (it never sees
  the admin token).

Either gives up at its deadline (the kubelet kills at terminationGracePeriodSeconds anyway), or
when the gate stops answering (nothing can be in flight through a gate that is gone).
"""

import functools
import os
import re
import sys
import time
import urllib.error
import urllib.request

PERIOD = float(os.environ.get("FLEETSLO_DRAIN_PERIOD", "2"))  # seconds between checks
GIVE_UP_AFTER = 5  # consecutive failures to reach the gate


def drained_by_admin(url: str, token: str) -> bool:
    request = urllib.request.Request(url, method="POST", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status == 200


def drained_by_metrics(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as response:
        page = response.read().decode("utf-8", "replace")

    def value(name: str) -> float | None:
        # Summed over the series of the family: gate families carry model_name (one per model).
        found = re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", page, re.MULTILINE)
        return sum(float(v) for v in found) if found else None

    busy = (value("fleetslo_gate_inflight") or 0) + (value("fleetslo_gate_queue_length") or 0)
    return value("fleetslo_gate_draining") == 1 and busy == 0


def main(argv: list[str]) -> int:
    mode, url, timeout = argv[1], argv[2], float(argv[3])
    if mode == "drain":
        with open(argv[4], encoding="utf-8") as f:
            check = functools.partial(drained_by_admin, url, f.read().strip())
    else:
        check = functools.partial(drained_by_metrics, url)
    deadline, failures = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        try:
            if check():
                print(f"fleetslo preStop ({mode}): drained", flush=True)
                return 0
            failures = 0
        except (OSError, urllib.error.URLError) as exc:
            failures += 1
            if failures >= GIVE_UP_AFTER:
                print(f"fleetslo preStop ({mode}): gate unreachable ({exc}); not waiting", flush=True)
                return 0
        time.sleep(PERIOD)
    print(f"fleetslo preStop ({mode}): still busy after {timeout:g}s; stopping anyway", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
