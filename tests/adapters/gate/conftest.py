"""Tests marked ``virtual_time`` here run on a virtual event-loop clock (``tests.virtual_time``)."""

from __future__ import annotations

from typing import Any

from tests.virtual_time import loop_factories


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    return loop_factories(item)
