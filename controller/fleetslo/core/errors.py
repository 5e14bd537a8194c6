"""The fleetslo error tree, one branch per boundary, each error classified by what to do next.

``Transient`` errors (a timeout, a 503, a conflict) are retried on the next tick with back-off;
``Permanent`` errors (bad config, RBAC denied, malformed data that will not fix itself) are
surfaced and not hammered. Adapters translate library exceptions into these with ``raise … from``
so the cause stays attached, and callers branch on the class, never on message text.
"""

from __future__ import annotations


class FleetSLOError(Exception):
    """Base of every error fleetslo raises on purpose."""

    #: A short, stable token used as the ``reason`` label of error counters.
    reason: str = "error"


class Transient(FleetSLOError):
    """Likely to go away by itself: retry later."""


class Permanent(FleetSLOError):
    """Will not go away without a change by a person: report it, do not retry in a hot loop."""


# --- configuration --------------------------------------------------------------------------


class ConfigError(Permanent):
    """A setting or spec is invalid. The message names the key, the value and what is allowed."""

    reason = "config"


# --- reading metrics ------------------------------------------------------------------------


class ExpositionError(Permanent):
    """A metrics page could not be parsed (the server answered something that is not metrics)."""

    reason = "parse"


class EngineScrapeError(Transient):
    """The engine's ``/metrics`` could not be read this time."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# --- reading GPUs ---------------------------------------------------------------------------


class GpuReadError(Transient):
    """One read of the GPUs failed (a timeout, garbage output, a file that vanished): try next tick.

    ``reason`` is a short token (``timeout``, ``parse``, ``io``, ``no_devices`` …) used as the
    ``reason`` label of ``fleetslo_gpu_collector_errors_total``.
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


class GpuUnavailable(GpuReadError):
    """A GPU backend cannot work here at all (no library, no tool, driver not loaded).

    Still a ``Transient`` subclass: a driver may finish loading after the sidecar starts, so the
    sampler keeps retrying at its interval rather than giving up.
    """


# --- observing a target (the controller's sources) -------------------------------------------


class SourceUnavailable(Transient):
    """The metrics backend could not be reached or failed this time (connect, timeout, 5xx)."""

    reason = "source_unavailable"


class BadQuery(Permanent):
    """The metrics backend refused a query (4xx): a wrong URL, selector or credentials."""

    reason = "bad_query"


# --- acting on a target (the Kubernetes API) -------------------------------------------------


class NotFound(Permanent):
    """The scaled object (or its scale subresource, or its resource type) does not exist."""

    reason = "not_found"


class Forbidden(Permanent):
    """The API refused the call: missing RBAC, or bad credentials (401/403)."""

    reason = "forbidden"


class Invalid(Permanent):
    """The API rejected the request body (400/422): a bug or a webhook policy, not a blip."""

    reason = "invalid"


class Conflict(Transient):
    """Someone else changed the object first (409): read again and retry next tick."""

    reason = "conflict"


class RateLimited(Transient):
    """The API asked us to slow down (429); ``retry_after`` is its hint in seconds, if any."""

    reason = "rate_limited"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ApiUnavailable(Transient):
    """The API server could not be reached or failed (connect error, timeout, 5xx)."""

    reason = "api_unavailable"
