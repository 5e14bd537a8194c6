"""``fleetslo sim-server``: one simulated vLLM replica behind a real HTTP server.

The engine model of ``fleetslo.sim`` runs in real time (optionally compressed): OpenAI-compatible
completions stream at the model's pace, and ``/metrics`` is a vLLM page, so the sidecar, the gate,
the controller and Prometheus cannot tell it from vLLM.
"""
