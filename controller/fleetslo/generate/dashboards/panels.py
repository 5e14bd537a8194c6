"""Panel, variable and layout helpers over grafanalib, with fleetslo's shared choices.

Every query goes to the ``$datasource`` variable as a ``{type, uid}`` reference (Grafana 11 no
longer resolves datasource names), every panel has a unit and a description, and panels are
placed left to right on the 24-column grid by ``Layout`` so nobody edits ``gridPos`` by hand.
Builds grafanalib objects only; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grafanalib import core as g

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: Grafana's "All" for our regex-matched variables: also matches series without the label.
ALL = ".*"
GRID_WIDTH = 24


@dataclass(frozen=True)
class Q:
    """One query of a panel: PromQL, legend, and whether it is an instant (table/stat) query."""

    expr: str
    legend: str = ""
    instant: bool = False


def targets(queries: list[Q], table: bool = False) -> list[g.Target]:
    return [
        g.Target(
            expr=q.expr,
            legendFormat=q.legend,
            refId=chr(ord("A") + i),
            instant=q.instant,
            datasource=DATASOURCE,
            format=g.TABLE_TARGET_FORMAT if table else g.TIME_SERIES_TARGET_FORMAT,
        )
        for i, q in enumerate(queries)
    ]


def dashed(pattern: str) -> dict[str, Any]:
    """An override drawing series whose name matches ``pattern`` as a dashed line (targets, limits)."""
    return {
        "matcher": {"id": "byRegexp", "options": pattern},
        "properties": [
            {"id": "custom.lineStyle", "value": {"dash": [10, 10], "fill": "dash"}},
            {"id": "custom.lineWidth", "value": 2},
        ],
    }


def timeseries(title: str, description: str, queries: list[Q], unit: str, **kwargs: Any) -> g.TimeSeries:
    overrides = kwargs.pop("overrides", [])
    return g.TimeSeries(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=targets(queries),
        unit=unit,
        legendDisplayMode="table",
        legendPlacement="right",
        legendCalcs=["lastNotNull", "max"],
        tooltipMode="multi",
        tooltipSort="desc",
        overrides=[dashed(".*(target|limit|max|budget|objective).*"), *overrides],
        **kwargs,
    )


def stat(title: str, description: str, queries: list[Q], unit: str, steps: list[tuple[str, float | None]],
         **kwargs: Any) -> g.Stat:  # fmt: skip
    """A stat panel; ``steps`` are (colour, from-value) threshold steps, the first from None."""
    return g.Stat(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=targets(queries),
        format=unit,
        reduceCalc="lastNotNull",
        graphMode="area",
        noValue="no data",
        thresholds=[{"color": c, "value": v} for c, v in steps],
        **kwargs,
    )


def table(title: str, description: str, queries: list[Q], **kwargs: Any) -> g.Table:
    return g.Table(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=targets(queries, table=True),
        unit="none",
        filterable=True,
        transformations=[{"id": "merge", "options": {}}, {"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True, "__name__": True}}}],
        **kwargs,
    )  # fmt: skip


def datasource_variable() -> g.Template:
    return g.Template(name="datasource", label="Data source", type="datasource", query="prometheus", hide=0)


def query_variable(name: str, label: str, query: str, multi: bool = True) -> g.Template:
    """A label-values variable with "All" = ``.*`` (so series without the label still match)."""
    return g.Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        includeAll=True,
        multi=multi,
        allValue=ALL,
        default="$__all",
        refresh=2,
        sort=1,
    )


def custom_variable(name: str, label: str, options: list[str], default: str) -> g.Template:
    return g.Template(name=name, label=label, type="custom", query=",".join(options), default=default)


@dataclass
class Layout:
    """Places panels left to right in rows of 24 columns; ``row`` starts a titled row."""

    panels: list[Any] = field(default_factory=list)
    _x: int = 0
    _y: int = 0
    _height: int = 0

    def row(self, title: str) -> Layout:
        self._newline()
        self.panels.append(g.RowPanel(title=title, gridPos=g.GridPos(h=1, w=GRID_WIDTH, x=0, y=self._y)))
        self._y += 1
        return self

    def add(self, panel: Any, w: int = 12, h: int = 8) -> Layout:
        if self._x + w > GRID_WIDTH:
            self._newline()
        self.panels.append(_placed(panel, g.GridPos(h=h, w=w, x=self._x, y=self._y)))
        self._x += w
        self._height = max(self._height, h)
        return self

    def _newline(self) -> None:
        self._y += self._height
        self._x, self._height = 0, 0


def _placed(panel: Any, pos: g.GridPos) -> Any:
    import attr

    return attr.evolve(panel, gridPos=pos)


def annotation(name: str, expr: str, *, title: str, text: str, color: str) -> dict[str, Any]:
    """A Prometheus annotation query (e.g. the controller's decisions), drawn on every panel."""
    return {
        "datasource": DATASOURCE,
        "enable": True,
        "expr": expr,
        "iconColor": color,
        "name": name,
        "step": "1m",
        "titleFormat": title,
        "textFormat": text,
        "tagKeys": "target,reason",
        "useValueForTime": False,
    }


def dashboard(
    title: str,
    uid: str,
    description: str,
    variables: list[g.Template],
    layout: Layout,
    *,
    annotations: list[dict[str, Any]] | None = None,
) -> g.Dashboard:
    return g.Dashboard(
        title=title,
        uid=uid,
        description=description,
        tags=["fleetslo", "vllm"],
        timezone="browser",
        refresh="30s",
        time=g.Time("now-3h", "now"),
        graphTooltip=1,
        templating=g.Templating(list=variables),
        annotations=g.Annotations(list=annotations or []),
        panels=layout.panels,
    ).auto_panel_ids()
