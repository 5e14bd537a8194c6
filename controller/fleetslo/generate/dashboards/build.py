"""Every dashboard as sorted-key JSON text, keyed by file name (``fleetslo dashboards build``).

Returns texts only; ``cli.py`` writes them or compares them with the committed files.
"""

from __future__ import annotations

import json
from typing import Any

from grafanalib._gen import DashboardEncoder

from fleetslo.generate.dashboards import controller_dashboard, fleet, gpu
from fleetslo.generate.dashboards.grafana11 import normalize

BUILDERS = (fleet.build, gpu.build, controller_dashboard.build)


def dashboards() -> dict[str, dict[str, Any]]:
    """Each dashboard as Grafana JSON (a dict), keyed by uid."""
    out = {}
    for build in BUILDERS:
        raw = json.loads(json.dumps(build().to_json_data(), cls=DashboardEncoder))
        out[raw["uid"]] = normalize(raw)
    return out


def generate() -> dict[str, str]:
    return {f"{uid}.json": json.dumps(d, indent=2, sort_keys=True) + "\n" for uid, d in dashboards().items()}
