"""Grafana dashboards for fleetslo, built with grafanalib and committed as JSON (drift-tested).

``panels`` wraps grafanalib with the choices every panel shares (datasource reference, units,
layout), ``grafana11`` rewrites grafanalib's legacy JSON into what Grafana 11 loads unchanged,
``queries`` holds the PromQL, and ``fleet``/``gpu``/``controller`` define the three dashboards.
``build`` returns the file texts; it never writes files (``cli.py`` does).
"""
