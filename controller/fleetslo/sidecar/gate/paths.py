"""Which requests make the engine work (and so take a slot), and which model a request is for.

**Admitted**: every ``POST``/``PUT``/``PATCH`` except the paths below. vLLM keeps adding endpoints
that run the model (``/v1/responses``, ``/invocations``, ``/pooling``, ``/v1/embeddings``,
``/classify``, ``/score``, ``/rerank``, ``/v1/audio/transcriptions``, ...); a list of the ones we
know would let the next one bypass the limit, so the rule is the other way round: a request that
might run the model is admitted unless it is known not to.

**Not admitted** (relayed at once, never queued):

- reads (``GET``, ``HEAD``, ``OPTIONS``): ``/v1/models``, ``/health``, ``/metrics``, ``/version``,
  ``/ping``, ... A health probe must not wait behind a full batch, or Kubernetes would restart a
  busy replica;
- ``/tokenize`` and ``/detokenize``: the API server's tokenizer only, no engine step;
- ``/ping`` (SageMaker's health check is also a ``POST``) and ``/health``;
- vLLM's operator endpoints (LoRA loading, ``/reset_prefix_cache``, ``/sleep``, ``/wake_up``,
  profiling, ...): an operator fixing an overloaded replica must not queue behind its users.

The model label of a request comes from the body's top-level ``"model"`` string, found with one
byte-level search (the gate does not parse request bodies) and accepted only if it is a name the
engine serves, so clients cannot create series at will. Pure functions; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

_READS = frozenset({"GET", "HEAD", "OPTIONS"})

NOT_ADMITTED_PATHS = frozenset({
    "/tokenize", "/detokenize", "/v1/tokenize", "/v1/detokenize", "/ping", "/health",
    "/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/reset_prefix_cache", "/reset_mm_cache",
    "/sleep", "/wake_up", "/is_sleeping", "/start_profile", "/stop_profile", "/collective_rpc",
    "/scale_elastic_ep", "/is_scaling_elastic_ep", "/update_weights", "/pause", "/resume",
})  # fmt: skip

#: The label of a request whose model is not one the engine serves (or is not known yet).
UNKNOWN_MODEL = "unknown"

_MODEL = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){1,512})"')


def is_admitted(method: str, path: str) -> bool:
    """True when the request may run the model and so must hold a slot."""
    return method.upper() not in _READS and path.rstrip("/") not in NOT_ADMITTED_PATHS


class ModelNames:
    """Resolves the ``model_name`` label of a request from the names the engine serves.

    ``served`` returns the engine's model names (the sidecar passes the last scrape's); ``default``
    is the configured served name, used before the first scrape. A body that names no served model
    (a LoRA adapter, an alias, a typo that vLLM will refuse) counts under the only served model
    when there is one, else under ``unknown``.
    """

    def __init__(self, served: Callable[[], Collection[str]] = tuple, default: str | None = None) -> None:
        self.served = served
        self.default = default

    def names(self) -> Collection[str]:
        served = self.served()
        if served:
            return served
        return (self.default,) if self.default else ()

    def of(self, body: bytes) -> str:
        names = self.names()
        match = _MODEL.search(body)
        if match is not None:
            try:
                named = match.group(1).decode()
            except UnicodeDecodeError:
                named = ""
            if named in names:
                return named
        if len(names) == 1:
            return next(iter(names))
        return UNKNOWN_MODEL
