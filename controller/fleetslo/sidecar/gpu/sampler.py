"""Reads the GPUs on an interval in a background thread and keeps the latest report.

GPU reads can block: a CLI until its timeout, a C library or a sysfs read under a wedged driver
without any bound at all. So ``/metrics`` never reads a GPU; it serves the last ``GpuReport``,
and the collector treats a report older than its staleness bound as "collector down". The
thread is a daemon: a read stuck forever in a C call cannot keep the process from exiting.

On its first tick the sampler picks the backend (``auto``: the first that returns GPUs, in
``backends.BACKENDS``) and the GPUs of this replica, and logs both once. Each later tick reads, keeps
only the selected GPUs, publishes the report and appends energy/busy totals to a ring from which
``window()`` answers for the efficiency signals. Every failure becomes a report with ``up``
false and a reason; nothing raised in a backend ends the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fleetslo.core.errors import GpuReadError, GpuUnavailable
from fleetslo.core.metrics.window import SnapshotRing
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.attribution import GpuSelection, select
from fleetslo.sidecar.gpu.efficiency import GpuTotals, GpuWindow, advance, gpu_window
from fleetslo.sidecar.gpu.reader import Backend, GpuReader

log = logging.getLogger("fleetslo.gpu")

#: Supplies the GPUs of this pod when no flag or variable chose them (PodResources), with a reason.
PodLookup = Callable[[], tuple[GpuSelection | None, str]]


@dataclass(frozen=True, slots=True)
class GpuReport:
    """The outcome of one read: what was seen, or why nothing was."""

    backend: Backend
    up: bool
    #: Wall-clock time (for the exposed timestamp) and monotonic time (for staleness) of the read.
    at: float
    monotonic_at: float
    samples: tuple[GpuSample, ...] = ()
    reason: str | None = None
    duration: float | None = None
    last_success: float | None = None
    errors: Mapping[str, int] = field(default_factory=dict)


def _probe(candidate: GpuReader) -> str | None:
    """``None`` if the backend returns GPUs, else why not."""
    try:
        return None if candidate.read() else "no GPUs"
    except Exception as exc:  # detection tries everything; any failure means "next"
        return str(getattr(exc, "reason", type(exc).__name__))


class GpuSampler:
    """Owns the reader; ``sample_once`` is the whole tick, ``start`` runs it on a thread."""

    def __init__(
        self,
        candidates: Sequence[GpuReader],
        *,
        interval: float,
        history: float,
        selection: GpuSelection | None = None,
        pod_lookup: PodLookup | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._candidates = list(candidates)
        self._reader: GpuReader | None = candidates[0] if len(candidates) == 1 else None
        self._interval = interval
        self._selection, self._pod_lookup = selection, pod_lookup
        self._clock, self._monotonic = clock, monotonic
        self._ring: SnapshotRing[GpuTotals] = SnapshotRing(int(history / interval) + 3)
        self._lock = threading.Lock()
        self._report: GpuReport | None = None
        self._errors: dict[str, int] = {}
        self._last_success: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._reader is not None:
            log.info("gpu: using backend %s (configured)", self._reader.backend)

    @property
    def interval(self) -> float:
        return self._interval

    def latest(self) -> GpuReport | None:
        """The newest report (``None`` before the first tick finished)."""
        return self._report

    def window(self, seconds: float) -> GpuWindow | None:
        """What the selected GPUs did over about the last ``seconds``; ``None`` until covered."""
        with self._lock:
            end = self._ring.newest()
            # A start point may sit up to most of an interval from the ideal one (jitter).
            start = self._ring.start_of(seconds, 0.75 * self._interval)
        if end is None or start is None or start is end:
            return None
        return gpu_window(start, end)

    # --- the tick ---------------------------------------------------------------------------

    def sample_once(self) -> GpuReport:
        started = self._monotonic()
        backend = self._reader.backend if self._reader else Backend.NONE
        try:
            reader = self._reader or self._detect()
            backend = reader.backend
            samples = self._read(reader)
        except GpuReadError as exc:
            report = self._failure(backend, exc.reason, str(exc), started)
        except Exception as exc:  # a vendor library raising the unexpected must not end the thread
            log.exception("gpu: unexpected error from backend %s", backend)
            report = self._failure(backend, "internal", repr(exc), started)
        else:
            report = self._success(backend, samples, started)
        self._publish(report)
        return report

    def _read(self, reader: GpuReader) -> list[GpuSample]:
        selection = self._resolve_selection()
        try:
            samples = select(reader.read(), selection)
        except GpuReadError:
            reader.close()  # re-initialise the library on the next tick
            raise
        if not samples:
            raise GpuReadError(
                f"gpu: no GPU matches the selection: {selection.describe()}", "no_matching_gpus"
            )
        if not any(s.has_telemetry() for s in samples):
            raise GpuReadError("gpu: every telemetry value was unreadable", "no_data")
        return samples

    def _detect(self) -> GpuReader:
        """The first candidate that returns GPUs; logged once, with why the others were passed over."""
        passed: list[str] = []
        for candidate in self._candidates:
            why = _probe(candidate)
            if why is None:
                self._reader = candidate
                log.info("gpu: using backend %s (auto; %s)", candidate.backend, "; ".join(passed) or "first")
                return candidate
            passed.append(f"{candidate.backend}: {why}")
            candidate.close()
        raise GpuUnavailable("gpu: no backend found (" + "; ".join(passed) + ")", "no_backend")

    def _resolve_selection(self) -> GpuSelection:
        if self._selection is None:
            found, why = self._pod_lookup() if self._pod_lookup else (None, "nothing chose GPUs")
            self._selection = found or GpuSelection(everything=True, source=f"default: {why}")
            log.info("gpu: exporting %s", self._selection.describe())
        return self._selection

    def _success(self, backend: Backend, samples: list[GpuSample], started: float) -> GpuReport:
        now, mono = self._clock(), self._monotonic()
        with self._lock:
            self._ring.append(mono, advance(self._ring.newest(), mono, samples, 3 * self._interval))
        self._last_success = now
        return GpuReport(
            backend, True, now, mono, tuple(samples), None, mono - started, now, dict(self._errors)
        )

    def _failure(self, backend: Backend, reason: str, message: str, started: float) -> GpuReport:
        self._errors[reason] = self._errors.get(reason, 0) + 1
        previous = self._report
        if previous is None or previous.up or previous.reason != reason:
            log.warning("gpu: collector down (%s): %s", reason, message)
        now, mono = self._clock(), self._monotonic()
        return GpuReport(
            backend, False, now, mono, (), reason, mono - started, self._last_success, dict(self._errors)
        )

    def _publish(self, report: GpuReport) -> None:
        previous = self._report
        if report.up and previous is not None and not previous.up:
            log.info("gpu: collector up again (backend %s)", report.backend)
        self._report = report  # one reference assignment: readers see the old or the new report

    # --- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fleetslo-gpu-sampler", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self._interval)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop ticking; a thread stuck in a read is left behind (it is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                for reader in {id(r): r for r in [*self._candidates, self._reader] if r}.values():
                    reader.close()
