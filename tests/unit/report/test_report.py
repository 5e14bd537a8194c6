"""The HTML report on hand-built results: structure, escaping, nulls as gaps, no network, and one real
headless-Chromium screenshot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fleetslo.sim.report import render_report
from fleetslo.sim.report.numbers import percent, seconds
from fleetslo.sim.report.svg import Chart, Line, render_chart
from fleetslo.sim.result_types import ScaleEventRecord, SimResult, SLOTarget, WindowResult

CHROMIUM = "/usr/bin/chromium"


def window(k: int, **overrides: Any) -> WindowResult:
    w: dict[str, Any] = {
        "start_s": 60.0 * k,
        "requests": 300,
        "arrival_rate": 5.0 + (k % 7),
        "p90_ttft_s": 0.4 + 0.3 * (k % 5),
        "p90_tpot_s": 0.02 + 0.004 * (k % 4),
        "met": k % 9 != 4,
        "ready_replicas": 2 + k // 10,
        "starting_replicas": 1 if k % 10 == 8 else 0,
        "batch_limit": 128,
        "queue_length": float(k % 6),
    }
    w.update(overrides)
    return WindowResult(**w)


def event(
    t_s: float, replicas_from: int, replicas_to: int, reason: str, message: str = ""
) -> ScaleEventRecord:
    return ScaleEventRecord(t_s, replicas_from, replicas_to, 128, reason, message)


def result(policy: str, minutes: int = 30, **overrides: Any) -> SimResult:
    r: dict[str, Any] = {
        "policy": policy,
        "trace": "traces/azure2023/AzureLLMInferenceTrace_conv.csv",
        "profile": "mi325x-qwen3-235b-fp8-tp4",
        "slo": SLOTarget(ttft_s=2.0, tpot_s=0.05, quantile=0.9),
        "requests": 9000,
        "completed": 8990,
        "rejected": 4,
        "in_flight_at_end": 6,
        "window_attainment": 0.9,
        "request_attainment": 0.95,
        "p90_ttft_s": 1.1,
        "p90_tpot_s": 0.031,
        "replica_hours": 1.5,
        "gpu_hours": 6.0,
        "cost_usd": 3.0,
        "tokens": 7_000_000,
        "cost_per_million_tokens": 0.42,
        "mean_replicas": 3.0,
        "scale_events": 2,
        "preemptions": 0,
        "sim_seconds": 60.0 * minutes,
        "wall_seconds": 0.8,
        "windows": tuple(window(k) for k in range(minutes)),
        "events": (
            event(600.0, 2, 3, "MetricAboveTarget", "hpa-util: 0.95 per pod vs target 0.8: 3 replicas"),
            event(1500.0, 3, 2, "MetricBelowTarget", "scale down"),
        ),
    }
    r.update(overrides)
    return SimResult(**r)


def with_windows(r: SimResult, changes: dict[int, dict[str, Any]]) -> SimResult:
    """``r`` with windows ``k`` changed as ``changes[k]`` says."""
    windows = tuple(replace(w, **changes.get(k, {})) for k, w in enumerate(r.windows))
    return replace(r, windows=windows)


def test_one_self_contained_page() -> None:
    html = render_report([result("static"), result("hpa-util")], "Compare")
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<style>") == 1
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched
    assert "@import" not in html and "url(" not in html
    assert html.count('<svg class="chart') == 7 + 2  # 7 comparison charts, one per run
    for heading in ("Arrival rate", "Replicas", "p90 TTFT", "p90 TPOT", "Queue length", "Batch limit"):
        assert f"<b>{heading}</b>" in html
    assert "target 2 s" in html and "target 50 ms" in html
    assert "time since trace start (h:mm)" in html and "requests / s" in html


def test_summary_table_has_every_metric_and_marks_the_best() -> None:
    cheap = result("static", window_attainment=0.5, cost_per_million_tokens=0.1)
    good = result("llmd-slo", window_attainment=0.99, cost_per_million_tokens=0.9)
    html = render_report([cheap, good], "t")
    summary = html[html.index('<table class="summary">') : html.index("</table>")]
    for heading in (
        "Windows meeting SLO",
        "Requests meeting SLO",
        "Replica-hours",
        "GPU-hours",
        "Cost / M tokens",
        "Replica changes",
    ):
        assert heading in summary
    assert '<td class="best">99.0 %</td>' in summary
    assert '<td class="best">$0.10</td>' in summary
    assert "<td>50.0 %</td>" in summary


def test_names_and_messages_are_escaped() -> None:
    evil = '<script>alert("x")</script>'
    r = result(
        evil, trace='a"b<c>.csv', events=(event(600.0, 2, 3, "<b>bold</b>", "<img src=x onerror=alert(1)>"),)
    )
    html = render_report([r], "<i>title</i> & co")
    assert "<script" not in html and "<img" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "&lt;i&gt;title&lt;/i&gt; &amp; co" in html
    assert "a&quot;b&lt;c&gt;.csv" in html


def test_nulls_render_as_gaps_and_dashes_never_zeros() -> None:
    r = result("keda-waiting", p90_ttft_s=None, cost_per_million_tokens=None, window_attainment=None)
    quiet = {"p90_ttft_s": None, "p90_tpot_s": None, "met": None, "requests": 0, "arrival_rate": 0.0}
    unsampled = {"ready_replicas": None, "starting_replicas": None, "queue_length": None, "batch_limit": None}
    r = with_windows(r, {3: quiet, 4: quiet, 5: quiet, 10: unsampled})
    html = render_report([r], "gaps")
    summary = html[html.index('<table class="summary">') : html.index("</table>")]
    assert summary.count("<td>—</td>") == 3
    ttft = _figure(html, "p90 TTFT")
    assert ttft.count('d="M') == 1 and ttft.count("M") >= 2  # one path, several sub-paths: a gap
    assert "no traffic" in _figure(html, "SLO met per window")


def test_unserved_windows_get_an_overflow_marker() -> None:
    r = with_windows(result("static"), {7: {"p90_ttft_s": None, "met": False}})
    assert 'class="overflow"' in _figure(render_report([r], "t"), "p90 TTFT")


def test_identical_series_are_drawn_once() -> None:
    html = render_report([result("static"), result("hpa-util")], "t")
    assert "The same in every run (grey)." in _figure(html, "Arrival rate")
    different = with_windows(result("hpa-util"), {0: {"arrival_rate": 99.0}})
    assert "The same in every run" not in _figure(
        render_report([result("static"), different], "t"), "Arrival rate"
    )


def test_duplicate_policies_get_distinct_labels() -> None:
    a, b = result("static", trace="x/a.csv"), result("static", trace="y/b.csv")
    html = render_report([a, b, b], "t")
    assert "static · a.csv" in html and "static · b.csv #2" in html and "static · b.csv #3" in html


def test_degenerate_inputs_do_not_crash() -> None:
    assert "No runs to show." in render_report([], "empty")
    unmeasured = dict.fromkeys(("p90_ttft_s", "p90_tpot_s", "met", "queue_length"))
    blank = window(0, requests=0, ready_replicas=None, starting_replicas=None, batch_limit=None, **unmeasured)
    bare = result("p", minutes=1, windows=(blank,), window_attainment=None, request_attainment=None)
    html = render_report([bare], "bare")
    assert "<svg" in html and "—" in html
    nothing = result("q", minutes=0, windows=(), events=(), scale_events=0)
    assert "No decision moved a knob." in render_report([nothing], "nothing")


def test_line_gaps_and_lone_points() -> None:
    svg = render_chart(
        Chart("c", "y", [Line("s", [(0, 1.0), (1, None), (2, 3.0), (3, 4.0)], "#000")], x_max=4)
    )
    path = re.search(r'<path d="([^"]*)"', svg)
    assert path is not None and path.group(1).count("M") == 2
    assert svg.count("<circle") == 1  # the lone first point stays visible


def test_log_scale_skips_non_positive_values() -> None:
    svg = render_chart(
        Chart(
            "c", "y", [Line("s", [(0, 0.0), (1, 0.5), (2, 5.0)], "#000")], x_max=3, log=True, y_format=seconds
        )
    )
    assert "100 ms" in svg and "10 s" in svg


def test_number_formats() -> None:
    assert seconds(0.05) == "50 ms" and seconds(2) == "2 s" and seconds(1234.5) == "1,234 s"
    assert seconds(None) == "—" and seconds(float("nan")) == "—" and seconds(True) == "—"
    assert percent(0.9732) == "97.3 %"


def _figure(html: str, title: str) -> str:
    start = html.index(f"<b>{title}</b>")
    return html[start : html.index("</figure>", start)]


def test_screenshot_in_headless_chromium(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"{CHROMIUM} not found: install it with `apt-get install -y --no-install-recommends chromium`"
            )
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y --no-install-recommends chromium)")
    runs = [
        result("static"),
        result("hpa-util", windows=tuple(window(k, ready_replicas=3) for k in range(30))),
    ]
    page = tmp_path / "report.html"
    page.write_text(render_report(runs, "Screenshot check"), encoding="utf-8")
    png = tmp_path / "report.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    command = [
        CHROMIUM,
        *flags,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,1600",
        f"--screenshot={png}",
        page.as_uri(),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=90)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 1200  # PNG width from the IHDR chunk
    assert len(data) > 50_000  # a page of charts, not a blank frame
    keep = os.environ.get("FLEETSLO_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(png, keep)


def _batch_chart(html: str) -> str:
    start = html.index("<b>Batch limit</b>")
    return html[start : html.index("</svg>", start)]


def test_the_batch_limit_axis_is_scaled_to_the_real_limits_not_to_no_limit() -> None:
    limits = (1024, 8, 6, 15) * 10
    r = with_windows(
        result("fleetslo", max_num_seqs=1024), {k: {"batch_limit": limits[k]} for k in range(30)}
    )
    chart = _batch_chart(render_report([r], "t"))
    ticks = [float(t) for t in re.findall(r'text-anchor="end">([0-9.]+)</text>', chart)]
    assert ticks and 15 <= max(ticks) <= 100, ticks  # the axis ends above 15, not at 1024
    assert "max_num_seqs, 1024)" in render_report([r], "t")


def test_the_summary_and_the_details_count_the_same_replica_changes() -> None:
    events = (
        ScaleEventRecord(0, 2, 3, 8, "Up", ""),
        ScaleEventRecord(15, 3, 3, 6, "Limit", ""),
        ScaleEventRecord(30, 3, 2, 6, "Down", ""),
    )
    r = result("fleetslo", events=events, scale_events=2)
    html = render_report([r], "t")
    assert "Decisions that moved a knob: 3 (2 replica changes, 1 batch-limit changes only)" in html
    summary = html[html.index('<table class="summary">') : html.index("</table>")]
    assert "Replica changes" in summary and "<td>2</td>" in summary


def test_strip_labels_sit_inside_the_chart_however_long() -> None:
    long = result("keda-waiting (threshold 2) · best of 7 baselines · simulated")
    html = render_report([long], "t")
    strip = html[html.index('class="chart strip"') :]
    strip = strip[: strip.index("</svg>")]
    xs = [float(x) for x in re.findall(r'class="tick row-label" x="([0-9.]+)"', strip)]
    assert xs and all(x >= 0 for x in xs) and 'text-anchor="end">keda' not in strip
