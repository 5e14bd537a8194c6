"""The fault suites' figures: inputs tried, crashes, wrong results, scale-downs on bad data, requests
lost, memory growth (``python -m benchmarks faults``). The same suites run small in ``make test``."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from benchmarks.faults import Figure


def suites() -> list[str]:
    # A leading underscore marks a suite's helper module, not a suite.
    modules = pkgutil.iter_modules([str(Path(__file__).parent / "faults")])
    return sorted(m.name for m in modules if not m.name.startswith("_"))


def main(quick: bool = False) -> list[Figure]:
    figures: list[Figure] = []
    for name in suites():
        module = importlib.import_module(f"benchmarks.faults.{name}")
        for figure in module.run(quick):
            print(figure.line(), flush=True)
            figures.append(figure)
    return figures


if __name__ == "__main__":
    main()
