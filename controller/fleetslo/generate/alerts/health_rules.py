"""Fleet-wide health alerts that need no spec: engines, sidecars, vLLM saturation, GPUs, leader.

Thresholds are data (``GPU_TEMPERATURE_LIMITS`` and the constants below), set to common community
defaults rather than vendor limits; tune them per SKU. Every alert reads names from
``conventions`` and vLLM series under any of their stored names (``promql``).

Generation only: returns a ``Group``.
"""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.generate.alerts import promql as pq
from fleetslo.generate.alerts.rules import Alert, Group, Recording, Rule

M = cv.MODEL_LABEL
PAGE, TICKET = cv.SEVERITY_PAGE, cv.SEVERITY_TICKET
#: °C above which a sensor is "hot", by the sensor names the GPU backends report.
GPU_TEMPERATURE_LIMITS: dict[str, float] = {"junction": 100.0, "memory": 95.0, "edge": 90.0, "gpu": 85.0}
KV_CACHE_FULL = 0.95
POWER_AT_CAP = 0.98
ECC_CORRECTABLE_PER_HOUR = 100
#: How long a target counts as "one that served vLLM / a sidecar" after its last sample.
REMEMBER = "1h"
_MODEL = "{{ $labels.model_name }}"
_WHERE = "{{ $labels.instance }}"


def alert(name: cv.AlertName, expr: str, hold: str, severity: str, text: tuple[str, str, str]) -> Alert:
    summary, description, runbook = text
    return Alert(name, expr, hold, {cv.LABEL_SEVERITY: severity}, summary, description, runbook)


def recordings() -> list[Recording]:
    return [
        Recording(cv.RULE_VLLM_WAITING, pq.sum_by(M, pq.vllm_gauge(cv.Gauge.WAITING))),
        Recording(cv.RULE_VLLM_RUNNING, pq.sum_by(M, pq.vllm_gauge(cv.Gauge.RUNNING))),
    ]


def _down_target(seen: str) -> str:
    """``up == 0`` for targets that exposed ``seen`` (per job, instance, model) in the last hour.

    The many side (one per model) is on the left, so a target serving two models still matches.
    """
    return f"(\n  max by (job, instance, {M}) ({seen}) * 0\n)\n+ on (job, instance) group_left ()\n(up == 0)"


#: Longer than any cold start (weights, compilation, graph capture: 6 min on the reference model,
#: the chart's startup probe allows 20): a replica still not serving after this is stuck.
STUCK_STARTING = "30m"


def _model_named(expr: str) -> str:
    """``expr`` with an empty ``model_name`` (a sidecar that has not read vLLM yet) named so."""
    return f'label_replace(\n{pq.indent(expr)},\n  "{M}", "(unknown model)", "{M}", ""\n)'


def engine_down() -> str:
    """vLLM stopped answering a sidecar that had read it before: a replica lost, not one starting.

    ``fleetslo_engine_last_success_timestamp_seconds`` exists only once a scrape succeeded, so a
    replica in its cold start (minutes of weights and compilation) never pages here."""
    return _model_named(f"{cv.ENGINE_UP} == 0\nand on (job, instance)\n{cv.ENGINE_LAST_SUCCESS}")


def engine_starting() -> str:
    """vLLM has never answered this sidecar (alerts only after ``STUCK_STARTING``)."""
    return _model_named(f"{cv.ENGINE_UP} == 0\nunless on (job, instance)\n{cv.ENGINE_LAST_SUCCESS}")


def engine_alerts() -> list[Alert]:
    vllm_seen = pq.vllm_over_time("max_over_time", cv.Gauge.RUNNING, "", REMEMBER)
    sidecar_seen = f"max_over_time({cv.ENGINE_UP}[{REMEMBER}])"
    return [
        alert(
            cv.AlertName.VLLM_TARGET_DOWN,
            _down_target(vllm_seen),
            "2m",
            PAGE,
            (
                f"{_MODEL}: vLLM at {_WHERE} does not answer Prometheus",
                f"The vLLM server at {_WHERE} (job {{{{ $labels.job }}}}) served {_MODEL} within the last "
                "hour "
                "and has failed every scrape for 2 minutes.",
                "kubectl describe the pod: OOMKilled, a GPU fault (see the GPU dashboard) or a stuck engine "
                "core; restart it if /health does not answer.",
            ),
        ),
        alert(
            cv.AlertName.ENGINE_DOWN,
            engine_down(),
            "2m",
            PAGE,
            (
                f"{_MODEL}: the sidecar at {_WHERE} cannot scrape its vLLM server",
                f"fleetslo_engine_up is 0 for {_MODEL} at {_WHERE}: the vLLM server beside the sidecar "
                "served before and has not "
                "answered /metrics for 2 minutes (see fleetslo_engine_scrape_errors_total for the reason).",
                "Check the vLLM container's logs and restarts; the sidecar's /readyz names the last error.",
            ),
        ),
        alert(
            cv.AlertName.ENGINE_STUCK_STARTING,
            engine_starting(),
            STUCK_STARTING,
            TICKET,
            (
                f"{_MODEL}: the vLLM server at {_WHERE} has not served since its pod started",
                f"The sidecar at {_WHERE} has never read vLLM's /metrics since it started "
                f"{STUCK_STARTING} or more ago (fleetslo_engine_up {{{{ $value }}}}): "
                "longer than a cold start (weights, compilation) takes.",
                "kubectl describe the pod and read the vLLM container's log: a model download that "
                "stalls, too little GPU memory, or a startup probe that restarts it before it is ready.",
            ),
        ),
        alert(
            cv.AlertName.SIDECAR_DOWN,
            _down_target(sidecar_seen),
            "5m",
            TICKET,
            (
                f"{_MODEL}: the fleetslo sidecar at {_WHERE} is not scraped",
                f"The sidecar at {_WHERE} served fleetslo metrics within the last hour and has failed every "
                "scrape for 5 minutes; the controller sees this replica as missing.",
                "Check the sidecar container (crash loop, port, NetworkPolicy) and the ServiceMonitor.",
            ),
        ),
        alert(
            cv.AlertName.ENGINE_METRICS_STALE,
            f"time() - {cv.ENGINE_LAST_SUCCESS} > 120",
            "5m",
            TICKET,
            (
                f"the sidecar at {_WHERE} last read vLLM {{{{ $value | humanizeDuration }}}} ago",
                f"The sidecar at {_WHERE} is scraped but has not read vLLM successfully for "
                "{{ $value | humanizeDuration }}: its latency signals are frozen.",
                "Restart the sidecar; if it recurs, capture its logs (a stuck scrape loop is a bug).",
            ),
        ),
    ]


def saturation_alerts() -> list[Alert]:
    waiting, running = cv.RULE_VLLM_WAITING, cv.RULE_VLLM_RUNNING
    kv = pq.vllm_over_time("avg_over_time", cv.Gauge.KV_CACHE_USAGE, "", "5m")
    preempt = pq.vllm_rate(cv.Counter.PREEMPTIONS, "_total", "", "10m")
    rejected = pq.vllm_rate(cv.Counter.ADMISSION_REJECTIONS, "_total", "", "5m")
    return [
        alert(
            cv.AlertName.QUEUE_GROWING,
            f"{waiting} > {running}\nand\nderiv({waiting}[10m]) > 0",
            "10m",
            TICKET,
            (
                f"{_MODEL}: {{{{ $value }}}} requests waiting and the queue keeps growing",
                f"More requests of {_MODEL} wait than run, and the queue has grown for 10 minutes: the "
                "fleet is short of capacity.",
                "Check the controller scales up (fleet dashboard: replicas desired vs ready); if pinned at "
                "max, raise replicas.max or shed load.",
            ),
        ),
        alert(
            cv.AlertName.KV_CACHE_NEAR_FULL,
            f"max by (job, instance, {M}) ({kv}) > {KV_CACHE_FULL}",
            "10m",
            TICKET,
            (
                f"{_MODEL}: KV cache at {_WHERE} is {{{{ $value | humanizePercentage }}}} full",
                f"The KV cache of {_MODEL} at {_WHERE} averaged over {KV_CACHE_FULL:.0%} for 15 minutes: new "
                "requests wait for blocks and running ones get preempted.",
                "Lower the batch limit (max-num-seqs) or add replicas; long prompts may need a larger "
                "--gpu-memory-utilization or a smaller max-model-len.",
            ),
        ),
        alert(
            cv.AlertName.PREEMPTIONS,
            f"{pq.sum_by(M, preempt)} > 0",
            "15m",
            TICKET,
            (
                f"{_MODEL}: vLLM preempts {{{{ $value | humanize }}}} requests per second",
                f"vLLM has preempted running requests of {_MODEL} for 15 minutes (KV cache exhausted): "
                "preempted requests recompute and their latency suffers.",
                "Lower the batch limit or add replicas; see the KV-cache panel.",
            ),
        ),
        alert(
            cv.AlertName.VLLM_ADMISSION_REJECTIONS,
            f"sum by ({M}, reason) ({rejected}) > 0",
            "5m",
            TICKET,
            (
                f"{_MODEL}: vLLM rejects {{{{ $value | humanize }}}} requests/s ({{{{ $labels.reason }}}})",
                f"vLLM answers 503 to requests of {_MODEL} because its queue limit "
                f"({{{{ $labels.reason }}}}) "
                "is reached: clients see errors.",
                "Add replicas or raise --max-num-queued-reqs/--max-num-queued-tokens.",
            ),
        ),
        alert(
            cv.AlertName.GATE_REJECTIONS,
            f"sum by (job, instance, reason) (rate({cv.GATE_REJECTED}_total[5m])) > 0",
            "5m",
            TICKET,
            (
                f"the admission gate at {_WHERE} rejects {{{{ $value | humanize }}}} requests/s",
                f"The fleetslo gate at {_WHERE} turns requests away ({{{{ $labels.reason }}}}) for 5 "
                "minutes: "
                "clients see 503s.",
                "Check the gate's limit against the controller's batch limit and the queue settings.",
            ),
        ),
    ]


def _hot() -> str:
    name = cv.GPU_TEMPERATURE
    return "\nor\n".join(
        f'{name}{{{cv.LABEL_SENSOR}="{s}"}} > {c:g}' for s, c in GPU_TEMPERATURE_LIMITS.items()
    )


def gpu_alerts() -> list[Alert]:
    gpus = f"count by (job, instance) ({cv.GPU_INFO})"
    ecc = f"{cv.GPU_ECC_ERRORS}_total"
    return [
        alert(
            cv.AlertName.GPU_COLLECTOR_DOWN,
            f"{cv.GPU_COLLECTOR_UP} == 0",
            "5m",
            TICKET,
            (
                f"GPU telemetry at {_WHERE} is down ({{{{ $labels.backend }}}})",
                f"The sidecar at {_WHERE} has not read its GPUs for 5 minutes: power, temperature and ECC "
                "are "
                "unknown, and tokens per joule is missing.",
                "See fleetslo_gpu_collector_errors_total by reason; check the amd-smi/NVML access of the "
                "pod.",
            ),
        ),
        alert(
            cv.AlertName.GPU_LOST,
            f"{gpus}\n< max_over_time({gpus}[1h:1m])",
            "5m",
            TICKET,
            (
                f"{_WHERE} sees {{{{ $value }}}} GPUs, fewer than in the last hour",
                f"A GPU disappeared from the sidecar at {_WHERE} (fell off the bus, driver reset): its "
                "tensor-parallel group cannot serve.",
                "Check dmesg / amd-smi on the node and drain it for hardware service.",
            ),
        ),
        alert(
            cv.AlertName.GPU_TEMPERATURE_HIGH,
            _hot(),
            "10m",
            TICKET,
            (
                f"GPU {{{{ $labels.gpu }}}} at {_WHERE} is {{{{ $value }}}}°C ({{{{ $labels.sensor }}}})",
                f"The {{{{ $labels.sensor }}}} temperature of GPU {{{{ $labels.gpu }}}} at {_WHERE} "
                "stayed above its "
                "limit for 10 minutes; the GPU will throttle clocks and latency rises.",
                "Check the node's cooling and fan/airflow; compare with the other GPUs of the node.",
            ),
        ),
        alert(
            cv.AlertName.GPU_ECC_UNCORRECTABLE,
            f'increase({ecc}{{{cv.LABEL_SEVERITY}="uncorrectable"}}[10m]) > 0',
            "0s",
            PAGE,
            (
                f"GPU {{{{ $labels.gpu }}}} at {_WHERE} had uncorrectable ECC errors",
                f"{{{{ $value | humanize }}}} uncorrectable ECC errors on GPU {{{{ $labels.gpu }}}} "
                f"({{{{ $labels.uuid }}}}) at {_WHERE} in 10 minutes: its results can be wrong.",
                "Cordon and drain the node, then have the GPU checked (retired pages, RMA).",
            ),
        ),
        alert(
            cv.AlertName.GPU_ECC_CORRECTABLE,
            f'increase({ecc}{{{cv.LABEL_SEVERITY}="correctable"}}[1h]) > {ECC_CORRECTABLE_PER_HOUR}',
            "0s",
            TICKET,
            (
                f"GPU {{{{ $labels.gpu }}}} at {_WHERE}: {{{{ $value | humanize }}}} correctable ECC "
                "errors per hour",
                f"Correctable ECC errors on GPU {{{{ $labels.gpu }}}} at {_WHERE} are rising "
                f"(more than {ECC_CORRECTABLE_PER_HOUR} in an hour): often the forerunner of "
                "uncorrectable ones.",
                "Plan maintenance for the node; watch for the uncorrectable alert.",
            ),
        ),
        alert(
            cv.AlertName.GPU_POWER_THROTTLING,
            f"{cv.GPU_POWER} / {cv.GPU_POWER_LIMIT} > {POWER_AT_CAP}",
            "15m",
            TICKET,
            (
                f"GPU {{{{ $labels.gpu }}}} at {_WHERE} runs at its power cap",
                f"GPU {{{{ $labels.gpu }}}} at {_WHERE} drew {{{{ $value | humanizePercentage }}}} of its "
                "power limit "
                "for 15 minutes: clocks are held back by power.",
                "Expected at full load; if latency suffers, check the power cap (amd-smi/nvidia-smi) is the "
                "intended one.",
            ),
        ),
    ]


def leader_alerts() -> list[Alert]:
    leader = cv.CONTROLLER_LEADER
    expr = f"absent({leader} == 1)\nand on()\n(count(max_over_time({leader}[1d])) > 0)"
    return [
        alert(
            cv.AlertName.CONTROLLER_NO_LEADER,
            expr,
            "5m",
            PAGE,
            (
                "no fleetslo controller is leading",
                "A fleetslo controller ran within the last day but none holds the leader lease now: no "
                "target is scaled or limited.",
                "kubectl -n <controller namespace> get pods,lease; check the controller's logs for "
                "leader-election errors (RBAC on coordination.k8s.io leases).",
            ),
        ),
    ]


def health_group() -> Group:
    rules: list[Rule] = [
        *recordings(),
        *engine_alerts(),
        *saturation_alerts(),
        *gpu_alerts(),
        *leader_alerts(),
    ]
    notes = (
        "Fleet-wide health alerts; the same for every FleetSLO (generated by fleetslo alerts build).",
        "Thresholds are community defaults, not vendor limits: tune GPU temperatures per SKU.",
    )
    return Group(name="fleetslo-health", rules=tuple(rules), notes=notes)
