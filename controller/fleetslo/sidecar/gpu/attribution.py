"""Which GPUs belong to this vLLM replica: ``--gpus``, the visible-devices variables, or all.

The sidecar sees every GPU of the node (sysfs is not namespaced), but a replica uses only some.
The selection comes, in order of precedence, from ``--gpus`` (``all`` for a node-level exporter,
or indices / UUIDs / PCI addresses), from the visible-devices variables the replica was given,
from the kubelet PodResources API (see ``podresources``), and else it is every GPU.

ROCm applies ``ROCR_VISIBLE_DEVICES`` first (physical devices) and then ``HIP_VISIBLE_DEVICES``
(positions within those); ``CUDA_VISIBLE_DEVICES`` is HIP's alias on ROCm and the physical list
on NVIDIA. An entry may be an index or a UUID (``GPU-8d1457e2c20f59d2``). A variable that is set
but empty hides every GPU, as it does for the runtime.

Pure: values come in as arguments (``cli.py`` reads the environment), nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fleetslo.core.model import GpuSample

_SHORT_BDF = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """A set of GPUs by index and by identity (UUID or PCI address), or every GPU."""

    everything: bool = False
    indices: frozenset[int] = frozenset()
    ids: frozenset[str] = frozenset()
    #: Where the selection came from, for the start-up log line.
    source: str = "default"

    def matches(self, sample: GpuSample) -> bool:
        if self.everything or sample.index in self.indices:
            return True
        return any(normalize_id(x) in self.ids for x in (sample.uuid, sample.pci_bus_id) if x)

    def describe(self) -> str:
        if self.everything:
            return f"all GPUs ({self.source})"
        chosen = [str(i) for i in sorted(self.indices)] + sorted(self.ids)
        return f"GPUs {','.join(chosen) or '(none)'} ({self.source})"


ALL = GpuSelection(everything=True)


def normalize_id(raw: str) -> str:
    """Compare UUIDs and PCI addresses as the tools print them: ``GPU-``/``0x`` off, lower case."""
    value = raw.strip().lower().removeprefix("gpu-").removeprefix("0x")
    return f"0000:{value}" if _SHORT_BDF.match(value) else value


def tokens(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def from_tokens(items: Iterable[str], source: str) -> GpuSelection:
    """Indices for numeric entries, identities for the rest; ``-1`` (CUDA's "none") selects nothing."""
    indices, ids = set(), set()
    for item in items:
        if item.lstrip("-").isdigit():
            if int(item) >= 0:
                indices.add(int(item))
        else:
            ids.add(normalize_id(item))
    return GpuSelection(indices=frozenset(indices), ids=frozenset(ids), source=source)


def parse_gpus(text: str) -> GpuSelection:
    """The ``--gpus`` flag: ``all``, or a comma-separated list of indices, UUIDs or PCI addresses."""
    if text.strip().lower() == "all":
        return GpuSelection(everything=True, source="--gpus all")
    return from_tokens(tokens(text), "--gpus")


def from_environment(rocr: str | None, hip: str | None, cuda: str | None) -> GpuSelection | None:
    """The GPUs a runtime given these variables would use; ``None`` when none is set."""
    logical_name, logical = (
        ("HIP_VISIBLE_DEVICES", hip) if hip is not None else ("CUDA_VISIBLE_DEVICES", cuda)
    )
    if rocr is None:
        return None if logical is None else from_tokens(tokens(logical), logical_name)
    physical = tokens(rocr)
    if logical is None:
        return from_tokens(physical, "ROCR_VISIBLE_DEVICES")
    return from_tokens(_compose(physical, tokens(logical)), f"ROCR_VISIBLE_DEVICES+{logical_name}")


def _compose(physical: Sequence[str], logical: Sequence[str]) -> list[str]:
    """Logical entries are positions in the physical list; a position past its end selects nothing."""
    out = []
    for item in logical:
        if item.isdigit():
            if int(item) < len(physical):
                out.append(physical[int(item)])
        else:
            out.append(item)
    return out


def resolve(
    gpus: str | None, rocr: str | None = None, hip: str | None = None, cuda: str | None = None
) -> GpuSelection | None:
    """``--gpus`` if given, else the environment, else ``None`` (ask PodResources, then take all)."""
    if gpus is not None and gpus.strip():
        return parse_gpus(gpus)
    return from_environment(rocr, hip, cuda)


def select(samples: Iterable[GpuSample], selection: GpuSelection) -> list[GpuSample]:
    return [s for s in samples if selection.matches(s)]
