"""Run every benchmark (``python -m benchmarks``) or the ones named (``python -m benchmarks parse sim``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    wanted = [n for n in names if not argv or n.removeprefix("bench_") in argv]
    for name in wanted:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
