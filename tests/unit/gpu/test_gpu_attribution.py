"""Which GPUs belong to the replica: --gpus, visible-devices variables, and PodResources."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fleetslo.core.model import GpuSample
from fleetslo.sidecar.gpu.attribution import from_environment, parse_gpus, resolve, select
from fleetslo.sidecar.gpu.podresources import decode_list_response, grpc_list, pod_selection

from tests.unit.gpu.gpu_fakes import install_module

NODE = [
    GpuSample(i, uuid=f"{i:016x}", pci_bus_id=f"0000:{0x05 + 0x20 * i:02x}:00.0") for i in range(8)
]  # fmt: skip


def indices(selection: Any) -> list[int]:
    return [s.index for s in select(NODE, selection)]


def test_the_gpus_flag_takes_indices_uuids_pci_addresses_or_all() -> None:
    assert indices(parse_gpus("0,1,2,3")) == [0, 1, 2, 3]
    assert indices(parse_gpus("GPU-0000000000000005, 65:00.0")) == [3, 5]
    assert indices(parse_gpus("all")) == list(range(8))


def test_rocr_lists_physical_devices_and_hip_picks_positions_within_them() -> None:
    assert indices(from_environment(rocr="4,5,6,7", hip=None, cuda=None)) == [4, 5, 6, 7]
    assert indices(from_environment(rocr="4,5,6,7", hip="0,3", cuda=None)) == [4, 7]
    assert indices(from_environment(rocr="4,5", hip="0,9", cuda=None)) == [4]  # 9: no such position


def test_hip_or_cuda_alone_are_physical_indices_and_hip_wins() -> None:
    assert indices(from_environment(rocr=None, hip="2,3", cuda="0")) == [2, 3]
    assert indices(from_environment(rocr=None, hip=None, cuda="6")) == [6]
    assert indices(from_environment(rocr=None, hip=None, cuda="GPU-0000000000000001")) == [1]


def test_a_set_but_empty_variable_hides_every_gpu_and_an_unset_one_chooses_nothing() -> None:
    assert indices(from_environment(rocr=None, hip="", cuda=None)) == []
    assert indices(from_environment(rocr=None, hip=None, cuda="-1")) == []
    assert from_environment(rocr=None, hip=None, cuda=None) is None


def test_the_flag_wins_over_the_environment() -> None:
    assert indices(resolve("1", rocr=None, hip="2", cuda=None)) == [1]
    assert indices(resolve(None, rocr=None, hip="2", cuda=None)) == [2]
    assert resolve(None) is None


# --- PodResources -----------------------------------------------------------------------------


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (lengths here stay under 128)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def _pod(namespace: str, name: str, containers: list[tuple[str, str, list[str]]]) -> bytes:
    body = _field(1, name.encode()) + _field(2, namespace.encode())
    for container, resource, ids in containers:
        devices = _field(1, resource.encode()) + b"".join(_field(2, i.encode()) for i in ids)
        body += _field(3, _field(1, container.encode()) + _field(2, devices) + bytes([3 << 3, 7]))
    return _field(1, body)


RESPONSE = _pod("llm", "qwen-0", [("vllm", "amd.com/gpu", ["0000:05:00.0", "0000:25:00.0"]),
                                  ("sidecar", "example.com/nic", ["eth1"])]) + _pod(
    "llm", "qwen-1", [("vllm", "amd.com/gpu", ["0000:45:00.0"])]
)  # fmt: skip


def test_the_podresources_response_is_decoded_per_container_and_resource() -> None:
    decoded = decode_list_response(RESPONSE)
    assert [(c.pod, c.container, c.resource, c.device_ids) for c in decoded] == [
        ("qwen-0", "vllm", "amd.com/gpu", ("0000:05:00.0", "0000:25:00.0")),
        ("qwen-0", "sidecar", "example.com/nic", ("eth1",)),
        ("qwen-1", "vllm", "amd.com/gpu", ("0000:45:00.0",)),
    ]
    assert decode_list_response(RESPONSE[:-3]) is not None  # truncated input never raises


def test_the_pod_gets_the_gpus_the_kubelet_assigned_to_it(tmp_path: Path) -> None:
    socket = tmp_path / "kubelet.sock"
    socket.touch()
    selection, why = pod_selection(str(socket), "llm", "qwen-0", fetch=lambda _: RESPONSE)
    assert selection is not None, why
    assert indices(selection) == [0, 1]


def test_podresources_is_skipped_with_a_reason_when_it_cannot_answer(tmp_path: Path) -> None:
    assert pod_selection(str(tmp_path / "absent.sock"), "llm", "qwen-0") == (
        None, f"no PodResources socket at {tmp_path / 'absent.sock'}",
    )  # fmt: skip
    socket = tmp_path / "kubelet.sock"
    socket.touch()
    assert pod_selection(str(socket), None, "qwen-0")[0] is None
    assert "lists no GPU" in pod_selection(str(socket), "llm", "other", fetch=lambda _: RESPONSE)[1]

    def refused(_: str) -> bytes:
        raise ConnectionRefusedError("connection refused")

    assert "call failed" in pod_selection(str(socket), "llm", "qwen-0", fetch=refused)[1]


def test_grpc_list_calls_the_kubelet_method_over_the_unix_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Channel:
        def __enter__(self) -> Channel:
            return self

        def __exit__(self, *_: object) -> None:
            seen["closed"] = True

        def unary_unary(self, method: str, request_serializer: Any, response_deserializer: Any) -> Any:
            seen["method"], seen["request"] = method, request_serializer(None)
            return lambda request, timeout: response_deserializer(RESPONSE)

    def insecure_channel(target: str) -> Channel:
        seen["target"] = target
        return Channel()

    install_module(monkeypatch, "grpc", {"insecure_channel": insecure_channel})
    assert grpc_list("/run/kubelet.sock") == RESPONSE
    assert seen == {"target": "unix:///run/kubelet.sock", "method": "/v1.PodResourcesLister/List",
                    "request": b"", "closed": True}  # fmt: skip


def test_without_grpcio_the_lookup_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` now raises ModuleNotFoundError
    socket = tmp_path / "kubelet.sock"
    socket.touch()
    selection, why = pod_selection(str(socket), "llm", "qwen-0")
    assert selection is None
    assert "ModuleNotFoundError" in why
