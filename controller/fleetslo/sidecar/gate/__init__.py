"""The admission gate: an optional streaming proxy in the sidecar, in front of vLLM's OpenAI API.

vLLM reads ``--max-num-seqs`` once at start, and its latency histograms are coarse near typical
SLO thresholds. The gate, started by ``fleetslo exporter --gate-listen ...`` on the sidecar's
event loop, fixes both:

- ``admission``: at most ``limit`` requests that run the model in flight, a bounded FIFO queue
  behind them (503 + ``Retry-After`` when full or timed out); the limit changes live;
- ``paths``: which requests are admitted (every write but tokenizer, health and operator
  endpoints) and which served model a request counts under (``model_name`` on every family);
- ``proxy``: relays every byte unchanged and in order; 413 for oversized bodies, 408 for slow
  ones, 502 when vLLM is unreachable; a client that hangs up cancels its upstream request;
- ``guard``: bounds on the bodies held before admission, and a throttle on client-caused logs;
- ``latency``/``stats``: exact per-request TTFT (request whole at the gate → first token event,
  so gate queueing counts) and TPOT (last − first) / (tokens − 1) of streamed requests, per
  model, in histograms whose bucket edges include the SLO thresholds; non-streamed requests have
  no observable first token and are recorded in the e2e histogram only;
- ``collector``: the ``fleetslo_gate_*`` families on the sidecar's ``/metrics``; the sidecar's
  ``fleetslo_ttft_seconds``/``fleetslo_tpot_seconds`` and attainment take the gate's data where
  it has some for the window (``source="gate"``) and keep vLLM's otherwise (``source="vllm"``);
- ``admin``/``token``: limit, drain (``/readyz`` turns 503) and status on a separate listener,
  behind a bearer token of 16+ characters re-read when its file rotates;
  ``fleetslo.control.actuators.gate`` drives it from the controller;
- ``server``: wires the above into one ``Gate``; ``testing``: a fake streaming vLLM.
"""
