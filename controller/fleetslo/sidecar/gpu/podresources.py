"""Optional: the GPUs the kubelet assigned to this pod, from its PodResources gRPC socket.

When ``/var/lib/kubelet/pod-resources/kubelet.sock`` is mounted into the sidecar, the kubelet's
``v1.PodResourcesLister/List`` says which device IDs of which resource (``amd.com/gpu``,
``nvidia.com/gpu``) each container of each pod holds: PCI addresses for AMD's device plugin,
UUIDs for NVIDIA's. Those become a ``GpuSelection`` for this pod (all its containers).

Everything about it is optional and skipped cleanly, with the reason returned for the log line:
no socket mounted, ``grpcio`` not installed, the call failing, the pod not listed. The response
is decoded by the small protobuf reader below (field numbers from kubelet's ``api.proto``), so
no generated stubs are needed.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from fleetslo.sidecar.gpu.attribution import GpuSelection, from_tokens

DEFAULT_SOCKET: Final = "/var/lib/kubelet/pod-resources/kubelet.sock"
GPU_RESOURCE_PREFIXES: Final = ("amd.com/", "nvidia.com/")
_METHOD: Final = "/v1.PodResourcesLister/List"


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


def pod_selection(
    socket: str | None, namespace: str | None, pod: str | None, fetch: Callable[[str], bytes] | None = None
) -> tuple[GpuSelection | None, str]:
    """This pod's GPUs, or ``None`` and why not. ``fetch`` (socket path -> response bytes) is injectable."""
    if not socket or not os.path.exists(socket):
        return None, f"no PodResources socket at {socket}"
    if not namespace or not pod:
        return None, "pod name/namespace unknown (set POD_NAME and POD_NAMESPACE via the downward API)"
    try:
        data = (fetch or grpc_list)(socket)
    except Exception as exc:  # grpc raises its own RpcError tree; any failure here only means "skip"
        return None, f"PodResources call failed ({type(exc).__name__}: {exc})"
    ids = [d for c in decode_list_response(data) if _ours(c, namespace, pod) for d in c.device_ids]
    if not ids:
        return None, f"PodResources lists no GPU for pod {namespace}/{pod}"
    return from_tokens(ids, "pod-resources"), f"PodResources: {len(ids)} GPU(s) for pod {namespace}/{pod}"


def _ours(c: ContainerDevices, namespace: str, pod: str) -> bool:
    return c.namespace == namespace and c.pod == pod and c.resource.startswith(GPU_RESOURCE_PREFIXES)


def grpc_list(socket: str, timeout: float = 2.0) -> bytes:
    """Call ``List`` over the unix socket with ``grpcio`` (raises ImportError when it is absent)."""
    grpc: Any = importlib.import_module("grpc")
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        call = channel.unary_unary(_METHOD, request_serializer=lambda _: b"", response_deserializer=bytes)
        return bytes(call(None, timeout=timeout))


# --- protobuf wire format: just enough for ListPodResourcesResponse --------------------------


def decode_list_response(data: bytes) -> list[ContainerDevices]:
    """``ListPodResourcesResponse{pod_resources=1}`` → one entry per (container, resource)."""
    out: list[ContainerDevices] = []
    for number, pod in _fields(data):
        if number == 1 and isinstance(pod, bytes):
            out.extend(_decode_pod(pod))
    return out


def _decode_pod(data: bytes) -> Iterator[ContainerDevices]:
    """``PodResources{name=1, namespace=2, containers=3}``."""
    fields = list(_fields(data))
    name, namespace = _string(fields, 1), _string(fields, 2)
    for number, container in fields:
        if number == 3 and isinstance(container, bytes):
            yield from _decode_container(namespace, name, container)


def _decode_container(namespace: str, pod: str, data: bytes) -> Iterator[ContainerDevices]:
    """``ContainerResources{name=1, devices=2}`` with ``ContainerDevices{resource_name=1, device_ids=2}``."""
    fields = list(_fields(data))
    container = _string(fields, 1)
    for number, devices in fields:
        if number == 2 and isinstance(devices, bytes):
            inner = list(_fields(devices))
            ids = tuple(v.decode("utf-8", "replace") for n, v in inner if n == 2 and isinstance(v, bytes))
            yield ContainerDevices(namespace, pod, container, _string(inner, 1), ids)


def _string(fields: list[tuple[int, bytes | int]], number: int) -> str:
    value = next((v for n, v in fields if n == number and isinstance(v, bytes)), b"")
    return value.decode("utf-8", "replace")


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) pairs; length-delimited values as bytes, others as ints. Stops at garbage."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                return
            yield number, data[pos : pos + length]
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            return


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return value, len(data) + 1  # truncated: position past the end stops the caller
