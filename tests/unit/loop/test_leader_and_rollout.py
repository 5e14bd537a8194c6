"""Leader election logic on an in-memory lock, and the pure ``--max-num-seqs`` rewriting."""

from __future__ import annotations

from typing import Any

from fleetslo.control.kube import rollout
from fleetslo.control.kube.lease import LeaseRecord
from fleetslo.control.leader import LeaderElector
from fleetslo.core.errors import ApiUnavailable, Conflict
from fleetslo.testing import FakeClock


class MemoryLock:
    """A compare-and-swap lease in memory; ``down`` makes every call fail like an unreachable API."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.down = False

    def describe(self) -> str:
        return "lease test/lock"

    def get(self) -> tuple[LeaseRecord, str | None] | None:
        self._check()
        return None if self.record is None else (self.record, str(self.version))

    def create(self, record: LeaseRecord) -> None:
        self._check()
        if self.record is not None:
            raise Conflict("exists")
        self.record, self.version = record, self.version + 1

    def update(self, record: LeaseRecord, resource_version: str | None) -> None:
        self._check()
        if resource_version != str(self.version):
            raise Conflict("stale")
        self.record, self.version = record, self.version + 1

    def _check(self) -> None:
        if self.down:
            raise ApiUnavailable("unreachable")


def make(lock: MemoryLock, identity: str, clock: FakeClock, changes: list[Any]) -> LeaderElector:
    return LeaderElector(lock, identity, clock=clock, wall=clock, on_change=changes.append)


def test_a_leader_cut_off_from_the_api_steps_down_at_the_renew_deadline() -> None:
    lock, clock, changes = MemoryLock(), FakeClock(0.0), []
    leader = make(lock, "a", clock, changes)
    assert leader.step()
    lock.down = True
    for _ in range(4):
        clock.advance(2.0)
        leader.step()  # errors are logged, never raised
    assert leader.is_leader()  # 8 s without renewal: still inside the 10 s deadline
    clock.advance(2.0)
    assert not leader.step() and not leader.is_leader()
    assert changes == [True, False]


def test_a_leader_renews_its_own_lease_without_a_transition() -> None:
    lock, clock = MemoryLock(), FakeClock(0.0)
    leader = make(lock, "a", clock, [])
    leader.step()
    acquired = lock.record.acquired if lock.record else None
    clock.advance(2.0)
    leader.step()
    assert lock.record is not None and lock.record.acquired == acquired and lock.record.transitions == 0
    assert lock.record.renewed != acquired


def test_release_hands_over_and_counts_a_transition() -> None:
    lock, clock = MemoryLock(), FakeClock(0.0)
    a, b = make(lock, "a", clock, []), make(lock, "b", clock, [])
    a.step()
    a.release()
    assert lock.record is not None and lock.record.holder is None
    assert b.step() and lock.record.holder == "b" and lock.record.transitions == 1


def test_rewrites_every_spelling_of_max_num_seqs() -> None:
    assert rollout.find_limit(["--max_num_seqs", "12"]) == 12
    assert rollout.with_limit(["--max_num_seqs=12"], 20) == ["--max_num_seqs=20"]
    assert (
        rollout.with_limit(["sh", "-c", "vllm serve m --max-num-seqs 8"], 4)[2]
        == "vllm serve m --max-num-seqs 4"
    )
    assert rollout.find_limit(["--max-num-batched-tokens", "8192"]) is None


def test_leaderworkerset_leader_and_worker_templates_are_both_patched() -> None:
    def template(args: list[str]) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "vllm", "args": args}]}}

    lws = {"spec": {"leaderWorkerTemplate": {
        "leaderTemplate": template(["--max-num-seqs", "64", "--tensor-parallel-size", "8"]),
        "workerTemplate": template(["--max-num-seqs", "64"]),
    }}}  # fmt: skip
    templates = ("/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate")
    containers = rollout.vllm_containers(lws, templates, None)
    ops = rollout.limit_patch(containers, 32)
    replaced = [op["path"] for op in ops if op["op"] == "replace"]
    assert replaced == [f"{t}/spec/containers/0/args" for t in templates]
    assert rollout.current_limit(containers) == 64
