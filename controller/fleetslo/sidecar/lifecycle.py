"""How a serving process lives: run until SIGTERM or SIGINT, and exit as a Unix service should.

Shared by ``fleetslo exporter`` and ``fleetslo sim-server``: SIGTERM (Kubernetes stopping the pod)
is a normal end (exit 0); SIGINT (Ctrl-C) exits 130, as a shell expects of an interrupted program,
including a Ctrl-C that arrives before the handlers are installed.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable


def run_until_signalled(serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run ``serve(stop)`` on a new event loop; ``stop`` is set on SIGTERM or SIGINT. Returns the
    process's exit status."""
    received: list[int] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping(signum: int) -> None:
            received.append(signum)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping, sig)
        await serve(stop)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # before the handlers were installed
        received.append(signal.SIGINT)
    return 128 + signal.SIGINT if signal.SIGINT in received else 0
