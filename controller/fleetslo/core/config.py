"""Parsing and validation primitives shared by every settings root and by the FleetSLO spec.

Durations (``"50ms"``, ``"5m"``), sizes (``"10MiB"``), URLs and listen addresses are parsed here once;
``load`` validates already-read data into a frozen pydantic model and turns pydantic's errors into a
``ConfigError`` naming the key, the value and the rule. Reading files and the environment is the
CLI's job; this module never does I/O, so the pure policy may use its types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

from fleetslo.core.errors import ConfigError

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


def parse_duration_list(value: object) -> object:
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


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
    if any(word in key.lower() for word in ("token", "secret", "password")):
        return f"{key}: {message}"  # never echo a credential, even a bad one
    if "(got " in message:  # the validator already quoted the value
        return f"{key}: {message}"
    return f"{key}: {message} (got {error.get('input')!r})"
