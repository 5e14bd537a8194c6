"""A ``coordination.k8s.io/v1`` Lease as a lock record: read, create, and compare-and-swap update.

Updates are merge patches that carry the ``resourceVersion`` last read: the API server applies a
patch whose ``metadata.resourceVersion`` no longer matches with 409 Conflict, so of two candidates
racing for an expired lease exactly one wins (client-go's ``LeaseLock`` does the same with PUT).
The election logic itself is in ``fleetslo.control.leader``; this module only moves records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from fleetslo.control.kube.client import api_call
from fleetslo.core.errors import NotFound


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election-relevant part of a Lease (``holder`` ``None``: released)."""

    holder: str | None
    duration: float
    acquired: datetime | None = None
    renewed: datetime | None = None
    transitions: int = 0


class KubeLeaseLock:
    """One Lease object; ``get`` returns the record and the ``resourceVersion`` to update against."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self._api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name

    def describe(self) -> str:
        return f"lease {self.namespace}/{self.name}"

    def get(self) -> tuple[LeaseRecord, str | None] | None:
        try:
            with api_call(f"read {self.describe()}") as timeout:
                lease = self._api.read_namespaced_lease(self.name, self.namespace, _request_timeout=timeout)
        except NotFound:
            return None
        return _record(lease.spec), lease.metadata.resource_version if lease.metadata else None

    def create(self, record: LeaseRecord) -> None:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=record.holder, lease_duration_seconds=max(1, round(record.duration)),
                acquire_time=record.acquired, renew_time=record.renewed, lease_transitions=record.transitions,
            ),
        )  # fmt: skip
        with api_call(f"create {self.describe()}") as timeout:
            self._api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)

    def update(self, record: LeaseRecord, resource_version: str | None) -> None:
        body: dict[str, Any] = {"spec": _spec(record)}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        with api_call(f"update {self.describe()}") as timeout:
            self._api.patch_namespaced_lease(
                self.name, self.namespace, body,
                _content_type="application/merge-patch+json", _request_timeout=timeout,
            )  # fmt: skip


def _spec(record: LeaseRecord) -> dict[str, Any]:
    return {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": max(1, round(record.duration)),
        "acquireTime": _micro(record.acquired),
        "renewTime": _micro(record.renewed),
        "leaseTransitions": record.transitions,
    }


def _micro(at: datetime | None) -> str | None:
    """A ``MicroTime`` as the API writes it: RFC 3339 with microseconds, in UTC."""
    return None if at is None else at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(spec: Any) -> LeaseRecord:
    if spec is None:
        return LeaseRecord(holder=None, duration=0.0)
    return LeaseRecord(
        holder=spec.holder_identity or None,
        duration=float(spec.lease_duration_seconds or 0),
        acquired=spec.acquire_time,
        renewed=spec.renew_time,
        transitions=int(spec.lease_transitions or 0),
    )
