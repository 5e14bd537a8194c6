"""Settings of ``fleetslo run``: the controller's own configuration file (not the FleetSLO specs).

One frozen group per concern (kopf-style), each field documented with its unit and default, checked
once at load with messages that name the key, the value and the allowed range. The file::

    listen: 0.0.0.0:9500          # /healthz, /readyz, /metrics
    interval: 5s                  # scheduler tick; each policy still decides at its own interval
    policy: fleetslo              # the policy every FleetSLO is held by
    policy_options: {headroom: 0.1}   # its tunables (fleetslo: controller/fleetslo/policy/fleetslo/config.py)
    dry_run: false                # true: advisory for every target (as mode: advisory in a spec)
    source:
      kind: prometheus            # or: direct (scrape the sidecars of the target's pods)
      prometheus: {url: http://prometheus:9090, bearer_token_file: ..., ca_file: ..., max_age: 1m}
      direct: {port: 9400, timeout: 2s}
    kubernetes: {in_cluster: auto, kubeconfig: ..., context: ..., api_budget: 20s}
    leader_election: {enabled: true, namespace: fleetslo, name: fleetslo-controller}
    engine_args: {container: vllm, min_interval: 30m, lasting: 10m}
    gate: {admin_port: 8081, token_file: /var/run/fleetslo/gate-token, drain_timeout: 60s, drain_ttl: 30s}
    drain: {enabled: true}
    resources: {enabled: true, namespaces: [llm], resync: 30s, conflict_check: true}   # FleetSLO resources
    state: {file: /var/lib/fleetslo/state.json, history_days: 14}   # learned state, forecast bootstrap
    backoff: [1s, 2s, 5s, 10s, 30s, 1m]
    permanent_retry: 10m
    otlp_endpoint: http://otel-collector:4318

Files and the environment are read by ``cli.py``; this module validates what it was given.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from fleetslo.core.config import PositiveDuration, http_url, parse_listen

#: A Kubernetes object name or namespace (RFC 1123 subdomain, as the API checks it).
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _durations(value: object) -> object:
    return [p for p in value.split(",") if p.strip()] if isinstance(value, str) else value


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PrometheusSettings(_Group):
    """Where and how to query a Prometheus-compatible API (Prometheus, Thanos, Mimir, VictoriaMetrics)."""

    #: Base URL; ``/api/v1/query`` is appended (Mimir: include its prefix, e.g. ``/prometheus``).
    url: str = "http://prometheus-operated.monitoring:9090"
    #: File holding a bearer token (read at every query, so a rotated token is picked up).
    bearer_token_file: str | None = None
    #: CA bundle for an https URL; ``None``: the system's.
    ca_file: str | None = None
    #: Skip TLS verification (test clusters only).
    insecure_skip_verify: bool = False
    #: Timeout of one query.
    timeout: PositiveDuration = 5.0
    #: Data older than this counts as stale, and a pod without a sample this fresh is not reporting.
    max_age: PositiveDuration = 60.0
    #: Label carrying the pod's namespace on scraped series (``None``: do not filter by namespace).
    namespace_label: str | None = "namespace"
    #: Label naming the replica on scraped series; pods are also matched by the target's name pattern.
    pod_label: str | None = "pod"
    #: Extra matchers added to every selector, e.g. ``cluster="eu-1"`` for a multi-cluster Thanos.
    extra_matchers: str = ""

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return http_url(value)


class DirectSettings(_Group):
    """Scrape each pod's fleetslo sidecar instead of querying Prometheus."""

    #: The sidecar's port (``fleetslo exporter --listen``).
    port: int = Field(default=9400, ge=1, le=65535)
    scheme: str = Field(default="http", pattern="^https?$")
    #: Timeout of one pod's scrape.
    timeout: PositiveDuration = 2.0
    #: Also read GPU utilization from the sidecar's ``/metrics`` (one more request per pod).
    gpu_utilization: bool = True


class SourceKind(StrEnum):
    PROMETHEUS = "prometheus"
    DIRECT = "direct"


class SourceSettings(_Group):
    kind: SourceKind = SourceKind.PROMETHEUS
    prometheus: PrometheusSettings = PrometheusSettings()
    direct: DirectSettings = DirectSettings()


class InCluster(StrEnum):
    AUTO = "auto"
    TRUE = "true"
    FALSE = "false"


class KubernetesSettings(_Group):
    """How to reach the Kubernetes API."""

    #: ``auto``: the in-cluster service account when running in a pod, else the kubeconfig.
    in_cluster: InCluster = InCluster.AUTO
    kubeconfig: str | None = None
    context: str | None = None
    #: Shown as the ``source.component`` of the Events fleetslo writes.
    component: str = "fleetslo-controller"
    #: Kubernetes API time one reconcile may spend across all its calls (each call: at most 10 s).
    #: A hung API server fails the tick after this long, well inside the liveness limit.
    api_budget: PositiveDuration = 20.0

    @field_validator("in_cluster", mode="before")
    @classmethod
    def _bool_ok(cls, value: object) -> object:
        return str(value).lower() if isinstance(value, bool) else value


class LeaderElectionSettings(_Group):
    """Lease-based leader election (client-go defaults): only the leader actuates."""

    enabled: bool = True
    namespace: str = "default"
    name: str = "fleetslo-controller"
    #: Who we are in the Lease (``cli.py`` fills it from the pod name or the host name).
    identity: str | None = None
    #: A follower takes over at most this long after the leader's last renewal.
    lease_duration: PositiveDuration = 15.0
    #: A leader that could not renew for this long steps down (before anyone may take over).
    renew_deadline: PositiveDuration = 10.0
    #: How often the Lease is tried (followers) or renewed (the leader).
    retry_period: PositiveDuration = 2.0

    @field_validator("namespace", "name")
    @classmethod
    def _k8s_name(cls, value: str) -> str:
        if not _K8S_NAME.match(value) or len(value) > 253:
            raise ValueError(f"expected a Kubernetes name (lowercase, digits, '-', '.') (got {value!r})")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionSettings:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"need retry_period ({self.retry_period:g}s) < renew_deadline ({self.renew_deadline:g}s)"
                f" < lease_duration ({self.lease_duration:g}s)"
            )
        return self


class EngineArgsSettings(_Group):
    """The engine-args batch-limit actuator: ``--max-num-seqs`` in the pod template (a rollout)."""

    #: The vLLM container's name; ``None``: the one whose command or args mention ``vllm``.
    container: str | None = None
    #: At most one rollout per target in this long.
    min_interval: PositiveDuration = 1800.0
    #: A change must be wanted (in the same direction) for this long before it is rolled out.
    lasting: PositiveDuration = 600.0
    #: Changes smaller than this share of the current value are not worth a rollout.
    min_change: float = Field(default=0.1, ge=0, lt=1)


class GateClientSettings(_Group):
    """The sidecar gate's admin API: live batch limit and drain (``batch_limit.actuator: gate``)."""

    admin_port: int = Field(default=8081, ge=1, le=65535)
    #: File holding the admin bearer token (``cli.py`` reads it; a Secret mounted in the pod).
    token_file: str | None = None
    #: Timeout of one admin call.
    timeout: PositiveDuration = 2.0
    #: How long a drain may wait for in-flight requests before scaling down by what drained.
    drain_timeout: PositiveDuration = 60.0
    #: A drain the controller started ends by itself this long after its last renewal (every poll
    #: while waiting), so a controller killed mid-drain leaves no gate refusing requests for ever.
    drain_ttl: PositiveDuration = 30.0


class DrainSettings(_Group):
    """Drain replicas (stop admission, let requests finish) before removing them."""

    enabled: bool = True
    #: Annotate drained pods of a Deployment with this ``controller.kubernetes.io/pod-deletion-cost``.
    deletion_cost: int = -1000


class ResourceSettings(_Group):
    """FleetSLO custom resources (``fleetslo.io/v1alpha1``): read them, hold them, write their status."""

    enabled: bool = False
    #: Where to look (empty: every namespace, which needs cluster-wide RBAC: the chart's rbac.clusterWide).
    namespaces: list[str] = []
    #: How often the resources are listed again; a changed set of specs restarts the targets.
    resync: PositiveDuration = 30.0
    #: Refuse to enforce on a workload an HPA or KEDA ScaledObject already scales (advisory, Conflict).
    conflict_check: bool = True


class StateSettings(_Group):
    """What survives a restart: each policy's learned state, and the load history read at start."""

    enabled: bool = True
    #: The state file for targets without a FleetSLO resource (Static, Local, file specs); a
    #: resource's state goes into its status. ``None``: ``fleetslo run`` puts it next to the
    #: controller's config file (``fleetslo-state.json``), else next to the ``--slo`` file.
    file: str | None = None
    #: Days of the target's load read from Prometheus at start for the seasonal forecast (0: none).
    #: At most 30: the forecast keeps 15 days, and one range query answers at most 11,000 points
    #: (38 days of 5-minute steps).
    history_days: float = Field(default=14.0, ge=0, le=30)


BackoffList = Annotated[list[PositiveDuration], BeforeValidator(_durations)]


class ControllerSettings(_Group):
    """Everything ``fleetslo run`` needs besides the FleetSLO specs."""

    listen: str = "0.0.0.0:9500"
    #: The scheduler's tick; a policy decides every ``policy.interval`` seconds at the earliest.
    interval: PositiveDuration = 5.0
    policy: str = "fleetslo"
    #: Tunables of that policy, e.g. ``{headroom: 0.2}`` for fleetslo: the headroom-versus-violation
    #: trade is the operator's (``controller/fleetslo/policy/fleetslo/config.py`` lists and explains them).
    policy_options: dict[str, float | int | bool | str] = {}
    dry_run: bool = False
    source: SourceSettings = SourceSettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    engine_args: EngineArgsSettings = EngineArgsSettings()
    gate: GateClientSettings = GateClientSettings()
    drain: DrainSettings = DrainSettings()
    resources: ResourceSettings = ResourceSettings()
    state: StateSettings = StateSettings()
    #: Delays after consecutive transient failures of one target; the last one repeats.
    backoff: BackoffList = [1.0, 2.0, 5.0, 10.0, 30.0, 60.0]
    #: After a permanent failure (RBAC, missing object, bad query), try that target again this late.
    permanent_retry: PositiveDuration = 600.0
    otlp_endpoint: str | None = None

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("otlp_endpoint")
    @classmethod
    def _check_otlp(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, value: float) -> float:
        if not 0.1 <= value <= 600:
            raise ValueError(f"must be between 100ms and 10m (got {value:g}s)")
        return value

    @model_validator(mode="after")
    def _drain_outlives_the_write(self) -> ControllerSettings:
        # After the last renewal comes the scale write (at most the API budget): a drain that
        # expired before it lands would let requests onto a replica that is being removed.
        if self.gate.drain_ttl <= self.kubernetes.api_budget:
            raise ValueError(
                f"gate.drain_ttl ({self.gate.drain_ttl:g}s) must be longer than kubernetes.api_budget "
                f"({self.kubernetes.api_budget:g}s): the drain must outlast the scale write after it"
            )
        return self

    @field_validator("backoff")
    @classmethod
    def _check_backoff(cls, value: list[float]) -> list[float]:
        if not value:
            raise ValueError("at least one delay is needed")
        return value
