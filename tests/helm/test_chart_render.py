"""The chart renders, lints and validates offline: a real ``helm`` (lint, template), the Kubernetes
OpenAPI schemas (``kubernetes-validate --strict``), golden renders, hardened containers, and
values.schema.json refusing bad values.

Regenerate the golden renders after an intended change with
``FLEETSLO_UPDATE_GOLDEN=1 .venv/bin/pytest tests/helm`` (or ``make helm-golden``) and review the diff.
The goldens hold the chart's own output: the embedded generated files (dashboard JSON, rule groups)
are replaced by their names there, because test_chart_files checks them against their sources.
"""

from __future__ import annotations

import os
import re
from typing import Any

import kubernetes_validate
import pytest

from tests.helm.chart import (
    CHART,
    GOLDEN,
    GOLDEN_RENDERS,
    NAMESPACE,
    REFERENCE,
    VALUES,
    containers,
    find,
    one,
    render,
    run_helm,
    template_error,
    template_text,
)

EVERYTHING = ("-f", str(VALUES / "everything.yaml"))
CLUSTER_WIDE = (*EVERYTHING, "--set", "rbac.clusterWide=true")
#: Every render the validity tests cover.
RENDERS: dict[str, tuple[str, ...]] = {
    "default": (),
    "default-with-prometheus-operator": ("--api-versions", "monitoring.coreos.com/v1"),
    "mi325x": REFERENCE,
    "everything": EVERYTHING,
    "cluster-wide": CLUSTER_WIDE,
}
#: Kubernetes versions the rendered objects must be valid for: the chart's kubeVersion floor and the newest.
KUBE_VERSIONS = ("1.27.0", "1.37.0")
#: Custom resources have no schema in kubernetes-validate; they are skipped by name, with the reason.
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "prometheus-operator CRD",
    ("monitoring.coreos.com/v1", "PodMonitor"): "prometheus-operator CRD",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheus-operator CRD",
}
#: The gate token of the default render is random; golden files hold a placeholder.
_RANDOM_TOKEN = re.compile(r'^(  token: )"[A-Za-z0-9+/=]+"$', re.MULTILINE)
_DASHBOARD_BODY = re.compile(r"^(  (\S+\.json): \|-\n)(?:    .*\n|\n)+", re.MULTILINE)
_RULE_GROUPS = re.compile(r"^(  groups:\n)(?:    .*\n|\n)+", re.MULTILINE)


def golden_text(text: str) -> str:
    """A render as its golden file holds it: random token and embedded generated files elided."""
    text = _RANDOM_TOKEN.sub(r'\1"<random>"', text)
    text = _DASHBOARD_BODY.sub(r"\1    <files/dashboards/\2: checked by test_chart_files>\n", text)
    return _RULE_GROUPS.sub(_group_names, text)


def _group_names(match: re.Match[str]) -> str:
    names = re.findall(r"^    - name: (\S+)$", match.group(0), re.MULTILINE)
    return match.group(1) + "".join(f"    - name: {n}  # rules: checked by test_chart_files\n" for n in names)


@pytest.mark.parametrize(
    "args", [(), EVERYTHING, CLUSTER_WIDE], ids=["default", "everything", "cluster-wide"]
)
def test_helm_lint_strict(args: tuple[str, ...]) -> None:
    done = run_helm("lint", str(CHART), "--strict", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("name", sorted(GOLDEN_RENDERS))
def test_render_matches_golden(name: str) -> None:
    text = golden_text(template_text(*GOLDEN_RENDERS[name]))
    path = GOLDEN / f"{name}.yaml"
    if os.environ.get("FLEETSLO_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing: run FLEETSLO_UPDATE_GOLDEN=1 pytest tests/helm"
    assert text == path.read_text(encoding="utf-8"), (
        f"helm template ({name}) differs from {path}: if the change is intended, run "
        "`FLEETSLO_UPDATE_GOLDEN=1 .venv/bin/pytest tests/helm` and review the diff"
    )


def test_a_gate_render_gets_a_random_token_that_the_golden_masks() -> None:
    assert _RANDOM_TOKEN.search(template_text(*REFERENCE)), "a gate render should carry a generated token"


@pytest.mark.parametrize("name", sorted(RENDERS))
def test_every_core_object_is_valid_for_kubernetes_strict(name: str) -> None:
    skipped: set[tuple[str, str]] = set()
    for obj in render(*RENDERS[name]):
        key = (obj["apiVersion"], obj["kind"])
        if key in CRD_KINDS:
            skipped.add(key)
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(
                    f"{obj['kind']} {obj['metadata']['name']} is invalid for Kubernetes {version}: {exc}"
                )
    expected = set(CRD_KINDS) if name not in ("default", "mi325x") else set()  # "auto": no operator here
    assert skipped == expected, "only the prometheus-operator kinds may skip schema validation"


def test_defaults_render_the_controller_and_no_reference_fleet() -> None:
    objects = render()
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == sorted(
        ["ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Role", "RoleBinding",
         "Secret", "Service", "ServiceAccount"]  # the gate token, for FleetSLO resources that use the gate
    )  # fmt: skip
    assert one(objects, "Deployment")["spec"]["replicas"] == 2
    assert len(find(objects, "ConfigMap")) == 4  # the controller's, three dashboards


@pytest.mark.parametrize(
    "args", [(), ("--api-versions", "monitoring.coreos.com/v1")], ids=["bare", "operator"]
)
def test_defaults_install_into_an_empty_cluster(args: tuple[str, ...]) -> None:
    """Nothing outside the release namespace (which --create-namespace makes), no FleetSLO, no
    spec for the controller to enforce: it starts, holds the resources someone adds later, no more."""
    objects = render(*args)
    assert {o["metadata"].get("namespace") for o in objects} == {NAMESPACE}
    assert not find(objects, "FleetSLO")
    assert "slos.yaml" not in one(objects, "ConfigMap", "fleetslo-controller")["data"]


def test_monitoring_objects_follow_the_cluster_when_auto() -> None:
    without = {o["kind"] for o in render()}
    with_operator = {o["kind"] for o in render("--api-versions", "monitoring.coreos.com/v1")}
    assert not without & {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert {"ServiceMonitor", "PodMonitor", "PrometheusRule"} <= with_operator


def _fleetslo_containers(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            for c in containers(obj):
                if "fleetslo" in c["image"].rsplit("/", 1)[-1]:
                    found.append((f"{obj['metadata']['name']}/{c['name']}", c))
    return found


@pytest.mark.parametrize("name", ["default", "everything"])
def test_every_fleetslo_container_is_hardened(name: str) -> None:
    found = _fleetslo_containers(render(*RENDERS[name]))
    assert len(found) == (1 if name == "default" else 2)  # controller (+ the sidecar of the reference fleet)
    for where, c in found:
        sc = c["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0, where
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc.get("privileged", False) is False, where
        assert sc["capabilities"] == {"drop": ["ALL"]}, where
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert "add" not in sc["capabilities"], where
        assert c["resources"]["limits"]["memory"], where


def test_hardening_cannot_be_switched_off_by_values() -> None:
    error = template_error("--set", "controller.securityContext.readOnlyRootFilesystem=false")
    assert "additional properties 'securityContext' not allowed" in error


def test_reference_fleet_matches_the_mi325x_design() -> None:
    objects = render(*EVERYTHING)
    deployment = one(objects, "Deployment", "qwen3-235b-a22b-fp8")
    assert deployment["metadata"]["namespace"] == "llm"
    assert "replicas" not in deployment["spec"], "the controller owns the replica count"
    pod = deployment["spec"]["template"]["spec"]
    vllm, sidecar = pod["containers"]
    assert vllm["resources"]["limits"]["amd.com/gpu"] == 4 == vllm["resources"]["requests"]["amd.com/gpu"]
    args = vllm["args"]
    assert args[0] == "/models/Qwen3-235B-A22B-FP8"
    for flag in ("--tensor-parallel-size=4", "--enable-expert-parallel", "--kv-cache-dtype=fp8",
                 "--served-model-name=Qwen/Qwen3-235B-A22B-FP8", "--max-num-seqs=256"):  # fmt: skip
        assert flag in args
    assert any(a.startswith('--custom-histogram-buckets={"time_to_first_token":[') for a in args)
    env = {e["name"]: e.get("value") for e in vllm["env"]}
    assert env["VLLM_ROCM_USE_AITER"] == "1" and env["HIP_FORCE_DEV_KERNARG"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
    # Weights: one shared ReadOnlyMany claim, mounted read-only.
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["model"]["persistentVolumeClaim"]["readOnly"] is True
    assert one(objects, "PersistentVolumeClaim")["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert {"name": "model", "mountPath": "/models", "readOnly": True} in vllm["volumeMounts"]
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    # AMD GPU nodes, spread over nodes and zones.
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]
    assert term["matchExpressions"][0]["key"] == "amd.com/gpu.product-name"
    assert any("MI325" in value for value in term["matchExpressions"][0]["values"])
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} == {
        "kubernetes.io/hostname", "topology.kubernetes.io/zone"
    }  # fmt: skip
    # Minutes-long start: the startup probe allows it, the others take over afterwards.
    startup = vllm["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60
    # Drain through the gate before SIGTERM, within the grace period.
    assert sidecar["lifecycle"]["preStop"]["exec"]["command"][2] == "drain"
    assert vllm["lifecycle"]["preStop"]["exec"]["command"][2] == "wait"
    drain_timeout = float(sidecar["lifecycle"]["preStop"]["exec"]["command"][4])
    assert pod["terminationGracePeriodSeconds"] > drain_timeout >= 60
    # The Service targets the gate; the gate's admin token comes from a Secret.
    service = one(objects, "Service", "qwen3-235b-a22b-fp8")
    assert service["spec"]["ports"][0]["targetPort"] == "gate"
    assert volumes["gate-token"]["secret"]["secretName"] == "fleetslo-gate-token"
    assert "--admin-token-file=/var/run/fleetslo/gate-token/token" in sidecar["args"]
    assert pod["enableServiceLinks"] is False and pod["automountServiceAccountToken"] is False
    secrets = find(objects, "Secret", "fleetslo-gate-token")
    assert {s["metadata"]["namespace"] for s in secrets} == {"fleetslo", "llm"}
    assert len({s["data"]["token"] for s in secrets}) == 1, "the controller and the sidecars share one token"


def test_sidecar_takes_its_slo_thresholds_from_the_fleetslo() -> None:
    sidecar = containers(one(render(*EVERYTHING), "Deployment", "qwen3-235b-a22b-fp8"))[1]
    assert "--slo-ttft=2s" in sidecar["args"] and "--slo-tpot=50ms" in sidecar["args"]


def test_network_policies_open_only_what_is_needed() -> None:
    objects = render(*EVERYTHING)
    controller = one(objects, "NetworkPolicy", "fleetslo-controller")["spec"]
    vllm = one(objects, "NetworkPolicy", "qwen3-235b-a22b-fp8")["spec"]
    assert controller["policyTypes"] == vllm["policyTypes"] == ["Ingress", "Egress"]
    assert [p["port"] for rule in controller["ingress"] for p in rule["ports"]] == ["http"]
    ingress = {p["port"]: rule.get("from") for rule in vllm["ingress"] for p in rule["ports"]}
    assert set(ingress) == {"gate", "admin", "metrics"}, "vLLM's own port stays pod-local"
    admin_from = [
        rule["from"] for rule in vllm["ingress"] if any(p["port"] == "admin" for p in rule["ports"])
    ]
    controller_pods = {
        "app.kubernetes.io/name": "fleetslo",
        "app.kubernetes.io/instance": "fleetslo",
        "app.kubernetes.io/component": "controller",
    }
    assert admin_from == [[{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "fleetslo"}},
        "podSelector": {"matchLabels": controller_pods},
    }]], "only the controller reaches the gate's admin API"  # fmt: skip
    egress_ports = {p["port"] for rule in vllm["egress"] for p in rule["ports"]}
    assert egress_ports == {53}, "the vLLM pods need DNS only"


def test_dashboards_are_configmaps_for_the_grafana_sidecar() -> None:
    maps = [o for o in find(render(*EVERYTHING), "ConfigMap") if "dashboard" in o["metadata"]["name"]]
    assert len(maps) == 3
    for m in maps:
        assert m["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert m["metadata"]["namespace"] == "monitoring"
        (key,) = m["data"]
        assert key.endswith(".json") and m["data"][key].lstrip().startswith("{")


def test_podmonitors_restore_the_colon_in_vllm_names() -> None:
    monitors = {o["metadata"]["name"]: o for o in find(render(*EVERYTHING), "PodMonitor")}
    assert set(monitors) == {"fleetslo-sidecar", "fleetslo-vllm"}, (
        "separate jobs keep their `up` series apart"
    )
    (endpoint,) = monitors["fleetslo-vllm"]["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/vllm/metrics"
    assert endpoint["metricRelabelings"] == [
        {"sourceLabels": ["__name__"], "regex": "vllm_(.+)", "targetLabel": "__name__",
         "replacement": "vllm:$1", "action": "replace"},
    ]  # fmt: skip
    assert monitors["fleetslo-vllm"]["spec"]["namespaceSelector"] == {"matchNames": ["llm"]}
    engine = find(render(*EVERYTHING, "--set", "monitoring.podMonitors.vllmMetricsVia=engine"), "PodMonitor")
    assert {e["port"] for m in engine for e in m["spec"]["podMetricsEndpoints"]} == {"metrics", "http"}


BAD_VALUES = [
    (("--set", "controller.replicas=0"), "/controller/replicas"),
    (("--set", "vllm.sidecar.ports.gate=70000"), "/vllm/sidecar/ports/gate"),
    (("--set", "controler.enabled=true"), "additional properties 'controler' not allowed"),
    (("--set", "controller.config.source.kind=thanos"), "/controller/config/source/kind"),
    (("--set", "controller.config.leader_election.bogus=1"), "additional properties 'bogus' not allowed"),
    (("--set", "controller.config.interval=soon"), "/controller/config/interval"),
    (("--set", "monitoring.podMonitors.enabled=maybe"), "/monitoring/podMonitors/enabled"),
    (("--set", "monitoring.podMonitors.vllmMetricsVia=carrier-pigeon"), "vllmMetricsVia"),
    (("--set", "vllm.engine.kvCacheDtype=int3"), "/vllm/engine/kvCacheDtype"),
    (("--set", "vllm.image.digest=latest"), "/vllm/image/digest"),
    (("--set", "networkPolicy.apiServer.cidrs={not-a-cidr}"), "/networkPolicy/apiServer/cidrs/0"),
    (("-f", str(VALUES / "bad-spec.yaml")), "/slos/0/spec/objectives/ttft/quantile"),
    (("-f", str(VALUES / "bad-spec.yaml")), "/slos/0/spec/mode"),
    (("-f", str(VALUES / "bad-spec.yaml")), "/slos/0/spec/batch_limit/actuator"),
    (("-f", str(VALUES / "bad-spec.yaml")), "/slos/0/spec/objectives/tpot/threshold"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_VALUES, ids=[e for _, e in BAD_VALUES])
def test_values_schema_rejects_bad_values(args: tuple[str, ...], expected: str) -> None:
    error = template_error(*args)
    assert "values don't meet the specifications of the schema" in error
    assert expected in error


TEMPLATE_CHECKS = [
    (("-f", str(VALUES / "replicas-out-of-order.yaml")), "spec.replicas: min (3) must be <= max (2)"),
    ((*REFERENCE, "--set", "vllm.terminationGracePeriodSeconds=100"),
     "must be longer than vllm.drainTimeoutSeconds"),
    (("--set", "slos=null", "--set", "fleetsloResources.enabled=false"),
     "the controller needs at least one FleetSLO"),
    ((*REFERENCE, "--set", "vllm.namespace=other"), "differs from the namespace of"),
    (("-f", str(VALUES / "spec-without-rules.yaml"), "--set", "monitoring.prometheusRule.enabled=true"),
     'no alert rules for FleetSLO "mistral"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "expected"), TEMPLATE_CHECKS, ids=["replicas", "grace", "no-slos", "namespace", "no-rules"]
)
def test_templates_refuse_what_the_schema_cannot_express(args: tuple[str, ...], expected: str) -> None:
    assert expected in template_error(*args)


@pytest.mark.parametrize("name", sorted(RENDERS))
def test_no_render_names_an_empty_namespace(name: str) -> None:
    """An empty list of targets once rendered `kubernetes.io/metadata.name: ` (matching nothing)."""
    assert not re.search(r"(namespace|metadata\.name):[ \t]*$", template_text(*RENDERS[name]), re.M)


def test_the_controller_may_reach_the_sidecars_of_the_watched_namespaces() -> None:
    policy = one(
        render("--set", "fleetsloResources.namespaces={llm,team-a}"), "NetworkPolicy", "fleetslo-controller"
    )
    sidecars = {"matchLabels": {"fleetslo.io/sidecar": "true"}}
    peers = [
        p for rule in policy["spec"]["egress"] for p in rule.get("to", []) if p.get("podSelector") == sidecars
    ]
    names = {p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in peers}
    assert names == {"llm", "team-a"}
