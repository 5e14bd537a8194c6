"""Large, realistic vLLM pages for benchmarks: a real capture replicated over models and engines."""

from __future__ import annotations

import re
from pathlib import Path

CAPTURE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "fixtures"
    / "vllm"
    / "vllm-0.32.0-cpu_v1_after_load.txt"
)


def large_page(models: int = 8, engines: int = 4) -> str:
    """The capture's vLLM families for ``models`` × ``engines`` series, other families once.

    With the defaults this is about 10,000 samples, what a node running several models with
    data-parallel engines serves.
    """
    vllm_lines: list[str] = []
    other_lines: list[str] = []
    for line in CAPTURE.read_text(encoding="utf-8").splitlines():
        (vllm_lines if line.startswith("vllm:") and 'model_name="' in line else other_lines).append(line)
    out = list(other_lines)
    for m in range(models):
        for e in range(engines):
            for line in vllm_lines:
                renamed = line.replace('model_name="tiny-llama"', f'model_name="model-{m}"')
                out.append(re.sub(r'engine="0"', f'engine="{e}"', renamed))
    return "\n".join(out) + "\n"


def sample_count(page: str) -> int:
    return sum(1 for line in page.splitlines() if line and not line.startswith("#"))
