"""The GPU dashboard: utilization, memory, power, temperatures, clocks and ECC errors per node,
replica (sidecar instance) and GPU, from the sidecar's vendor-neutral ``fleetslo_gpu_*`` series.

Legends read ``{{node}} {{instance}} gpu {{gpu}}``: ``node`` appears when the scrape config adds
it (Kubernetes SD), ``instance`` is the replica's sidecar, ``gpu`` the node-local index.
"""

from __future__ import annotations

from grafanalib import core as g

from fleetslo.core import conventions as cv
from fleetslo.generate.dashboards.panels import (
    Layout,
    Q,
    dashboard,
    datasource_variable,
    query_variable,
    stat,
    table,
    timeseries,
)

UID = "fleetslo-gpu"
SEL = '{namespace=~"$namespace", node=~"$node", instance=~"$instance", gpu=~"$gpu"}'
WHO = "{{node}} {{instance}} gpu {{gpu}}"


def variables() -> list[g.Template]:
    return [
        datasource_variable(),
        query_variable("namespace", "Namespace", f"label_values({cv.GPU_INFO}, namespace)"),
        query_variable("node", "Node", f'label_values({cv.GPU_INFO}{{namespace=~"$namespace"}}, node)'),
        query_variable("instance", "Replica", f'label_values({cv.GPU_INFO}{{node=~"$node"}}, instance)'),
        query_variable("gpu", "GPU", f'label_values({cv.GPU_INFO}{{instance=~"$instance"}}, gpu)'),
    ]


def sel(extra: str = "") -> str:
    return SEL[:-1] + (f", {extra}" if extra else "") + "}"


UNCORRECTABLE = sel(f'{cv.LABEL_SEVERITY}="uncorrectable"')


def overview(layout: Layout) -> None:
    layout.row("Overview")
    layout.add(
        stat(
            "GPUs reporting",
            "GPUs the selected sidecars read now.",
            [Q(f"count({cv.GPU_INFO}{sel()})")],
            "none",
            [("blue", None)],
        ),
        w=4,
        h=5,
    )
    layout.add(
        stat(
            "Collectors down",
            "Sidecars whose GPU telemetry failed or went stale.",
            [
                Q(
                    f'count({cv.GPU_COLLECTOR_UP}{{namespace=~"$namespace", instance=~"$instance"}} == 0) '
                    "or vector(0)"
                )
            ],
            "none",
            [("green", None), ("red", 1)],
        ),
        w=4,
        h=5,
    )
    layout.add(
        stat(
            "Uncorrectable ECC (24h)",
            "Uncorrectable ECC errors over the last day: any is a page.",
            [Q(f"sum(increase({cv.GPU_ECC_ERRORS}_total{UNCORRECTABLE}[24h])) or vector(0)")],
            "none",
            [("green", None), ("red", 1)],
        ),
        w=4,
        h=5,
    )
    layout.add(
        table(
            "GPU inventory",
            "Each GPU the sidecars report: identity, driver and partitioning.",
            [Q(f"{cv.GPU_INFO}{sel()}", instant=True)],
        ),
        w=12,
        h=5,
    )


def activity(layout: Layout) -> None:
    layout.row("Activity")
    layout.add(
        timeseries(
            "Utilization",
            "Share of time the compute engines were busy.",
            [Q(f"{cv.GPU_UTILIZATION}{sel()}", WHO)],
            "percentunit",
            valueMax=1,
        )
    )
    layout.add(
        timeseries(
            "Memory bandwidth utilization",
            "Share of time the memory controller was busy.",
            [Q(f"{cv.GPU_MEMORY_BANDWIDTH_UTILIZATION}{sel()}", WHO)],
            "percentunit",
        )
    )
    layout.add(
        timeseries(
            "Memory used",
            "VRAM in use, and the VRAM size (dashed).",
            [
                Q(f"{cv.GPU_MEMORY_USED}{sel()}", WHO),
                Q(f"{cv.GPU_MEMORY_TOTAL}{sel()}", f"{WHO} limit"),
            ],
            "bytes",
        )
    )
    layout.add(
        timeseries(
            "Memory used share",
            "VRAM in use over VRAM size.",
            [Q(f"{cv.GPU_MEMORY_USED}{sel()} / {cv.GPU_MEMORY_TOTAL}{sel()}", WHO)],
            "percentunit",
            valueMax=1,
        )
    )


def power_and_heat(layout: Layout) -> None:
    layout.row("Power, heat and clocks")
    layout.add(
        timeseries(
            "Power",
            "Power drawn, and the power cap (dashed); a GPU at its cap is throttled.",
            [
                Q(f"{cv.GPU_POWER}{sel()}", WHO),
                Q(f"{cv.GPU_POWER_LIMIT}{sel()}", f"{WHO} limit"),
            ],
            "watt",
        )
    )
    layout.add(
        timeseries(
            "Temperatures",
            "Every sensor the backend reads: edge, junction (hotspot), memory (HBM) on AMD, gpu on NVIDIA.",
            [Q(f"{cv.GPU_TEMPERATURE}{sel()}", f"{WHO} {{{{sensor}}}}")],
            "celsius",
        )
    )
    layout.add(
        timeseries(
            "Clocks",
            "Graphics and memory clocks.",
            [Q(f"{cv.GPU_CLOCK}{sel()}", f"{WHO} {{{{clock}}}}")],
            "hertz",
        )
    )
    layout.add(
        timeseries(
            "Energy",
            "Average power over the interval, from the energy counter.",
            [Q(f"rate({cv.GPU_ENERGY}_total{sel()}[$__rate_interval])", WHO)],
            "watt",
        )
    )


def errors(layout: Layout) -> None:
    layout.row("Errors and the collector")
    layout.add(
        timeseries(
            "ECC errors",
            "ECC errors per interval by severity (correctable, uncorrectable, deferred).",
            [Q(f"increase({cv.GPU_ECC_ERRORS}_total{sel()}[$__rate_interval])", f"{WHO} {{{{severity}}}}")],
            "none",
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "Collector errors",
            "Failed GPU reads per second, by backend and reason.",
            [
                Q(
                    f"sum by (instance, backend, reason) (rate({cv.GPU_COLLECTOR_ERRORS}_total"
                    f'{{namespace=~"$namespace", instance=~"$instance"}}[$__rate_interval]))',
                    "{{instance}} {{backend}} {{reason}}",
                )
            ],
            "ops",
        ),
        w=8,
    )
    layout.add(
        timeseries(
            "Read duration",
            "Time one read of all GPUs took.",
            [
                Q(
                    f'{cv.GPU_SAMPLE_DURATION}{{namespace=~"$namespace", instance=~"$instance"}}',
                    "{{instance}}",
                )
            ],
            "s",
        ),
        w=8,
    )


def build() -> g.Dashboard:
    layout = Layout()
    for row in (overview, activity, power_and_heat, errors):
        row(layout)
    return dashboard(
        "fleetslo / GPUs",
        UID,
        "Vendor-neutral GPU telemetry from the fleetslo sidecars "
        "(amdsmi, amd-smi, sysfs, rocm-smi, NVML) per node, replica and GPU.",
        variables(),
        layout,
    )
