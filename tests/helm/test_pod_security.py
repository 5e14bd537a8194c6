"""The chart's pods against Pod Security "restricted", and the controller's pod patch narrowed.

Defect 14 of issue 15: the reference vLLM pod failed even "baseline" (only
``allowPrivilegeEscalation: false``, and a hostPath for the kubelet's PodResources socket), and the
controller could patch any pod of its namespaces.

Where the reference fleet cannot meet "restricted", and why:

* ``vllm.sidecar.podResources: true`` (the default) mounts the kubelet's PodResources socket with a
  hostPath, which "baseline" already forbids. It is the only way to learn which GPUs of a node
  this pod holds; without it two replicas on one node report the same GPUs. ``false`` meets
  "restricted".
* GPU access itself needs no privilege: the device plugin hands the pod ``/dev/kfd`` and
  ``/dev/dri/renderD*``; a non-root vLLM needs the node's ``video`` and ``render`` group ids in
  ``supplementalGroups`` (which "restricted" allows), and those ids differ between distributions.
"""

from __future__ import annotations

from typing import Any

from tests.helm.chart import VALUES, find, one, render
from tests.helm.pod_security import BASELINE, RESTRICTED, violations

EVERYTHING = ("-f", str(VALUES / "everything.yaml"))
VAP = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
FLEET = "qwen3-235b-a22b-fp8"


def pod(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def test_the_checker_finds_what_the_old_reference_pod_did_wrong() -> None:
    old = {
        "containers": [{"name": "vllm", "securityContext": {"allowPrivilegeEscalation": False}}],
        "volumes": [{"name": "pod-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}],
    }
    assert violations(old, BASELINE) == ["volume pod-resources: hostPath"]
    assert violations(old, RESTRICTED) == [
        "volume pod-resources: hostPath", "volume pod-resources: hostPath",
        "vllm: runAsNonRoot not true", "vllm: seccompProfile None", "vllm: does not drop ALL capabilities",
    ]  # fmt: skip


def test_the_reference_fleet_meets_restricted_without_the_pod_resources_socket() -> None:
    objects = render(*EVERYTHING, "--set", "vllm.sidecar.podResources=false")
    assert violations(pod(objects, FLEET), RESTRICTED) == []


def test_with_the_pod_resources_socket_its_hostpath_is_the_only_violation() -> None:
    spec = pod(render(*EVERYTHING), FLEET)
    assert violations(spec, BASELINE) == ["volume pod-resources: hostPath"]
    assert violations(spec, RESTRICTED) == ["volume pod-resources: hostPath"] * 2  # baseline + volume types


def test_vllm_runs_as_a_non_root_user_that_can_reach_the_gpus() -> None:
    spec = pod(render(*EVERYTHING), FLEET)
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] > 0
    assert pod_sc["supplementalGroups"]  # the node's video and render groups own the device files
    vllm = next(c for c in spec["containers"] if c["name"] == "vllm")
    home = {e["name"]: e.get("value") for e in vllm["env"]}["HOME"]
    assert any(m["mountPath"] == home for m in vllm["volumeMounts"])  # a writable home


def test_values_cannot_drop_what_restricted_needs_by_leaving_it_out() -> None:
    objects = render(*EVERYTHING, "--set-json", 'vllm.securityContext={"readOnlyRootFilesystem": false}')
    vllm = next(c for c in pod(objects, FLEET)["containers"] if c["name"] == "vllm")
    assert vllm["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": False,
    }  # fmt: skip


def test_the_controller_pod_meets_restricted() -> None:
    assert violations(pod(render(), "fleetslo-controller"), RESTRICTED) == []


def test_the_controller_may_only_change_the_deletion_cost_of_pods() -> None:
    objects = render(*EVERYTHING, "--api-versions", VAP)
    policy = one(objects, "ValidatingAdmissionPolicy")
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule == {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"].endswith('"system:serviceaccount:fleetslo:fleetslo-controller"')
    expressions = " ".join(v["expression"] for v in policy["spec"]["validations"])
    for guarded in (
        "object.spec == oldObject.spec",
        "labels",
        "variables.cost",
        "finalizers",
        "ownerReferences",
    ):
        assert guarded in expressions
    binding = one(objects, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    # Every namespace: the condition names the controller's account, and a FleetSLO resource may
    # bring a target (and a Role with patch on pods) into a namespace the values never named.
    assert "matchResources" not in binding["spec"]
    pod_patch = [rule for r in find(objects, "Role") for rule in r["rules"]
                 if rule["resources"] == ["pods"] and "patch" in rule["verbs"]]  # fmt: skip
    assert pod_patch  # the policy has something to narrow


def test_no_policy_on_a_cluster_without_admission_policies() -> None:
    assert find(render(*EVERYTHING), "ValidatingAdmissionPolicy") == []  # before Kubernetes 1.30
