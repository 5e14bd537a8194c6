"""The admission gate: an optional streaming proxy in the sidecar, in front of vLLM's OpenAI API.

vLLM reads ``--max-num-seqs`` once at start, and its latency histograms are coarse near typical
SLO thresholds. The gate, started by ``fleetslo exporter --gate-listen ...`` on the sidecar's
event loop, fixes both:

- ``admission``: at most ``limit`` generation requests in flight, a bounded FIFO queue behind
  them (503 + ``Retry-After`` when full or timed out); the limit changes live;
- ``proxy``: relays every byte unchanged and in order; 413 for oversized bodies, 502 when vLLM
  is unreachable; a client that hangs up cancels its upstream request;
- ``latency``/``stats``: exact per-request TTFT (arrival at the gate → first content event, so
  gate queueing counts) and TPOT (last − first) / (tokens − 1) of streamed requests, in
  histograms whose bucket edges include the SLO thresholds; non-streamed requests have no
  observable first token and are recorded in the e2e histogram only;
- ``collector``: the ``fleetslo_gate_*`` families on the sidecar's ``/metrics``; the sidecar's
  ``fleetslo_ttft_seconds``/``fleetslo_tpot_seconds`` and attainment take the gate's data where
  it has some for the window (``source="gate"``) and keep vLLM's otherwise (``source="vllm"``);
- ``admin``: limit, drain (``/readyz`` turns 503) and status on a separate, token-protected
  listener; ``fleetslo.control.actuators.gate`` drives it from the controller;
- ``server``: wires the above into one ``Gate``; ``testing``: a fake streaming vLLM.
"""
