"""Shared core: value types, conventions, errors, the FleetSLO spec and Prometheus-exact metrics math.

Everything above (policy, control, sidecar, sim, generate, cli) may import it; it imports none of them.
"""
