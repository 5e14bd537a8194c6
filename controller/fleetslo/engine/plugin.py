"""The vLLM side of ``fleetslo[vllm]``: a stat-logger plugin (entry point group
``vllm.stat_logger_plugins``) that turns what vLLM's scheduler hands its loggers every step into
``fleetslo.engine.book`` records, and a general plugin that says so in one log line when this vLLM
cannot load it.

vLLM calls ``record`` once per engine step in the API-server process (``AsyncLLM``'s output
handler), with that step's ``SchedulerStats`` (batch composition when the server runs with
``--enable-logging-iteration-details``) and ``IterationStats`` (per-request token timings from the
engine core's clock). The step's time is the inter-token latency its decoding sequences saw —
the engine-core time from the previous step's output to this one's, scheduling included — because
``iteration_details.elapsed_ms`` covers only what the executor had left to do after launching the
step (with the in-process CPU executor, the forward pass has already run by then).

This module adapts vLLM's objects and must stay thin: the bookkeeping is in ``book``. vLLM's stats
classes are not a stable interface, so every field is read with a fallback and a missing one turns
the plugin off with one warning, never an exception inside vLLM's output loop.
"""

from __future__ import annotations

import logging
import os
import statistics
from typing import Any

from prometheus_client import REGISTRY

from fleetslo.engine.book import EngineBook, RequestRecord, StepRecord

# A child of vLLM's logger, so the lines appear in its log with its format and level.
log = logging.getLogger("vllm.fleetslo")

#: Versions whose stats objects this adapter was written against (vLLM's V1 engine, 0.32).
SUPPORTED_MAJOR_MINOR = ((0, 32),)
#: Set to a file path to get every step and request as a JSON line (exact records for offline fits).
RECORDS_ENV = "FLEETSLO_ENGINE_RECORDS"

try:  # the plugin is importable without vLLM, so its module can be linted and type-checked
    from vllm.v1.metrics.loggers import StatLoggerBase as _Base
except ImportError:  # pragma: no cover - only without vLLM, where nothing loads the plugin
    _Base = object


def vllm_version() -> tuple[int, int] | None:
    """(major, minor) of the installed vLLM, or ``None`` when it cannot be read."""
    try:
        from importlib.metadata import version

        import vllm

        text = getattr(vllm, "__version__", None) or version("vllm")
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except (ImportError, ValueError):
        return None


def check_support() -> None:
    """``vllm.general_plugins`` entry: one clear line when this vLLM cannot run the stat logger."""
    found = vllm_version()
    if found not in SUPPORTED_MAJOR_MINOR:
        log.warning(
            "fleetslo engine plugin: vLLM %s is not supported (supported: %s); no per-step data",
            ".".join(map(str, found)) if found else "of unknown version",
            ", ".join(f"{a}.{b}" for a, b in SUPPORTED_MAJOR_MINOR),
        )


class FleetSLOStatLogger(_Base):  # type: ignore[misc]
    """Per-step batch composition and time, and exact per-request latencies, on vLLM's /metrics."""

    def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
        self.config = vllm_config
        model = _served_name(vllm_config)
        path = os.environ.get(RECORDS_ENV)
        records = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115 - lives with vLLM
        self.book = EngineBook(model, str(engine_index), records)
        self.enabled = vllm_version() in SUPPORTED_MAJOR_MINOR
        self._warned_no_details = False
        if not self.enabled:
            check_support()
            return
        REGISTRY.register(self.book)
        _quiet_iteration_lines()
        log.info(
            "fleetslo engine plugin: publishing fleetslo_engine_* for %s (engine %s)", model, engine_index
        )

    def record(
        self,
        scheduler_stats: Any,
        iteration_stats: Any,
        mm_cache_stats: Any = None,
        engine_idx: int = 0,
    ) -> None:
        if not self.enabled:
            return
        try:
            if scheduler_stats is not None:
                self._record_step(scheduler_stats, iteration_stats)
            if iteration_stats is not None:
                for finished in getattr(iteration_stats, "finished_requests", ()):
                    self.book.add_request(_request_record(finished))
        except (AttributeError, TypeError, ValueError) as exc:
            self.enabled = False
            log.warning("fleetslo engine plugin: vLLM's stats changed shape (%s); plugin off", exc)

    def _record_step(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        details = getattr(scheduler_stats, "iteration_details", None)
        if details is None:
            if not self._warned_no_details:
                self._warned_no_details = True
                log.warning(
                    "fleetslo engine plugin: no batch composition; start vLLM with "
                    "--enable-logging-iteration-details for per-step data"
                )
            return
        itls = list(getattr(iteration_stats, "inter_token_latencies_iter", ()) or ())
        if details.is_dummy or not itls:
            return  # a step no sequence decoded in has no engine-clock duration (see module doc)
        self.book.add_step(
            StepRecord(
                prefill_seqs=int(details.num_ctx_requests),
                prefill_tokens=int(details.num_ctx_tokens),
                decode_seqs=int(details.num_generation_requests),
                kv_tokens=self._kv_tokens(float(scheduler_stats.kv_cache_usage)),
                seconds=statistics.median(itls),
            )
        )

    def _kv_tokens(self, usage: float) -> int:
        cache = getattr(self.config, "cache_config", None)
        blocks = getattr(cache, "num_gpu_blocks", None) or 0
        return round(usage * blocks * getattr(cache, "block_size", 0))

    def log_engine_initialized(self) -> None:
        """vLLM's hook after start-up: nothing to do, the families are already registered."""

    def log(self) -> None:
        """vLLM's periodic hook: the families are built per scrape, there is nothing to flush."""


def _request_record(finished: Any) -> RequestRecord:
    output_tokens = int(finished.num_generation_tokens)
    prefill_s = float(finished.prefill_time)
    queue_s = float(finished.queued_time)
    tpot = float(finished.mean_time_per_output_token)
    return RequestRecord(
        prompt_tokens=int(finished.num_prompt_tokens),
        output_tokens=output_tokens,
        queue_s=queue_s,
        prefill_s=prefill_s,
        decode_s=float(finished.decode_time),
        # The engine's TTFT runs from its arrival (after the API server's work) through queue and prefill.
        ttft_s=queue_s + prefill_s if output_tokens else None,
        tpot_s=tpot if output_tokens > 1 else None,
        preemptions=int(finished.num_preemptions),
        finish_reason=str(getattr(finished.finish_reason, "name", finished.finish_reason)).lower(),
    )


def _served_name(vllm_config: Any) -> str:
    model = getattr(vllm_config, "model_config", None)
    return str(getattr(model, "served_model_name", None) or getattr(model, "model", "unknown"))


class _DropIterationLines(logging.Filter):
    """Drops vLLM's own one-line-per-step echo that ``--enable-logging-iteration-details`` adds."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).lstrip("%s").startswith("Iteration(")


def _quiet_iteration_lines() -> None:
    logging.getLogger("vllm.v1.metrics.loggers").addFilter(_DropIterationLines())
