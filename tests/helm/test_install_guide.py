"""docs/install.md and the README's install section, as far as this machine can show them:
the files they name exist; the sidecar patch applies to a plain vLLM Deployment (``kubectl patch
--local``, no API server) and gives a valid Deployment whose sidecar arguments the exporter accepts;
the example FleetSLO resource is one the API server and the controller both accept."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml
from fleetslo.cli import build_parser

from tests.helm.test_crd import api_server_errors, python_errors
from tests.support import ROOT, require_tool

GUIDE = ROOT / "docs" / "install.md"
CHART = ROOT / "helm" / "fleetslo"
DOCS = [
    GUIDE,
    ROOT / "README.md",
    CHART / "README.md",
    CHART / "templates" / "NOTES.txt",
    CHART / "values-mi325x.yaml",
]
#: Paths into the repository as the docs write them.
_PATH = re.compile(
    r"(?<![\w./-])((?:examples|helm|docs|scripts|tests|controller|alerts|dashboards)/[\w./-]+)"
)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_file_the_install_docs_name_is_in_the_repository(doc: Any) -> None:
    named = {m.rstrip(".,:)") for m in _PATH.findall(doc.read_text(encoding="utf-8"))}
    # "my-…" names the reader's own files (my-slos.yaml, my-model.yaml), not the repository's.
    missing = sorted(p for p in named if not (ROOT / p).exists() and "*" not in p and "/my-" not in p)
    assert missing == [], f"{doc.name} names files that do not exist: {missing}"


VLLM = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "my-vllm", "namespace": "llm"},
    "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "my-vllm"}},
        "template": {
            "metadata": {"labels": {"app": "my-vllm"}},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:latest",
                                     "args": ["--model", "my-org/my-model", "--port", "8000"],
                                     "ports": [{"name": "http", "containerPort": 8000}]}]},
        },
    },
}  # fmt: skip


def test_the_sidecar_patch_gives_a_valid_deployment_with_the_sidecar(tmp_path: Any) -> None:
    kubectl = require_tool("kubectl", "bash scripts/install-helm.sh (kubectl into .tools/bin)")
    deployment = tmp_path / "vllm.yaml"
    deployment.write_text(yaml.safe_dump(VLLM), encoding="utf-8")
    done = subprocess.run(
        [kubectl, "patch", "--local", "-f", str(deployment), "--type", "strategic", "-o", "yaml",
         "--patch-file", str(ROOT / "examples" / "vllm-sidecar-patch.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    patched = yaml.safe_load(done.stdout)
    for version in ("1.27.0", "1.37.0"):
        kubernetes_validate.validate(patched, version, strict=True)
    pod = patched["spec"]["template"]
    assert pod["metadata"]["labels"] == {"app": "my-vllm", "fleetslo.io/sidecar": "true"}
    names = [c["name"] for c in pod["spec"]["containers"]]
    assert sorted(names) == ["fleetslo", "vllm"]  # vLLM kept as it was
    (sidecar,) = [c for c in pod["spec"]["containers"] if c["name"] == "fleetslo"]
    assert {p["name"] for p in sidecar["ports"]} == {"gate", "admin", "metrics"}  # what the chart selects
    args = build_parser().parse_args(sidecar["args"])  # the exporter accepts them
    assert args.command == "exporter"
    mounts = {m["name"] for m in sidecar["volumeMounts"]}
    assert mounts <= {v["name"] for v in pod["spec"]["volumes"]}


def test_the_example_resource_is_accepted_by_the_api_server_and_the_controller() -> None:
    resource = yaml.safe_load((ROOT / "examples" / "fleetslo-resource.yaml").read_text(encoding="utf-8"))
    resource["metadata"]["namespace"] = "llm"  # what `kubectl apply -n llm` sets
    assert api_server_errors(resource) == []
    assert python_errors(resource) is None
    assert resource["spec"]["mode"] == "advisory"  # the guide's first step


def test_each_watched_namespace_gets_the_gate_token_the_patch_mounts() -> None:
    from tests.helm.chart import find, render

    patch = yaml.safe_load((ROOT / "examples" / "vllm-sidecar-patch.yaml").read_text(encoding="utf-8"))
    (volume,) = [v for v in patch["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    secrets = find(
        render("--set", "fleetsloResources.namespaces={llm}"), "Secret", volume["secret"]["secretName"]
    )
    assert {s["metadata"]["namespace"] for s in secrets} == {"fleetslo", "llm"}
    assert len({s["data"]["token"] for s in secrets}) == 1  # one token: the controller's is the sidecars'
