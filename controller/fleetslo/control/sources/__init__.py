"""Sources: build an ``Observation`` of a target from Prometheus or straight from its sidecars."""
