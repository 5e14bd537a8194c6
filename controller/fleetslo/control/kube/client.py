"""The Kubernetes API client: how to connect, and what its failures mean for the control loop.

``connect`` builds an ``ApiClient`` from the in-cluster service account or a kubeconfig (the official
``kubernetes`` client reads those itself). ``api_call`` translates every library failure into the
fleetslo error tree, chained with ``from``, so nothing above ``fleetslo.control.kube`` catches a library
exception: 401/403 → ``Forbidden``, 404 → ``NotFound``, 400/422 → ``Invalid`` (permanent: a person
must act); 409 → ``Conflict``, 429 → ``RateLimited``, 5xx and network errors → ``ApiUnavailable``
(transient: the loop retries with back-off).

Every call takes its timeout from ``api_call`` (``with api_call(what) as timeout``): the per-call
``REQUEST_TIMEOUT``, bounded by the reconcile's API budget (``fleetslo.control.deadline``). The
client makes **no retries of its own** (urllib3's default of three would turn one hung call into
four time-outs); the loop's back-off is the one retry policy. ``REACHABILITY`` remembers whether
the last call reached an API server that answered, for the controller's ``/readyz``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from fleetslo.control.deadline import DeadlineExceeded, call_timeout
from fleetslo.control.settings import InCluster, KubernetesSettings
from fleetslo.core.errors import (
    ApiUnavailable,
    ConfigError,
    Conflict,
    FleetSLOError,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
)

#: Seconds one API call may take before it counts as unavailable.
REQUEST_TIMEOUT = 10.0
#: API error messages are cut here: a full Status with a traceback is no log line.
_MESSAGE_MAX = 256


class Reachability:
    """Whether the last API call got an answer (any status) rather than a time-out or no connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reachable: bool | None = None  # None: no call made yet
        self.last_error = ""

    def record(self, error: BaseException | None) -> None:
        unreachable = isinstance(error, ApiUnavailable | DeadlineExceeded)
        with self._lock:
            self._reachable = not unreachable
            self.last_error = str(error) if unreachable else ""

    def reachable(self) -> bool | None:
        with self._lock:
            return self._reachable


#: The process's view of its API server (one per process: every client here talks to the same one).
REACHABILITY = Reachability()


def connect(settings: KubernetesSettings, *, in_pod: bool) -> client.ApiClient:
    """An API client for the configured cluster; ``in_pod`` tells ``auto`` where it runs."""
    configuration = client.Configuration()
    use_cluster = settings.in_cluster == InCluster.TRUE or (settings.in_cluster == InCluster.AUTO and in_pod)
    try:
        if use_cluster:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=settings.kubeconfig, context=settings.context, client_configuration=configuration
            )
    except (config.ConfigException, OSError) as exc:
        where = (
            "in-cluster service account"
            if use_cluster
            else f"kubeconfig {settings.kubeconfig or '(default)'}"
        )
        raise ConfigError(f"kubernetes: cannot load the {where}: {exc}") from exc
    configuration.retries = 0  # the loop retries, with back-off, inside its API budget
    return client.ApiClient(configuration)


def client_for(url: str) -> client.ApiClient:
    """An API client for a plain-HTTP test server (kmock) at ``url``."""
    configuration = client.Configuration()
    configuration.host = url.rstrip("/")
    configuration.retries = 0
    return client.ApiClient(configuration)


@contextmanager
def api_call(what: str) -> Iterator[float]:
    """Run one API call with the timeout it yields; a library failure leaves as a classified
    fleetslo error about ``what``. Refused without a request when the reconcile's budget is spent."""
    try:
        with call_timeout(REQUEST_TIMEOUT, what) as timeout:
            try:
                yield timeout
            except ApiException as exc:
                raise classify(exc, what) from exc
            except urllib3.exceptions.HTTPError as exc:
                raise ApiUnavailable(f"{what}: {type(exc).__name__}: {exc}") from exc
    except FleetSLOError as exc:
        REACHABILITY.record(exc)
        raise
    REACHABILITY.record(None)


def classify(exc: ApiException, what: str) -> FleetSLOError:
    """The fleetslo error for an ``ApiException`` (see the module docstring)."""
    status = int(exc.status or 0)
    message = f"{what}: HTTP {status} {exc.reason or ''}: {_status_message(exc.body)}".strip()
    if status in (401, 403):
        return Forbidden(message)
    if status == 404:
        return NotFound(message)
    if status == 409:
        return Conflict(message)
    if status == 429:
        return RateLimited(message, _retry_after(exc))
    if status == 0 or status >= 500:
        return ApiUnavailable(message)
    return Invalid(message)


def _status_message(body: object) -> str:
    """The ``message`` of a ``Status`` body, else the body itself, truncated."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:_MESSAGE_MAX]
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        return str(parsed["message"])[:_MESSAGE_MAX]
    return text[:_MESSAGE_MAX]


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return None if value is None else float(value)
    except ValueError:
        return None
