"""The report's stylesheet, inlined into the page (a Python string so packaging needs no data files)."""

CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d8dee4; --bg: #f6f8fa; --card: #ffffff; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); font-size: 14px; line-height: 1.45;
  font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 20px 40px; }
header h1 { font-size: 24px; margin: 0 0 8px; letter-spacing: -0.01em; }
h2 { font-size: 17px; margin: 0 0 12px; display: flex; align-items: center; gap: 8px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px 18px;
  margin: 16px 0; }
dl.sub, dl.facts { display: flex; flex-wrap: wrap; gap: 4px 20px; margin: 0; color: var(--muted); }
dl.sub dt, dl.facts dt { font-weight: 600; color: var(--ink); }
dl.sub dt::after, dl.facts dt::after { content: ":"; }
dl.sub dd, dl.facts dd { margin: 0 0 0 -14px; }
dl.facts { margin-bottom: 8px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
thead th { font-size: 12px; color: var(--muted); font-weight: 600; vertical-align: bottom;
  white-space: normal; }
tbody th { text-align: left; font-weight: 600; white-space: normal; min-width: 11em; max-width: 20em; }
table.summary th, table.summary td { padding: 6px 7px; }
table.summary td.best { font-weight: 700; }
table.events td, table.events th { text-align: left; }
table.events td:last-child { white-space: normal; color: var(--muted); }
td.up { color: #b35900; } td.down { color: #0b6e4f; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px; margin-right: 6px;
  vertical-align: -1px; }
.note { color: var(--muted); font-size: 12.5px; margin: 8px 0 0; }
ul.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 6px 20px; padding: 0; margin: 0 0 8px; }
ul.legend li { display: flex; align-items: center; gap: 6px; font-weight: 600; }
figure { margin: 14px 0 4px; }
figcaption { color: var(--muted); margin-bottom: 2px; }
figcaption b { color: var(--ink); margin-right: 6px; }
svg.chart { width: 100%; height: auto; display: block; }
svg .grid { stroke: #eaeef2; stroke-width: 1; }
svg .axis { stroke: #8c959f; stroke-width: 1; }
svg .tick { fill: var(--muted); font-size: 12px; }
svg .row-label { fill: var(--ink); font-weight: 600; }
.run-note { color: var(--muted); margin: 6px 0 0; }
svg .axis-label { fill: var(--muted); font-size: 12px; }
svg .target { stroke: #24292f; stroke-width: 1.5; stroke-dasharray: 6 4; }
svg .target-label { fill: #24292f; font-size: 12px; font-weight: 600; paint-order: stroke;
  stroke: #ffffff; stroke-width: 3px; }
svg .series path { stroke-linejoin: round; stroke-linecap: round; }
details summary { cursor: pointer; font-weight: 600; margin-top: 8px; }
footer { color: var(--muted); font-size: 12px; margin-top: 8px; }
.empty { color: var(--muted); }
@media print { body { background: #fff; } section { break-inside: avoid; } }
"""
