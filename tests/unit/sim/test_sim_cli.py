"""``fleetslo simulate`` end to end on a small trace file: JSON, table, report, profile files, errors."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fleetslo.cli import EXIT_OK, EXIT_USAGE, main
from fleetslo.core import logs
from fleetslo.sim.profile import builtin_profile

PROFILE = "mi300x-llama3.1-8b-fp8-tp1"


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    rng = random.Random(5)
    t, lines = 0.0, ["arrival_s,input_tokens,output_tokens"]
    while t < 600:
        t += rng.expovariate(8.0)
        lines.append(f"{t:.4f},{rng.randint(100, 2000)},{rng.randint(10, 300)}")
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_json_is_one_object_with_the_contract(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--json", "--seed", "3"])
    out = capsys.readouterr()
    assert code == EXIT_OK
    result = json.loads(out.out)
    assert result["policy"] == "static" and result["profile"] == PROFILE and result["trace"] == "trace.csv"
    assert result["slo"] == {"ttft_s": 2.0, "tpot_s": 0.05, "quantile": 0.9}
    assert result["completed"] + result["rejected"] + result["in_flight_at_end"] == result["requests"]
    assert result["initial_replicas"] >= 1 and result["cold_start_s"] == 60.0
    assert "simulating" not in out.err  # no progress bar with --json


def test_compare_prints_one_table_and_writes_one_report(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.html"
    args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--compare", "static,oracle"]
    code = main([*args, "--report", str(report), "--cold-start", "30s", "--duration", "5m"])
    assert code == EXIT_OK
    table = capsys.readouterr().out
    assert "static" in table and "oracle" in table and "windows met" in table
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") or "<html" in html[:200]


def test_compare_json_holds_every_result(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--compare", "static,hpa-util"]
    assert main([*args, "--json", "--initial-replicas", "2", "--rate-scale", "0.5"]) == EXIT_OK
    payload = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in payload["results"]] == ["static", "hpa-util"]
    assert {r["initial_replicas"] for r in payload["results"]} == {2}


def test_profile_from_a_yaml_file(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = builtin_profile(PROFILE).model_dump()
    data["name"] = "my-gpu"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["simulate", "--trace", str(trace_file), "--profile", str(path), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["profile"] == "my-gpu"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--policy", "nope"], "unknown nope"),
        (["--slo-ttft", "fast"], "--slo-ttft"),
        (["--profile", "no-such-profile"], "unknown profile"),
        (["--max-replicas", "0"], "replicas.max"),
        (["--policy", "fleetslo", "--policy-option", "headroom"], "expected KEY=VALUE"),
        (["--policy", "fleetslo", "--policy-option", "headrom=0.2"], "unknown option(s) headrom"),
        (["--policy", "fleetslo", "--policy-option", "headroom=1.5"], "headroom must be in [0, 1)"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    trace_file: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["simulate", "--trace", str(trace_file), *flags]) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_policy_options_reach_the_policy(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def hours(*options: str) -> float:
        args = [
            "simulate",
            "--trace",
            str(trace_file),
            "--profile",
            PROFILE,
            "--policy",
            "fleetslo",
            "--json",
        ]
        assert main([*args, "--rate-scale", "3", *options]) == EXIT_OK
        return float(json.loads(capsys.readouterr().out)["replica_hours"])

    lean = hours("--policy-option", "headroom=0", "--policy-option", "hysteresis=0")
    ample = hours("--policy-option", "headroom=0.9", "--policy-option", "hysteresis=0")
    assert ample > lean


def test_policy_option_values_are_numbers_or_text() -> None:
    from fleetslo.sim.compare import parse_policy_options

    assert parse_policy_options(["model_points=60", "headroom=0.2", "x=true", "y=abc"]) == (
        ("model_points", 60), ("headroom", 0.2), ("x", True), ("y", "abc"),
    )  # fmt: skip


def test_sample_simulates_one_replica_in_m_and_scales_the_fleet_back(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(*flags: str) -> dict[str, object]:
        args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--json", "--rate-scale", "4"]
        assert main([*args, "--replicas", "6", "--initial-replicas", "6", *flags]) == EXIT_OK
        result: dict[str, object] = json.loads(capsys.readouterr().out)
        return result

    whole, part = run(), run("--sample", "3")
    assert "sample" not in whole and part["sample"] == 3
    assert part["initial_replicas"] == 6  # two simulated, reported as the six they stand for
    # static: 3 x 2 replicas for the same time (the run ends when its last request does)
    assert part["replica_hours"] == pytest.approx(whole["replica_hours"], rel=1e-3)
    assert part["requests"] == pytest.approx(whole["requests"], abs=3)  # every third request, times three
    windows = part["windows"]
    assert isinstance(windows, list) and {w["ready_replicas"] for w in windows} == {6}
    assert part["request_attainment"] == pytest.approx(whole["request_attainment"], abs=0.03)


def test_sample_must_be_a_whole_number_of_at_least_one(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--trace", str(trace_file), "--sample", "0"]) == EXIT_USAGE
    assert "--sample" in capsys.readouterr().err


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """``main`` configures the root logger; later tests must not inherit a debug level."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name in logs.CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.mark.parametrize(("level", "shown"), [("info", False), ("debug", True)])
@pytest.mark.usefixtures("restore_logging")
def test_the_simulated_controllers_audit_lines_show_only_when_debugging(
    trace_file: Path, capsys: pytest.CaptureFixture[str], level: str, shown: bool
) -> None:
    # One line per simulated decision: at info, ``fleetslo simulate`` would print thousands of them.
    args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--policy", "hpa-util"]
    assert main([*args, "--json", "--duration", "2m", "--log-level", level]) == EXIT_OK
    err = capsys.readouterr().err.splitlines()
    audit = [line for line in err if '"logger": "fleetslo.sim.audit"' in line]
    assert bool(audit) is shown
    assert all(json.loads(line)["event"] == "decision" for line in audit)


def test_stream_judges_what_the_whole_trace_run_judges(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--stream`` reads the file as a stream and judges each minute as it ends; on a trace both
    can hold, every figure both report is the same."""

    def run(*flags: str) -> list[dict[str, object]]:
        args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--compare", "static,fleetslo"]
        assert main([*args, "--json", "--time-scale", "0.5", "--seed", "2", *flags]) == EXIT_OK
        results: list[dict[str, object]] = json.loads(capsys.readouterr().out)["results"]
        return results

    keys = ("policy", "requests", "completed", "rejected", "window_attainment", "request_attainment",
            "replica_hours", "gpu_hours", "cost_usd", "scale_events", "initial_replicas")  # fmt: skip
    whole, streamed = run(), run("--stream")
    assert [{k: r[k] for k in keys} for r in streamed] == [{k: r[k] for k in keys} for r in whole]
    assert all(r["stream"] is True and "windows" not in r for r in streamed)
    (day,) = streamed[1]["days"]  # type: ignore[misc]
    assert day["day"] == 0 and day["window_attainment"] == whole[1]["window_attainment"]
    worst = max(w["p90_ttft_s"] for w in whole[1]["windows"] if w["p90_ttft_s"] is not None)  # type: ignore[attr-defined]
    assert streamed[1]["worst_window_p90_ttft_s"] == worst


def test_stream_prints_the_summary_and_a_table_per_day(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--policy", "hpa-util"]
    assert main([*args, "--stream", "--sample", "2", "--rate-scale", "2"]) == EXIT_OK
    out = capsys.readouterr()
    assert "streamed" in out.out and "worst minute p90 TTFT" in out.out and "per day" in out.out
    assert "hpa-util:" in out.err  # one line per policy as it finishes


def test_stream_says_as_each_day_begins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "two-days.csv"
    rows = [f"{k * 1800.0 + 5},100,20" for k in range(96)]  # one request every half hour, two days
    path.write_text("arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert main(["simulate", "--trace", str(path), "--profile", PROFILE, "--stream"]) == EXIT_OK
    err = capsys.readouterr().err
    assert "static: day 1 begins (48 requests so far" in err and "day 2" not in err
    assert main(["simulate", "--trace", str(path), "--profile", PROFILE, "--stream", "--json"]) == EXIT_OK
    assert "begins" not in capsys.readouterr().err  # --json: nothing on stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--report", "r.html"], "--report: not with --stream"),
        (["--start", "2h"], "no requests left after --start/--duration"),
    ],
)
def test_stream_refuses_what_it_cannot_do_with_exit_2(
    trace_file: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["simulate", "--trace", str(trace_file), "--stream", *flags]) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_stream_names_an_out_of_order_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "shuffled.csv"
    rows = "arrival_s,input_tokens,output_tokens\n0,5,5\n100,5,5\n500,5,5\n10,5,5\n"
    path.write_text(rows, encoding="utf-8")
    assert main(["simulate", "--trace", str(path), "--stream"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "shuffled.csv:5:" in err and "--reorder-s" in err
    assert main(["simulate", "--trace", str(path), "--json"]) == EXIT_OK  # read whole, it is sorted


def test_a_wider_reorder_window_streams_a_log_written_as_requests_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Answers lasting minutes, logged as they finish: a row comes up to 150 s after one stamped
    later. The default 60 s window refuses it; --reorder-s 200 streams it as the sorted file reads."""
    rows = [f"{t},100,50\n" for t in range(0, 600, 2)]
    late = rows[40:60]  # 80-118 s, written after the rows up to 238 s
    header = "arrival_s,input_tokens,output_tokens\n"
    path, sorted_path = tmp_path / "by-finish.csv", tmp_path / "sorted.csv"
    path.write_text(header + "".join(rows[:40] + rows[60:120] + late + rows[120:]))
    sorted_path.write_text(header + "".join(rows))
    base = ["simulate", "--profile", PROFILE, "--stream", "--json", "--policy", "static", "--replicas", "2"]
    assert main([*base, "--trace", str(path)]) == EXIT_USAGE
    assert "by-finish.csv:" in capsys.readouterr().err
    assert main([*base, "--trace", str(path), "--reorder-s", "200"]) == EXIT_OK
    wide = json.loads(capsys.readouterr().out)
    assert main([*base, "--trace", str(sorted_path)]) == EXIT_OK
    ordered = json.loads(capsys.readouterr().out)
    same = {k for k in wide if k not in ("trace", "wall_seconds")}
    assert {k: wide[k] for k in same} == {k: ordered[k] for k in same}
    assert wide["requests"] == 300


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--reorder-s", "30"], "--reorder-s: only with --stream"),
        (["--stream", "--reorder-s", "-1"], "--reorder-s: a finite number of seconds >= 0"),
        (["--stream", "--reorder-s", "nan"], "--reorder-s: a finite number of seconds >= 0"),
    ],
)
def test_a_bad_reorder_window_is_a_usage_error(
    trace_file: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["simulate", "--trace", str(trace_file), *flags]) == EXIT_USAGE
    assert message in capsys.readouterr().err


@pytest.mark.usefixtures("restore_logging")
def test_a_large_trace_read_whole_suggests_streaming(
    trace_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetslo.cli import simulation

    args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--json", "--duration", "1m"]
    assert main(args) == EXIT_OK
    assert "--stream" not in capsys.readouterr().err
    monkeypatch.setattr(simulation, "_STREAM_HINT_BYTES", 1000)
    assert main(args) == EXIT_OK
    assert "--stream replays it in bounded memory" in capsys.readouterr().err


def test_stream_plans_the_oracle_in_one_pass(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Per-minute need at a calibrated capacity, a cold start ahead, from one pass over the stream; on
    this trace the whole-trace oracle needs no repair round, so both plan the same fleet."""
    args = ["simulate", "--trace", str(trace_file), "--profile", PROFILE, "--compare", "oracle,static"]
    args += ["--json", "--rate-scale", "3", "--cold-start", "30s"]

    def run(*flags: str) -> list[dict[str, float]]:
        assert main([*args, *flags]) == EXIT_OK
        results: list[dict[str, float]] = json.loads(capsys.readouterr().out)["results"]
        return results

    (oracle, static), (whole, _) = run("--stream"), run()
    assert oracle["scale_events"] > 0 and oracle["window_attainment"] == whole["window_attainment"] == 1.0
    assert oracle["replica_hours"] == pytest.approx(whole["replica_hours"], rel=0.02)  # the draws differ
    assert oracle["replica_hours"] < static["replica_hours"]
