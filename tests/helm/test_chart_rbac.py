"""The controller's RBAC: least privilege derived from the FleetSLO specs, no wildcards, namespaced by
default — and enough for every request the controller's own Kubernetes adapters send, checked by
replaying them against kmock and authorizing each logged request with the rendered Roles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from fleetslo.control.kube import rollout
from fleetslo.control.kube.events import KubeEventRecorder
from fleetslo.control.kube.fleetslo_resources import Autoscalers, FleetSLOResources
from fleetslo.control.kube.lease import KubeLeaseLock, LeaseRecord
from fleetslo.control.kube.pods import KubePodDirectory, KubePodMarker
from fleetslo.control.kube.workloads import KINDS, Workloads
from fleetslo.core.spec import (
    RESOURCE_API_VERSION,
    STANDALONE_KINDS,
    Mode,
    Target,
    TargetKind,
    load_fleetslo_documents,
)
from fleetslo.core.spec.status import FleetSLOStatus
from fleetslo.testing import FakeClock

from tests.adapters.kube.kapi import running_api
from tests.helm.chart import NAMESPACE, REFERENCE_SLO, VALUES, find, one, render

EVERYTHING = ("-f", str(VALUES / "everything.yaml"))
MIXED = ("-f", str(VALUES / "mixed-targets.yaml"))
RENDERS = {
    "default": (),
    "reference": REFERENCE_SLO,
    "everything": EVERYTHING,
    "cluster-wide": (*EVERYTHING, "--set", "rbac.clusterWide=true"),
    "mixed": MIXED,
    "mixed-cluster-wide": (*MIXED, "--set", "rbac.clusterWide=true"),
    "mixed-unrestricted": (*MIXED, "--set", "rbac.restrictToTargets=false"),
    "mixed-direct": (*MIXED, "--set", "controller.config.source.kind=direct"),
}
#: Everything the controller may ever be granted; anything else is a finding.
VERBS = {"get", "list", "patch", "create"}
RESOURCES = {
    "deployments", "deployments/scale", "statefulsets", "statefulsets/scale", "leaderworkersets",
    "leaderworkersets/scale", "pods", "events", "leases",
    # FleetSLO resources and their status; the other autoscalers, to refuse to fight them
    "fleetslos", "fleetslos/status", "horizontalpodautoscalers", "scaledobjects",
}  # fmt: skip
RESOURCES_ROLE = "fleetslo-controller-resources"
#: In a namespace the controller acts in but does not watch: only looking for other autoscalers.
AUTOSCALER_RULES = {
    ("autoscaling", "horizontalpodautoscalers", ("list",), ()), ("keda.sh", "scaledobjects", ("list",), ()),
}  # fmt: skip
SERVICE_ACCOUNT = {"kind": "ServiceAccount", "name": "fleetslo-controller", "namespace": NAMESPACE}
LEADER_LEASE = "fleetslo-leader"


def _rbac(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in ("Role", "ClusterRole")]


@pytest.mark.parametrize("name", sorted(RENDERS))
def test_no_wildcards_and_nothing_beyond_what_the_controller_does(name: str) -> None:
    roles = _rbac(render(*RENDERS[name]))
    assert roles
    for role in roles:
        for rule in role["rules"]:
            fields = [*rule["apiGroups"], *rule["resources"], *rule["verbs"], *rule.get("resourceNames", [])]
            assert not any("*" in f for f in fields), (role["metadata"]["name"], rule)
            assert set(rule["verbs"]) <= VERBS, rule
            assert set(rule["resources"]) <= RESOURCES, rule
            assert "nonResourceURLs" not in rule


def test_namespaced_by_default_and_only_in_the_release_namespace() -> None:
    objects = render()
    assert not find(objects, "ClusterRole") and not find(objects, "ClusterRoleBinding")
    assert {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in find(objects, "Role")} == {
        (NAMESPACE, RESOURCES_ROLE),  # FleetSLO resources in the release namespace
        (NAMESPACE, "fleetslo-controller-leader"),  # the Lease
    }
    for binding in find(objects, "RoleBinding"):
        assert binding["subjects"] == [SERVICE_ACCOUNT]
        assert binding["roleRef"]["kind"] == "Role"


def test_a_spec_in_values_gets_its_target_namespace_roles() -> None:
    objects = render(*REFERENCE_SLO)
    assert {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in find(objects, "Role")} == {
        ("llm", "fleetslo-controller"),  # the target's namespace
        ("llm", RESOURCES_ROLE),  # ... where it only looks for other autoscalers
        (NAMESPACE, RESOURCES_ROLE),
        (NAMESPACE, "fleetslo-controller-leader"),
    }
    assert _rules(one([r for r in find(objects, "Role") if r["metadata"]["namespace"] == "llm"],
                      "Role", RESOURCES_ROLE)) == AUTOSCALER_RULES  # fmt: skip


def test_watched_namespaces_get_the_resources_role() -> None:
    objects = render("--set", "fleetsloResources.namespaces={team-a,team-b}")
    namespaces = {r["metadata"]["namespace"] for r in find(objects, "Role", RESOURCES_ROLE)}
    assert namespaces == {"team-a", "team-b"}
    rules = _rules(find(objects, "Role", RESOURCES_ROLE)[0])
    assert ("fleetslo.io", "fleetslos/status", ("patch",), ()) in rules
    assert ("apps", "deployments/scale", ("patch",), ()) in rules


def test_cluster_wide_is_opt_in_and_keeps_the_lease_namespaced() -> None:
    objects = render(*RENDERS["cluster-wide"])
    cluster_role = one(objects, "ClusterRole", "fleetslo-controller")
    assert {b["metadata"]["name"] for b in find(objects, "ClusterRoleBinding")} == {
        "fleetslo-controller",
        RESOURCES_ROLE,
    }
    for binding in find(objects, "ClusterRoleBinding"):
        assert binding["subjects"] == [SERVICE_ACCOUNT]
    assert {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in find(objects, "Role")} == {
        (NAMESPACE, "fleetslo-controller-leader")
    }
    assert _rules(cluster_role) == _rules(_role(render(*EVERYTHING), "llm"))
    assert _rules(one(objects, "ClusterRole", RESOURCES_ROLE)) >= AUTOSCALER_RULES


def _role(objects: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    """The Role the specs in values derive for ``namespace``."""
    (role,) = [
        r for r in find(objects, "Role", "fleetslo-controller") if r["metadata"]["namespace"] == namespace
    ]
    return role


def _rules(role: dict[str, Any]) -> set[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    return {
        (g, res, tuple(rule["verbs"]), tuple(rule.get("resourceNames", [])))
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
    }


def test_rules_follow_each_specs_kind_actuator_and_mode() -> None:
    objects = render(*MIXED)
    assert _rules(_role(objects, "llm")) == {
        ("apps", "deployments", ("get",), ("qwen",)),
        ("apps", "deployments/scale", ("patch",), ("qwen",)),  # enforce
        ("", "pods", ("list", "patch"), ()),  # gate: list pods; drain: mark the drained ones
        ("", "events", ("create", "patch"), ()),
    }
    assert _rules(_role(objects, "batch")) == {
        ("apps", "statefulsets", ("get",), ("mixtral",)),
        ("apps", "statefulsets/scale", ("patch",), ("mixtral",)),
        ("apps", "statefulsets", ("patch",), ("mixtral",)),  # engine-args: the pod template
        ("leaderworkerset.x-k8s.io", "leaderworkersets", ("get",), ("deepseek",)),  # advisory: read only
        ("", "events", ("create", "patch"), ()),
    }
    assert _rules(find(objects, "Role", "fleetslo-controller-leader")[0]) == {
        ("coordination.k8s.io", "leases", ("create",), ()),
        ("coordination.k8s.io", "leases", ("get", "patch"), (LEADER_LEASE,)),
    }


def test_dry_run_grants_reading_only() -> None:
    objects = render(*MIXED, "--set", "controller.dryRun=true")
    for ns in ("llm", "batch"):
        for rule in _role(objects, ns)["rules"]:
            assert rule["verbs"] in (["get"], ["list"]), rule


def test_unrestricted_names_when_asked() -> None:
    for role in find(render(*RENDERS["mixed-unrestricted"]), "Role"):
        if role["metadata"]["name"] == "fleetslo-controller":
            assert all("resourceNames" not in rule for rule in role["rules"])


# --------------------------------------------------------------------------------------------
# the adapters' real requests, authorized by the rendered RBAC
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attributes:
    """What the API server authorizes a request by (a resource request)."""

    namespace: str
    verb: str
    group: str
    resource: str  # with "/subresource"
    name: str | None


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<res>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def attributes(method: str, path: str) -> Attributes:
    match = _PATH.match(path)
    assert match, f"not a namespaced resource request: {method} {path}"
    name, sub = match["name"], match["sub"]
    verb = ("get" if name else "list") if method == "GET" else _VERBS[method]
    resource = f"{match['res']}/{sub}" if sub else match["res"]
    return Attributes(match["ns"], verb, match["group"] or "", resource, name)


def allowed(objects: list[dict[str, Any]], a: Attributes) -> bool:
    """Kubernetes RBAC's answer for the controller's service account (rules are additive)."""
    bound = {
        (b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace"))
        for b in objects
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding") and SERVICE_ACCOUNT in b["subjects"]
    }
    for role in objects:
        if role["kind"] not in ("Role", "ClusterRole") or not _applies(role, bound, a.namespace):
            continue
        for rule in role["rules"]:
            names = rule.get("resourceNames")
            if (
                a.verb in rule["verbs"]
                and a.group in rule["apiGroups"]
                and a.resource in rule["resources"]
                and (not names or (a.name is not None and a.name in names))
            ):
                return True
    return False


def _applies(role: dict[str, Any], bound: set[tuple[str, str, str | None]], namespace: str) -> bool:
    meta = role["metadata"]
    if role["kind"] == "Role":
        return meta["namespace"] == namespace and ("Role", meta["name"], namespace) in bound
    return ("ClusterRole", meta["name"], None) in bound


def _workload(kind: TargetKind, ns: str, name: str) -> dict[str, Any]:
    vllm = {"name": "vllm", "image": "vllm", "args": ["serve", "m", "--max-num-seqs=64"]}
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [vllm]}}
    spec: dict[str, Any] = {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template}
    if kind == TargetKind.LEADERWORKERSET:
        spec = {
            "replicas": 1,
            "leaderWorkerTemplate": {"leaderTemplate": template, "workerTemplate": template},
        }
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec, "status": {"replicas": 1}}


def exercise(api: Any, targets: Iterable[tuple[Target, bool, str]]) -> None:
    """Every call the controller makes for each target: (target, writes, batch actuator)."""
    workloads = Workloads(api)
    events = KubeEventRecorder(api, "fleetslo-controller", FakeClock(1_700_000_000.0))
    for target, writes, actuator in targets:
        obj = workloads.get(target)
        if writes:
            workloads.scale(target, 2)
        if actuator == "gate":
            pods = KubePodDirectory(api, workloads).pods(target)
            if writes:
                KubePodMarker(api).mark(target, [p.name for p in pods])
        if actuator == "engine-args" and writes:
            found = rollout.vllm_containers(obj, KINDS[target.kind].templates, "vllm")
            workloads.json_patch(target, rollout.limit_patch(found, 32), "set max-num-seqs")
        events.event(target, "ScaleUp", "same message twice")
        events.event(target, "ScaleUp", "same message twice")  # the repeat patches the count
        Autoscalers(api).scaling(target)
    resources = FleetSLOResources(api)
    for item in resources.find([NAMESPACE]):  # the watched namespace: the release's, by default
        resources.write_status(NAMESPACE, item["metadata"]["name"], FleetSLOStatus(mode="advisory"))
        resources.read_status(NAMESPACE, item["metadata"]["name"])  # a new leader reads its learned state
    lease = KubeLeaseLock(api, NAMESPACE, LEADER_LEASE)
    assert lease.get() is None
    lease.create(LeaseRecord(holder="a", duration=15.0))
    _, version = lease.get() or (None, None)
    lease.update(LeaseRecord(holder="a", duration=15.0), version)


def test_rendered_rbac_allows_every_request_the_adapters_send() -> None:
    objects = render(*MIXED)
    # What the controller does per target, from the rendered specs as the controller loads them.
    slos = yaml.safe_load_all(one(objects, "ConfigMap", "fleetslo-controller")["data"]["slos.yaml"])
    targets = [
        (s.spec.target, s.spec.mode == Mode.ENFORCE, s.spec.batch_limit.actuator.value)
        for s in load_fleetslo_documents(list(slos), "slos.yaml")
    ]
    assert {t.kind for t, _, _ in targets} == set(TargetKind) - STANDALONE_KINDS  # Kubernetes kinds only
    with running_api() as kapi:
        for target, _, _ in targets:
            kind = KINDS[target.kind]
            kapi.put(
                f"{kind.api_version}/{kind.plural}", _workload(target.kind, target.namespace, target.name)
            )
        kapi.put("v1/pods", {"metadata": {"name": "qwen-0", "namespace": "llm", "labels": {"app": "qwen"}}})
        kapi.put(
            "fleetslo.io/v1alpha1/fleetslos",
            {
                "apiVersion": RESOURCE_API_VERSION,
                "kind": "FleetSLO",
                "metadata": {"name": "mine", "namespace": NAMESPACE},
            },
        )
        exercise(kapi.client(), targets)
        sent = [attributes(r.method, str(r.url.path)) for m in ("get", "post", "patch", "put", "delete")
                for r in kapi.requests(m)]  # fmt: skip
    kinds = {(a.verb, a.resource) for a in sent}
    assert kinds >= {
        ("get", "deployments"), ("patch", "deployments/scale"), ("list", "pods"), ("patch", "pods"),
        ("patch", "statefulsets"), ("get", "leaderworkersets"), ("create", "events"), ("patch", "events"),
        ("create", "leases"), ("get", "leases"), ("patch", "leases"), ("list", "horizontalpodautoscalers"),
        ("list", "scaledobjects"), ("list", "fleetslos"), ("patch", "fleetslos/status"),
    }, "the replay must cover every kind of call"  # fmt: skip
    denied = [a for a in sent if not allowed(objects, a)]
    assert denied == [], "the chart's RBAC refuses requests the controller sends"
    # And the authorizer is no rubber stamp: what the specs do not call for is refused.
    for a in [
        Attributes("batch", "patch", "leaderworkerset.x-k8s.io", "leaderworkersets/scale", "deepseek"),
        Attributes("llm", "patch", "apps", "deployments", "qwen"),
        Attributes("llm", "patch", "apps", "deployments/scale", "someone-else"),
        Attributes("batch", "list", "", "pods", None),
        Attributes("llm", "get", "", "secrets", "anything"),
        Attributes(NAMESPACE, "patch", "coordination.k8s.io", "leases", "another-lease"),
    ]:
        assert not allowed(objects, a), a
