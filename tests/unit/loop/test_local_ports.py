"""How the local fleet picks loopback ports for the processes it starts.

The reproduction of the CI failure (eda3171: "demo-0's sidecar ... ('127.0.0.1', 60891): address
already in use"): the kernel's own pick for a listener (``bind`` to port 0) comes from the
ephemeral range, the very range every outgoing connection takes its local port from, so between
the pick and the child's ``bind`` one of the demo's hundreds of connections a second can take it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest
from fleetslo.control.local import replica
from fleetslo.control.local.replica import LOOPBACK, ephemeral_range, free_port


def test_the_kernels_pick_and_outgoing_connections_share_one_range() -> None:
    """Why ``free_port`` does not take the kernel's pick: both land in the ephemeral range."""
    low, high = ephemeral_range()
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen(64)
        assert low <= listener.getsockname()[1] <= high
        clients = [socket.create_connection(listener.getsockname()) for _ in range(20)]
        try:
            assert all(low <= c.getsockname()[1] <= high for c in clients)
        finally:
            for c in clients:
                c.close()


def test_free_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    low, high = ephemeral_range()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= p < low or p > high for p in ports)
    for port in ports[:20]:
        with socket.socket() as s:
            s.bind((LOOPBACK, port))  # nobody listens there


class Scripted(random.Random):
    """A draw that returns the given ports first, then ordinary random ones."""

    def __init__(self, first: list[int]) -> None:
        super().__init__(7)
        self.first = first

    def randint(self, a: int, b: int) -> int:
        return self.first.pop(0) if self.first else super().randint(a, b)


def test_a_port_someone_listens_on_is_passed_over() -> None:
    low, _ = ephemeral_range()
    taken = next(p for p in range(low - 500, low) if replica._bindable(p))
    with socket.socket() as listener:
        listener.bind((LOOPBACK, taken))
        listener.listen(1)
        port = free_port(Scripted([taken]))
    assert port != taken and port < low


def test_a_port_once_handed_out_is_not_handed_out_again() -> None:
    first = free_port()
    again = free_port(Scripted([first]))
    assert again != first


@pytest.mark.parametrize(
    ("text", "expected"),
    [("32768\t60999\n", (32768, 60999)), ("1024 65000", (1024, 65000)), ("junk", (32768, 60999)),
     ("60999 32768", (32768, 60999)), ("", (32768, 60999))],
)  # fmt: skip
def test_the_ephemeral_range_is_read_from_proc_or_defaults(
    tmp_path: Path, text: str, expected: tuple[int, int]
) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    assert ephemeral_range(path) == expected
    assert ephemeral_range(tmp_path / "missing") == (32768, 60999)


def test_a_range_reaching_down_low_draws_above_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica, "ephemeral_range", lambda: (1024, 40000))
    assert all(free_port() > 40000 for _ in range(20))


def test_released_ports_may_be_handed_out_again() -> None:
    ports = replica.Ports.pick()
    assert free_port(Scripted([ports.sidecar])) != ports.sidecar  # still handed out
    replica.release(ports)
    assert free_port(Scripted([ports.sidecar])) == ports.sidecar
