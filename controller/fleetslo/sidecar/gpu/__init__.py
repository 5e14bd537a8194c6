"""GPU telemetry for the sidecar: vendor backends behind one ``GpuReader`` protocol, a background
sampler, a Prometheus collector, replica attribution and efficiency signals.

Entry point for the exporter: ``fleetslo.sidecar.gpu.telemetry.build_gpu_telemetry``. Vendor libraries
(amdsmi, pynvml) are imported lazily by their backends, never at package import.
"""
