"""Typed, validated configuration: the FleetSLO spec and the settings of each command.

Everything a user can configure is checked here once, at load, and a bad value fails with the
key, the value and what is allowed (``ConfigError``). Below this module code receives validated,
frozen objects and never re-checks them. Reading files and the environment is ``cli.py``'s job;
this module turns already-read data into settings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from controller.errors import ConfigError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds from ``"50ms"``, ``"2s"``, ``"5m"``, ``"1h"``, ``"1d"`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 50ms, 2s, 5m")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNITS[match.group(2) or "s"]
    raise ValueError(f"expected a duration such as 50ms, 2s, 5m (got {value!r})")


def _parse_duration_list(value: object) -> object:
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------------------------
# FleetSLO spec (apiVersion fleetslo/v1, kind FleetSLO): the contract in DESIGN.md
# --------------------------------------------------------------------------------------------


class TargetKind(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    LEADERWORKERSET = "LeaderWorkerSet"


class Target(_Frozen):
    """The workload that serves one model and the name vLLM reports it under."""

    kind: TargetKind = TargetKind.DEPLOYMENT
    namespace: str = Field(default="default", min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253)
    model_name: str = Field(min_length=1)


class Objective(_Frozen):
    """``quantile`` of a latency must stay at or under ``threshold`` over ``window``.

    ``buckets`` are the latency histogram's bucket edges when vLLM runs with
    ``--custom-histogram-buckets`` (unset: vLLM's defaults). Alert rules count requests over the
    threshold from the bucket at the threshold, so they need to know which edges exist.
    """

    quantile: float = Field(default=0.9, gt=0, lt=1)
    threshold: PositiveDuration
    window: PositiveDuration = 60.0
    buckets: tuple[float, ...] | None = None

    @field_validator("buckets")
    @classmethod
    def _check_buckets(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must list at least one bucket edge (or be left out)")
        if any(b <= 0 for b in value) or any(b >= a for b, a in itertools.pairwise(value)):
            raise ValueError("edges must be positive and strictly increasing, as vLLM requires")
        return value


class Availability(_Frozen):
    """Optional: the share of requests that must finish without an error."""

    target: float = Field(gt=0, lt=1)


#: Bounds on the error-budget period: at least a day, at most a year.
PERIOD_MIN, PERIOD_MAX = 86_400.0, 366 * 86_400.0


class Objectives(_Frozen):
    """The latency objectives, and the period their error budget is counted over (default 28d)."""

    ttft: Objective
    tpot: Objective
    availability: Availability | None = None
    period: PositiveDuration = 28 * 86_400.0

    @field_validator("period")
    @classmethod
    def _check_period(cls, value: float) -> float:
        if not PERIOD_MIN <= value <= PERIOD_MAX:
            raise ValueError("must be between 1d and 366d")
        return value


class Replicas(_Frozen):
    """Bounds on the replica count, and how long a new replica takes to serve."""

    min: int = Field(default=1, ge=0, le=10_000)
    max: int = Field(ge=1, le=10_000)
    cold_start: PositiveDuration = 300.0

    @model_validator(mode="after")
    def _ordered(self) -> Replicas:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class BatchActuator(StrEnum):
    GATE = "gate"
    ENGINE_ARGS = "engine-args"
    NONE = "none"


class BatchLimit(_Frozen):
    """Bounds on the per-replica concurrent-sequence limit and how it is applied."""

    min: int = Field(default=1, ge=1, le=65_536)
    max: int = Field(default=256, ge=1, le=65_536)
    actuator: BatchActuator = BatchActuator.NONE

    @model_validator(mode="after")
    def _ordered(self) -> BatchLimit:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class Cost(_Frozen):
    per_replica_hour: float = Field(default=0.0, ge=0)
    gpus_per_replica: int = Field(default=1, ge=1, le=64)


class Mode(StrEnum):
    ENFORCE = "enforce"
    ADVISORY = "advisory"


class Metadata(_Frozen):
    name: str = Field(min_length=1, max_length=253)


class FleetSLOSpec(_Frozen):
    target: Target
    objectives: Objectives
    replicas: Replicas
    batch_limit: BatchLimit = BatchLimit()
    cost: Cost = Cost()
    mode: Mode = Mode.ENFORCE


class FleetSLO(_Frozen):
    """One scaled target and the latency objectives fleetslo holds it to."""

    api_version: Literal["fleetslo/v1"] = Field(alias="apiVersion")
    kind: Literal["FleetSLO"]
    metadata: Metadata
    spec: FleetSLOSpec


# --------------------------------------------------------------------------------------------
# The sidecar exporter
# --------------------------------------------------------------------------------------------


_HTTP_URL = re.compile(r"^https?://[^/\s?#]+(/\S*)?$")


def http_url(value: str) -> str:
    """``value`` without a trailing slash if it is an http(s) URL with a host; ``ValueError`` if not."""
    # A regex rather than urllib: the policy core imports this module and must stay free of
    # anything that can do I/O (import-linter forbids urllib wholesale).
    if not _HTTP_URL.match(value):
        raise ValueError(f"expected an http:// or https:// URL (got {value!r})")
    return value.rstrip("/")


def parse_listen(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9400`` for IPv6) into its parts; port 0 picks a free one."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port with a port 0-65535 (got {value!r})")
    return host.strip("[]") or "0.0.0.0", int(port)


class ExporterSettings(_Frozen):
    """``fleetslo exporter``: scrape one vLLM server and publish windowed latency signals."""

    vllm_url: str = "http://127.0.0.1:8000"
    listen: str = "0.0.0.0:9400"
    interval: PositiveDuration = 5.0
    timeout: PositiveDuration | None = None
    windows: Annotated[list[PositiveDuration], BeforeValidator(_parse_duration_list)] = [30.0, 60.0, 300.0]
    slo_ttft: PositiveDuration | None = None
    slo_tpot: PositiveDuration | None = None
    otlp_endpoint: str | None = None
    otlp_interval: PositiveDuration = 15.0

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


# --------------------------------------------------------------------------------------------
# The sidecar's admission gate (optional)
# --------------------------------------------------------------------------------------------

_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3,
               "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_size(value: object) -> int:
    """Bytes from ``"10MiB"``, ``"512KiB"``, ``"1GB"`` or a plain number of bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(value.lower()) if isinstance(value, str) else None
    if match and match.group(2) in _SIZE_UNITS:
        return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
    raise ValueError(f"expected a size such as 10MiB, 512KiB or 1000000 (got {value!r})")


ByteSize = Annotated[int, BeforeValidator(parse_size)]


class GateSettings(_Frozen):
    """``fleetslo exporter --gate-listen …``: the admission gate in front of vLLM.

    ``admin_token`` arrives already read from ``--admin-token-file`` (``cli.py`` reads files);
    ``None`` turns the admin API off. It is a ``SecretStr`` so no repr or log line shows it.
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
    #: Largest request body accepted on any path; larger ones get 413 before they take a slot.
    max_body: ByteSize = Field(default=10 * 1024**2, ge=1024, le=1024**3)

    @field_validator("upstream")
    @classmethod
    def _check_upstream(cls, value: str) -> str:
        return http_url(value)

    @field_validator("listen", "admin_listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("queue_timeout")
    @classmethod
    def _check_queue_timeout(cls, value: float) -> float:
        if value > 3600:
            raise ValueError(f"must be at most 1h (got {value:g}s)")
        return value


# --------------------------------------------------------------------------------------------
# Loading with errors people can act on
# --------------------------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def load(model: type[M], data: Mapping[str, Any], source: str = "config") -> M:
    """Validate ``data`` into ``model``; on failure a ``ConfigError`` naming key, value and rule."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: " + "; ".join(_describe(e) for e in exc.errors())) from None


def _describe(error: Mapping[str, Any]) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "(top level)"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] in ("missing",):
        return f"{key}: required"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key"
    return f"{key}: {message} (got {error.get('input')!r})"


def load_fleetslo_documents(documents: list[Any], source: str) -> list[FleetSLO]:
    """Every FleetSLO in a multi-document YAML file; names must be unique."""
    specs = []
    for i, doc in enumerate(d for d in documents if d is not None):
        if not isinstance(doc, Mapping):
            raise ConfigError(f"{source}: document {i} is not a mapping")
        specs.append(load(FleetSLO, doc, f"{source}[{i}]"))
    names = [s.metadata.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{source}: metadata.name must be unique (repeated: {', '.join(duplicates)})")
    if not specs:
        raise ConfigError(f"{source}: no FleetSLO document found")
    return specs
