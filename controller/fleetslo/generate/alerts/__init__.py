"""SLO spec → Prometheus recording and alert rules, health alerts and Alertmanager routing.

Spec → validate → generate → render (Sloth's shape): ``windows`` holds the burn-rate tiers as
data and the math that adapts them to an objective, ``spec`` validates a FleetSLO into what the
rules need, ``slo_rules``/``health_rules``/``routing`` generate plain data, ``render`` writes YAML
and ``build`` writes (or checks) files. Nothing here talks to Prometheus.
"""
