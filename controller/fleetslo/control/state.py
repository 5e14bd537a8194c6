"""What a controller keeps across a restart or a leader change: each policy's learned state.

The record a target's policy learned (``policy.base.learned_of``: for ``fleetslo``, the performance
model and request mix) is saved after every decision in an envelope with a schema number::

    {"schema": 1, "policy": "fleetslo", "savedAt": 1796148000.0,
     "start": {"learned": "resumed", "why": "...", "history": 4032},
     "learned": {...}}

into the FleetSLO resource's status (``status.capacityModel``, written with the rest of the status
by the ``StatusAuditor``), or, for targets without a resource (Static and Local targets, file
specs), into a JSON state file. ``start`` says how *this* controller started the target, so a
degraded start is visible where the model is. A record is at most ``MAX_RECORD_BYTES``.

``Restorer.start`` runs on a target's first reconcile of every leadership term, before its first
decision: it reads the record back, reads the target's recent load from the metrics store (when
the source can, and the policy wants it), and hands both to the policy (``policy.base.restore``).
A record that is missing starts from the prior; one of another schema or policy, or one that does
not parse, is *discarded*: logged as a warning, marked in ``start``, and the target starts from
the prior — never a crash. A store that cannot be read right now (the API server is down) fails
the reconcile instead, which is retried: starting from the prior then would overwrite a good model.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from fleetslo.control.ports import HistorySource, Source
from fleetslo.core.errors import FleetSLOError, Permanent
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.base import (
    Carried,
    LoadSample,
    Policy,
    Restorable,
    Restored,
    history_step,
    learned_of,
    restore,
)

log = logging.getLogger("fleetslo.state")

#: The envelope's schema: bumped when its shape changes; a record of another schema is discarded.
SCHEMA = 1
#: A record larger than this is not saved (a status object has to stay small; etcd's limit is
#: 1.5 MiB for the whole object, and ours is read on every list): the fleetslo model is ~2 KiB.
MAX_RECORD_BYTES = 16 * 1024


class StateStore(Protocol):
    """Where records are kept. ``load`` raises ``Transient`` when it cannot be read now."""

    def load(self, name: str) -> object | None:
        """The raw record saved for target ``name``; ``None`` when there is none."""
        ...

    def save(self, name: str, record: Mapping[str, Any]) -> None:
        """Keep ``record`` (best effort: a failed write is logged, never raised)."""
        ...


def encode(
    policy: str, learned: Mapping[str, Any], saved_at: float, start: Restored | None
) -> dict[str, Any]:
    """The envelope around ``learned``; ``ValueError`` if it is not JSON-safe or too large."""
    # A merge patch reads null as "delete this key": a record holds no nulls (missing is absent).
    record: dict[str, Any] = {"schema": SCHEMA, "policy": policy, "savedAt": saved_at}
    record["learned"] = _without_nulls(learned)
    if start is not None:
        record["start"] = {"learned": start.learned, "why": start.why[:512], "history": start.history_used}
    size = len(json.dumps(record, allow_nan=False))
    if size > MAX_RECORD_BYTES:
        raise ValueError(f"the learned state is {size} bytes, over the {MAX_RECORD_BYTES}-byte limit")
    return record


def decode(raw: object, policy: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """``(learned, None)`` from a good record, ``(None, None)`` without one, ``(None, why)`` from
    one that cannot be used."""
    if raw is None:
        return None, None
    if isinstance(raw, Unreadable):
        return None, raw.why
    if not isinstance(raw, Mapping):
        return None, f"the record is a {type(raw).__name__}, not an object"
    if raw.get("schema") != SCHEMA:
        return None, f"record schema {raw.get('schema')!r}, this controller reads {SCHEMA}"
    if raw.get("policy") != policy:
        return None, f"the record is of policy {raw.get('policy')!r}, this target runs {policy}"
    learned = raw.get("learned")
    if not isinstance(learned, Mapping):
        return None, "the record holds no learned state"
    return learned, None


def _without_nulls(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _without_nulls(v) if isinstance(v, Mapping) else v for k, v in value.items() if v is not None}


@dataclass(frozen=True, slots=True)
class Unreadable:
    """What a store holds where a record should be but cannot be parsed."""

    why: str


class FileStateStore:
    """Records of every target in one JSON file, replaced atomically (write, fsync, rename).

    One controller process owns the file (standalone targets have no leader election); a file
    that is not JSON reads as ``Unreadable`` for every target, and the next save rewrites it whole.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._records: dict[str, Mapping[str, Any]] | None = None

    def load(self, name: str) -> object | None:
        with self._lock:
            records = self._read()
        if isinstance(records, Unreadable):
            return records
        return records.get(name)

    def save(self, name: str, record: Mapping[str, Any]) -> None:
        with self._lock:
            if self._records is None:
                read = self._read()
                self._records = {} if isinstance(read, Unreadable) else dict(read)
            if _same_learning(self._records.get(name), record):
                return  # nothing new learned: spare the disk a write every decision
            self._records[name] = record
            try:
                self._write({"schema": SCHEMA, "targets": self._records})
            except OSError as exc:
                log.warning("could not write the state file %s: %s", self.path, exc)

    def _read(self) -> dict[str, Any] | Unreadable:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            return Unreadable(f"state file {self.path}: {exc}")
        try:
            data = json.loads(text)
        except ValueError as exc:
            return Unreadable(f"state file {self.path} is not JSON ({exc})")
        targets = data.get("targets") if isinstance(data, dict) else None
        if not isinstance(targets, dict):
            return Unreadable(f"state file {self.path} has no targets object")
        return targets

    def _write(self, data: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, allow_nan=False, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _same_learning(old: object, new: Mapping[str, Any]) -> bool:
    if not isinstance(old, Mapping):
        return False
    return old.get("learned") == new.get("learned") and old.get("start") == new.get("start")


@runtime_checkable
class StatusReader(Protocol):
    def read_status(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


class StatusStateStore:
    """Records in the FleetSLO resources' status (``status.capacityModel``).

    ``load`` reads the resource from the API (a new leader reads what the old one wrote last);
    ``save`` only keeps the record for the ``StatusAuditor``, which writes it with the status of
    the same reconcile (``pending`` is its ``capacity_state`` hook): one status write per decision.
    """

    def __init__(self, reader: StatusReader, resources: Mapping[str, tuple[str, str]]) -> None:
        self.reader, self.resources = reader, dict(resources)
        self._pending: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()

    def load(self, name: str) -> object | None:
        key = self.resources.get(name)
        if key is None:
            return None
        status = self.reader.read_status(*key)
        return None if status is None else status.get("capacityModel")

    def save(self, name: str, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._pending[name] = record

    def pending(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._pending.get(name)
        return None if record is None else dict(record)


class Restorer:
    """Resumes each target's policy from its record and history; saves the record after each decision."""

    def __init__(self, stores: Mapping[str, StateStore], *, history_days: float = 14.0) -> None:
        self.stores = dict(stores)
        self.history_days = history_days
        #: How each target started this leadership term (for tests and the status).
        self.started: dict[str, Restored] = {}

    def start(self, slo: FleetSLO, policy: Policy[Any], source: Source, state: Any, now: float) -> Any:
        """``state`` (a policy's initial one) resumed for ``slo``; raises ``Transient`` when the store
        cannot be read now."""
        name = slo.metadata.name
        if not isinstance(policy, Restorable):
            return state  # nothing to read back, nothing to bootstrap: the baselines start as ever
        store = self.stores.get(name)
        raw = store.load(name) if store is not None else None
        learned, problem = decode(raw, policy.name)
        history = self._history(slo, policy, source, state, now)
        state, restored = restore(policy, state, slo.spec, Carried(learned, history))
        if problem is not None:
            restored = Restored("discarded", problem, restored.history_used)
        self.started[name] = restored
        fields = {"event": "state_restored", "target": name, "learned": restored.learned,
                  "why": restored.why, "history": restored.history_used}  # fmt: skip
        if restored.degraded:
            log.warning("%s: starting from the prior, the persisted state was discarded: %s", name,
                        restored.why, extra={"fields": fields})  # fmt: skip
        else:
            log.info(
                "%s: %s; %d history samples",
                name,
                restored.why,
                restored.history_used,
                extra={"fields": fields},
            )
        return state

    def save(self, slo: FleetSLO, policy: Policy[Any], state: Any, now: float) -> None:
        name = slo.metadata.name
        store = self.stores.get(name)
        learned = learned_of(policy, state)
        if store is None or learned is None:
            return
        try:
            record = encode(policy.name, learned, now, self.started.get(name))
        except ValueError as exc:
            log.warning("%s: learned state not saved: %s", name, exc)
            return
        store.save(name, record)

    def _history(
        self, slo: FleetSLO, policy: Policy[Any], source: Source, state: Any, now: float
    ) -> list[LoadSample]:
        step = history_step(policy, state)
        if step is None or self.history_days <= 0:
            return []
        name = slo.metadata.name
        if not isinstance(source, HistorySource):
            log.info("%s: the source keeps no history; the forecast starts empty", name)
            return []
        try:
            history = source.load_history(slo, now, days=self.history_days, step=step)
        except FleetSLOError as exc:
            kind = "permanent" if isinstance(exc, Permanent) else "transient"
            log.warning("%s: no load history (%s: %s); the forecast starts empty", name, kind, exc)
            return []
        if not history:
            log.info("%s: the metrics store holds no load history; the forecast starts empty", name)
        return history
