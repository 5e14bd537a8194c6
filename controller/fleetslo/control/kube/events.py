"""Kubernetes Events on the scaled workload: what ``kubectl describe`` shows people.

One ``core/v1`` Event per call, on the target object, with the decision's ``Reason`` as the Event
reason (the same token as the log key and the metric label). Repeats of the same reason and message
are counted on the existing Event (``count`` and ``lastTimestamp``), as kubelet's recorder does,
so a target that keeps failing the same way does not flood etcd.

Writing an Event is best effort for the caller (audit); failures are raised as classified errors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

from fleetslo.control.kube.client import api_call
from fleetslo.control.kube.workloads import KINDS, where
from fleetslo.core.errors import NotFound
from fleetslo.core.spec import Target

#: Events whose repeat count is remembered (decision messages vary, error messages repeat).
_REMEMBERED = 1000


class KubeEventRecorder:
    """Writes Events on targets; ``clock`` gives wall time (seconds since the epoch)."""

    def __init__(self, api: client.ApiClient, component: str, clock: Callable[[], float]) -> None:
        self._core = client.CoreV1Api(api)
        self.component = component
        self.clock = clock
        self._counts: dict[str, int] = {}

    def event(self, target: Target, reason: str, message: str, *, warning: bool = False) -> None:
        name = _event_name(target, reason, message)
        now = datetime.fromtimestamp(self.clock(), UTC)
        count = self._counts.get(name, 0) + 1
        if count > 1 and self._bump(target, name, count, now):
            self._counts[name] = count
            return
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=name, namespace=target.namespace),
            involved_object=client.V1ObjectReference(
                api_version=KINDS[target.workload_kind].api_version, kind=target.kind.value,
                name=target.name, namespace=target.namespace,
            ),
            reason=reason, message=message[:1024], type="Warning" if warning else "Normal",
            source=client.V1EventSource(component=self.component), reporting_component=self.component,
            first_timestamp=now, last_timestamp=now, count=1,
        )  # fmt: skip
        with api_call(f"record event {reason} on {where(target)}") as timeout:
            self._core.create_namespaced_event(target.namespace, body, _request_timeout=timeout)
        if len(self._counts) >= _REMEMBERED:
            self._counts.clear()  # forgetting only costs a new Event instead of a count bump
        self._counts[name] = 1

    def _bump(self, target: Target, name: str, count: int, now: datetime) -> bool:
        """Count a repeat on the existing Event; False if it is gone (expired: create it anew)."""
        try:
            with api_call(f"update event {name}") as timeout:
                self._core.patch_namespaced_event(
                    name, target.namespace, {"count": count, "lastTimestamp": now},
                    _request_timeout=timeout,
                )  # fmt: skip
        except NotFound:
            return False
        return True


def _event_name(target: Target, reason: str, message: str) -> str:
    """A stable name per (target, reason, message): repeats land on the same Event."""
    digest = hashlib.sha256(f"{target.kind}/{reason}/{message}".encode()).hexdigest()[:10]
    return f"{target.name[:200]}.{reason.lower()[:30]}.{digest}"
