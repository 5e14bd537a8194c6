"""A public fake ``GpuReader`` for tests, demos and users' own tests (like ``kopf.testing``).

Set ``samples`` (or a callable producing them), ``error`` (raised on the next reads) or
``hang`` (an event the read waits on, as a wedged driver would) at any time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.reader import Backend


class FakeGpuReader:
    """Returns whatever the test set; counts reads and closes."""

    def __init__(
        self,
        samples: Sequence[GpuSample] | Callable[[], Sequence[GpuSample]] = (),
        backend: Backend = Backend.SYSFS,
    ) -> None:
        self.samples = samples
        self.error: Exception | None = None
        self.hang: threading.Event | None = None
        self.reads = 0
        self.closes = 0
        self._backend = backend

    @property
    def backend(self) -> Backend:
        return self._backend

    def read(self) -> Sequence[GpuSample]:
        self.reads += 1
        if self.hang is not None:
            self.hang.wait()
        if self.error is not None:
            raise self.error
        return list(self.samples() if callable(self.samples) else self.samples)

    def close(self) -> None:
        self.closes += 1
