"""Generated artifacts: alert and recording rules, routing and Grafana dashboards from the FleetSLO spec."""
