"""fleetslo inside and beside a real vLLM engine (``pip install fleetslo[vllm]``).

* ``plugin`` — a vLLM stat-logger plugin (entry point ``vllm.stat_logger_plugins``): from inside the
  engine it publishes on vLLM's own ``/metrics`` what no page has — per-step batch composition and
  step time (``fleetslo_engine_step_*``: prefill requests and tokens, decoding sequences, KV tokens,
  seconds; the capacity model's raw material) and each request's exact engine-side latencies
  (``fleetslo_engine_request_*``, and every record as JSON lines with ``FLEETSLO_ENGINE_RECORDS``);
* ``book`` — the plugin's bookkeeping and exposition, free of vLLM;
* ``client`` and ``bench`` — a measuring client and the bounded benchmark of ``fleetslo profile``;
* ``tinymodel`` — a random-weight two-layer Llama built locally, for a real engine in tests.

What the plugin cannot see: anything outside the engine client. vLLM's request clock starts when
the API server hands the request over, after HTTP parsing, the chat template and tokenizing, and its
last token is stamped before detokenizing and streaming; the client's TTFT is longer by that front
end (``fleetslo profile`` measures it). It sees one engine per logger: with data parallelism each
engine has its own ``engine`` label.
"""
