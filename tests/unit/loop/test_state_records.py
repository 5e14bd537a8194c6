"""The persisted record: its envelope, its bound, what counts as unusable, the state file's writes."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import pytest
from fleetslo.control.state import MAX_RECORD_BYTES, SCHEMA, FileStateStore, Restorer, decode, encode
from fleetslo.policy.base import Carried, Restored
from fleetslo.policy.fleetslo import FleetSLOPolicy
from fleetslo.policy.fleetslo.carry import restore

from tests.loop_support import make_slo

SLO = make_slo("qwen")
LEARNED = FleetSLOPolicy().initial_state(SLO.spec).learned()


def test_the_envelope_round_trips_without_nulls() -> None:
    record = encode("fleetslo", LEARNED, 1_800_000_000.0, Restored("resumed", "because", 12))
    assert record["schema"] == SCHEMA and record["policy"] == "fleetslo"
    assert record["start"] == {"learned": "resumed", "why": "because", "history": 12}
    assert "mix" not in record["learned"]  # None in the policy's dict: absent (a merge patch deletes nulls)
    learned, problem = decode(json.loads(json.dumps(record)), "fleetslo")
    assert problem is None and learned is not None
    state, restored = restore(FleetSLOPolicy().initial_state(SLO.spec), Carried(learned, ()))
    assert restored.learned == "resumed" and state.model == FleetSLOPolicy().initial_state(SLO.spec).model


def test_a_record_over_the_bound_or_not_json_safe_is_refused() -> None:
    with pytest.raises(ValueError, match="byte limit"):
        encode("fleetslo", {**LEARNED, "padding": "x" * MAX_RECORD_BYTES}, 0.0, None)
    with pytest.raises(ValueError):
        encode("fleetslo", {**LEARNED, "speed": math.nan}, 0.0, None)


def test_an_oversized_state_is_not_saved_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Huge(FleetSLOPolicy):
        def learned(self, state: Any) -> dict[str, Any]:
            return {"blob": "x" * (2 * MAX_RECORD_BYTES)}

    store = FileStateStore(tmp_path / "state.json")
    with caplog.at_level(logging.WARNING, logger="fleetslo.state"):
        Restorer({"qwen": store}).save(SLO, Huge(), None, 0.0)
    assert not store.path.exists() and "not saved" in caplog.text


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (None, None),
        ([1, 2], "not an object"),
        ({"schema": 2, "policy": "fleetslo", "learned": {}}, "record schema 2"),
        ({"schema": 1, "policy": "keda-waiting", "learned": {}}, "policy 'keda-waiting'"),
        ({"schema": 1, "policy": "fleetslo"}, "no learned state"),
    ],
)
def test_decode_tells_what_is_unusable(raw: Any, why: str | None) -> None:
    learned, problem = decode(raw, "fleetslo")
    assert learned is None
    assert (problem is None) if why is None else (why in (problem or ""))


def test_the_state_file_is_replaced_whole_and_only_when_something_changed(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    store = FileStateStore(path)
    record = encode("fleetslo", LEARNED, 1.0, None)
    store.save("qwen", record)
    first = path.stat().st_mtime_ns
    os.utime(path, ns=(first - 10**9, first - 10**9))  # so a rewrite would show
    store.save("qwen", {**record, "savedAt": 2.0})  # the same learning, a later time: no write
    assert path.stat().st_mtime_ns == first - 10**9
    store.save("llama", record)
    assert set(json.loads(path.read_text(encoding="utf-8"))["targets"]) == {"qwen", "llama"}
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temporary file left
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # it may hold what the fleet taught: private
    assert FileStateStore(path).load("qwen") == record
