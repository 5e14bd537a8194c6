"""The sidecar (`fleetslo exporter`): vLLM exporter, admission gate and GPU telemetry beside each replica."""
