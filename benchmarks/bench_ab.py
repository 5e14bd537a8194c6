"""A policy change against the defaults: fleetslo alone, side by side in one run, on many workloads.

What each entry of ``docs/policy-log.md`` measures. ``AB_CONFIGS`` lists the configurations,
separated by ``;``, each a ``,``-separated list of ``key=value`` options of ``FleetSLOConfig`` (as
``fleetslo simulate --policy-option`` takes them); the first is the reference, and an empty one
is the defaults. ``AB_SETS`` names the workloads, comma-separated: ``suite``, ``heldout``,
``probes``, ``fresh`` (any set ``benchmarks policy`` names) and ``drawnA-B`` (seeds A to B of
``drawn.py``); the default is the suite's quick subset. ``AB_CASES`` keeps the workloads whose
name contains one of its comma-separated words, ``AB_WORKERS`` processes run at once (2), and
``AB_OUT=dir`` writes each configuration's rows there as JSON lines.

Per configuration and set: replica-hours, workloads at ≥ 0.99 window attainment, mean window
attainment and flaps; then every workload that moved. Without ``AB_CONFIGS`` it measures the
yardstick a change is judged by: the defaults against one notch more ``headroom``, the price of
attainment bought by standing capacity alone (over the 135 workloads of stop 39: +0.6 %
replica-hours for +0.001 mean attainment). A change is worth keeping when it buys more attainment
per replica-hour than that knob, on the sets it was not chosen on.

One run replays each workload once per configuration (the oracle, the frontier and the baselines
are not run: ``benchmarks policy`` has them); the 135 of every set take 20-25 minutes a configuration
with two processes here.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetslo.policy.registry import make_policy
from fleetslo.sim.compare import SimulateOptions, make_named_policy, parse_policy_options
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import make_spec, run_policy

from benchmarks.bench_policy import PROFILE, SETS, choose, flaps, scenario
from benchmarks.drawn import drawn
from benchmarks.workloads import Workload

#: The goal the issue sets per window-attainment figure (``benchmarks policy`` judges the same).
GOAL = 0.99
#: A workload "moved" when its replica-hours changed by more than this share, or its attainment at all.
MOVED = 0.02
DEFAULT_CONFIGS = ";headroom=0.35"


@dataclass(frozen=True, slots=True)
class Case:
    set: str
    workload: Workload


def parse_sets(text: str) -> list[tuple[str, list[Workload]]]:
    """``suite,drawn0-19`` into (set name, workloads); ``quick`` is the suite's quick subset."""
    named = {**SETS, "quick": tuple(choose("suite", True, ""))}
    sets: list[tuple[str, list[Workload]]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part in named:
            sets.append((part, list(named[part])))
            continue
        first, sep, last = part.removeprefix("drawn").partition("-")
        if not part.startswith("drawn") or not sep or not first.isdigit() or not last.isdigit():
            raise SystemExit(f"AB_SETS: {part!r} is none of {', '.join(named)} or drawnA-B")
        if int(last) < int(first):
            raise SystemExit(f"AB_SETS: {part!r} ends before it starts")
        sets.append((part, list(drawn(count=int(last) - int(first) + 1, first=int(first)))))
    return sets


def parse_configs(text: str) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    """``;headroom=0.35`` into (label, policy options): the defaults, then headroom 0.35."""
    configs = []
    for part in text.split(";"):
        pairs = [p.strip() for p in part.split(",") if p.strip()]
        configs.append((",".join(pairs) or "defaults", parse_policy_options(pairs)))
    if len(configs) < 2:
        raise SystemExit("AB_CONFIGS: at least two configurations, ';'-separated (the first may be empty)")
    # Refused here, before the drawn workloads are sized and the workers forked, not in each worker.
    spec = make_spec(builtin_profile(PROFILE))
    for _, options in configs:
        make_policy("fleetslo", spec, **dict(options))
    return configs


def replay(case: Case, options: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """fleetslo on one workload with ``options``: what ``benchmarks policy`` reports for it."""
    started = time.perf_counter()
    sc = scenario(case.workload)
    simulate = SimulateOptions(policies=("fleetslo",), policy_options=options)
    policy = make_named_policy("fleetslo", sc, simulate)
    result = run_policy(sc, policy, label="fleetslo")
    return {
        "set": case.set, "case": case.workload.name, "attainment": result.window_attainment,
        "replica_hours": result.replica_hours, "flaps": flaps(result.events),
        "wall_s": round(time.perf_counter() - started, 1),
    }  # fmt: skip


def summary(rows: Sequence[dict[str, Any]]) -> tuple[float, int, float | None, int]:
    """(replica-hours, workloads at the goal, mean attainment, flaps); a workload whose attainment
    is unknown (no judged window) counts in none of the attainment figures."""
    known = [r["attainment"] for r in rows if r["attainment"] is not None]
    mean = sum(known) / len(known) if known else None
    return (
        sum(r["replica_hours"] for r in rows), sum(a >= GOAL for a in known), mean,
        sum(r["flaps"] for r in rows),
    )  # fmt: skip


def _cell(rows: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]] | None) -> str:
    hours, at_goal, mean, flapped = summary(rows)
    change = ""
    if reference is not None:
        before = summary(reference)[0]
        change = f" ({hours / before - 1:+.1%})" if before > 0 else ""
    attained = "—" if mean is None else f"{mean:.4f}"
    return f"{hours:,.1f}{change}, {at_goal} at ≥ {GOAL:g}, mean {attained}, {flapped} flaps"


def report(labels: Sequence[str], results: Sequence[Sequence[dict[str, Any]]]) -> str:
    """The side-by-side tables: per set and overall, then the workloads that moved against the first."""
    reference = results[0]
    sets = list(dict.fromkeys(r["set"] for r in reference))
    lines = ["| set | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for name in [*sets, "all"]:
        cells = []
        for k, rows in enumerate(results):
            picked = [r for r in rows if name == "all" or r["set"] == name]
            ref = None if k == 0 else [r for r in reference if name == "all" or r["set"] == name]
            cells.append(_cell(picked, ref))
        count = sum(name in ("all", r["set"]) for r in reference)
        lines.append(f"| {name} ({count}) | " + " | ".join(cells) + " |")
    by_case = [{r["case"]: r for r in rows} for rows in results]
    for label, changed in zip(labels[1:], by_case[1:], strict=True):
        moved = [
            (r, changed[r["case"]])
            for r in reference
            if r["case"] in changed and _moved(r, changed[r["case"]])
        ]
        better = sum(_attained(b) > _attained(a) for a, b in moved)
        worse = sum(_attained(b) < _attained(a) for a, b in moved)
        lines += ["", f"{label}: {len(moved)} moved, attainment better on {better}, worse on {worse}"]
        for a, b in moved:
            before, after = a["replica_hours"], b["replica_hours"]
            change = f" ({after / before - 1:+.1%})" if before > 0 else ""
            lines.append(
                f"  {a['case'][:70]:70s} {_attained(a):.3f} {a['replica_hours']:7.1f} -> "
                f"{_attained(b):.3f} {b['replica_hours']:7.1f}{change}"
            )
    return "\n".join(lines)


def _attained(row: dict[str, Any]) -> float:
    return -1.0 if row["attainment"] is None else row["attainment"]


def _moved(a: dict[str, Any], b: dict[str, Any]) -> bool:
    hours = abs(b["replica_hours"] / a["replica_hours"] - 1) if a["replica_hours"] > 0 else 0.0
    return a["attainment"] != b["attainment"] or hours > MOVED


# The workers are forked from the process that built the workloads (their traces are built by
# closures, which do not pickle): they get an index into this list.
_CASES: list[Case] = []
_OPTIONS: list[tuple[tuple[str, Any], ...]] = []


def _one(index: int) -> dict[str, Any]:
    return replay(_CASES[index], _OPTIONS[0])


def run(
    cases: Sequence[Case], configs: Sequence[tuple[str, tuple[tuple[str, Any], ...]]], workers: int = 2
) -> list[list[dict[str, Any]]]:
    """Every case under every configuration, in the cases' order."""
    _CASES[:] = cases
    results = []
    for label, options in configs:
        _OPTIONS[:] = [options]
        print(f"== {label}", flush=True)
        if workers <= 1:
            rows = [_one(i) for i in range(len(cases))]
        else:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                rows = list(pool.imap(_one, range(len(cases))))
        results.append(rows)
    return results


def main() -> list[list[dict[str, Any]]]:
    configs = parse_configs(os.environ.get("AB_CONFIGS", DEFAULT_CONFIGS))
    words = [w.strip() for w in os.environ.get("AB_CASES", "").split(",") if w.strip()]
    cases = [
        Case(name, w) for name, ws in parse_sets(os.environ.get("AB_SETS", "quick")) for w in ws
        if not words or any(word in w.name for word in words)
    ]  # fmt: skip
    results = run(cases, configs, int(os.environ.get("AB_WORKERS", "2")))
    out = os.environ.get("AB_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        for k, rows in enumerate(results):
            lines = "".join(json.dumps({"config": configs[k][0], **r}) + "\n" for r in rows)
            Path(out, f"ab-{k}.jsonl").write_text(lines, encoding="utf-8")
    print(report([label for label, _ in configs], results))
    return results


if __name__ == "__main__":
    main()
