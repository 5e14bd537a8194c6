"""The sidecar's settings (``fleetslo exporter``): the exporter, and the admission gate in front of vLLM."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator

from fleetslo.core.config import (
    ByteSize,
    Frozen,
    PositiveDuration,
    http_url,
    parse_duration_list,
    parse_listen,
)

#: The admin API's bearer token must be at least this long (``gate.token``).
MIN_TOKEN_LENGTH = 16


def token_problem(token: str) -> str | None:
    """Why ``token`` is not usable as the admin token, or ``None``."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"shorter than {MIN_TOKEN_LENGTH} characters ({len(token)})"
    return None


class ExporterSettings(Frozen):
    """``fleetslo exporter``: scrape one vLLM server and publish windowed latency signals."""

    vllm_url: str = "http://127.0.0.1:8000"
    listen: str = "0.0.0.0:9400"
    interval: PositiveDuration = 5.0
    timeout: PositiveDuration | None = None
    windows: Annotated[list[PositiveDuration], BeforeValidator(parse_duration_list)] = Field(
        default_factory=lambda: [30.0, 60.0, 300.0]
    )
    slo_ttft: PositiveDuration | None = None
    slo_tpot: PositiveDuration | None = None
    otlp_endpoint: str | None = None
    otlp_interval: PositiveDuration = 15.0
    #: A vLLM page larger than this is a failed scrape (``page_too_large``), not parsed.
    max_page_bytes: ByteSize = Field(default=16 * 1024**2, ge=64 * 1024, le=1024**3)

    @field_validator("vllm_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return http_url(value)

    @field_validator("otlp_endpoint")
    @classmethod
    def _check_otlp(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, value: float) -> float:
        if not 0.1 <= value <= 300:
            raise ValueError(f"must be between 100ms and 5m (got {value:g}s)")
        return value

    @model_validator(mode="after")
    def _check_windows(self) -> ExporterSettings:
        if not self.windows:
            raise ValueError("windows: at least one window is needed")
        for w in self.windows:
            if w < 2 * self.interval:
                raise ValueError(
                    f"windows: {w:g}s is shorter than two scrape intervals ({2 * self.interval:g}s)"
                )
            if w > 86_400:
                raise ValueError(f"windows: {w:g}s is longer than one day")
        return self

    @property
    def scrape_timeout(self) -> float:
        """The timeout of one scrape: as configured, else the interval capped at 10 s."""
        return self.timeout if self.timeout is not None else min(self.interval, 10.0)

    @property
    def ring_size(self) -> int:
        """Snapshots to keep so the longest window always has a start point."""
        return int(max(self.windows) / self.interval) + 3


class GateServerSettings(Frozen):
    """``fleetslo exporter --gate-listen …``: the admission gate in front of vLLM.

    ``admin_token_file`` names the file the gate reads the token from (and re-reads when it
    changes, so a rotated Secret takes effect without a restart); ``admin_token`` is the token
    itself, for embedding. Neither turns the admin API off. ``admin_token`` is a ``SecretStr`` so
    no repr or log line shows it; either must be at least 16 characters.
    """

    listen: str
    upstream: str
    #: Requests in flight upstream at most; ``None``: no limit until the controller sets one.
    max_inflight: int | None = Field(default=None, ge=1, le=65_536)
    #: Requests waiting behind the limit at most; 0 answers 503 as soon as the limit is reached.
    max_queue: int = Field(default=1024, ge=0, le=1_000_000)
    queue_timeout: PositiveDuration = 30.0
    admin_listen: str = "127.0.0.1:8081"
    admin_token: SecretStr | None = None
    admin_token_file: str | None = None
    #: Largest request body accepted on any path; larger ones get 413 before they take a slot.
    max_body: ByteSize = Field(default=10 * 1024**2, ge=1024, le=1024**3)
    #: Seconds of the upstream's clock per wall second: 1 for a real vLLM; ``fleetslo demo``'s
    #: sim-servers run K× faster than the wall, and latencies measured in wall seconds would be K×
    #: smaller than the simulated ones on their pages and than the SLO targets (one clock for all).
    time_scale: float = Field(default=1.0, gt=0, le=1000)
    #: A connection must send a whole request within this long of opening (or of its previous
    #: answer), else it is closed: slow or idle clients cannot hold the port (aiohttp's own
    #: default is an hour).
    header_timeout: PositiveDuration = 15.0
    #: A request body must arrive within this long, else 408.
    body_timeout: PositiveDuration = 30.0
    #: Bodies held at once (being read, or waiting in the queue) at most, by count and by bytes;
    #: past either, 503 ``busy``. The count is above the default queue (1024) so a full queue of
    #: small requests is never refused for it; the bytes bound keeps the sidecar inside its
    #: memory limit.
    max_pending_bodies: int = Field(default=2048, ge=1, le=100_000)
    max_pending_bytes: ByteSize = Field(default=128 * 1024**2, ge=1024**2, le=64 * 1024**3)
    #: The served model name, for the ``model_name`` label before the first scrape names it.
    served_model_name: str | None = None

    @field_validator("upstream")
    @classmethod
    def _check_upstream(cls, value: str) -> str:
        return http_url(value)

    @field_validator("listen", "admin_listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("admin_token")
    @classmethod
    def _check_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value():
            problem = token_problem(value.get_secret_value())
            if problem:
                raise ValueError(f"the admin token is {problem}")
        return value

    @field_validator("queue_timeout")
    @classmethod
    def _check_queue_timeout(cls, value: float) -> float:
        if value > 3600:
            raise ValueError(f"must be at most 1h (got {value:g}s)")
        return value
