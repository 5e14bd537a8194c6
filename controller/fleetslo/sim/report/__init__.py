"""The simulation report: ``render_report(results, title)`` → one self-contained HTML page.

Inline CSS and SVG only (no JavaScript, no network). ``page`` lays out the results, ``svg`` draws the
charts, ``style`` holds the stylesheet. Nothing here simulates or writes files.
"""

from fleetslo.sim.report.page import render_report

__all__ = ["render_report"]
