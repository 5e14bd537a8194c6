"""The layout promises of the README: one import package, layers checked, small modules, a true map."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "controller" / "fleetslo"
MAX_MODULE_LINES = 400


@pytest.mark.slow
def test_installing_adds_exactly_one_import_package(tmp_path: Path) -> None:
    """A built wheel holds `fleetslo` and its metadata, nothing else at the top of site-packages."""
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*pip_wheel, "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("fleetslo-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = archive.read(next(n for n in names if n.endswith(".dist-info/top_level.txt"))).decode()
    roots = {name.split("/", 1)[0] for name in names}
    assert {r for r in roots if not r.endswith(".dist-info")} == {"fleetslo"}
    assert top_level.split() == ["fleetslo"]
    # The data the package reads at run time travels with it.
    assert any(n.startswith("fleetslo/sim/profiles/") and n.endswith(".yaml") for n in names)
    assert "fleetslo/py.typed" in names


def test_every_package_directory_is_a_package() -> None:
    """import-linter sees only real packages: a directory of modules without __init__.py escapes it."""
    missing = [
        str(d.relative_to(ROOT))
        for d in PACKAGE.rglob("*")
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()
    ]
    assert missing == []


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def _contract(name: str) -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == name]
    return [layer.replace(" ", "") for layer in contract["layers"]]


def test_the_readme_map_draws_the_layers_import_linter_checks() -> None:
    """The README's layer diagram and the top-level layers contract list the same layers in order."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- layers -->\n```\n(.*?)```", readme, re.S)
    assert block, "README.md has no <!-- layers --> block"
    drawn = []
    for line in block.group(1).splitlines():
        names = re.findall(r"fleetslo\.\w+", line.split("#")[0])
        if names:
            drawn.append("|".join(names))
    assert drawn == _contract("Programs over policy over core")


def test_every_subpackage_is_on_the_readme_map() -> None:
    readme = (ROOT / "README.md").read_text()
    subpackages = sorted(
        str(d.relative_to(ROOT / "controller")).replace("/", ".")
        for d in PACKAGE.rglob("*")
        if d.is_dir() and (d / "__init__.py").exists()
    )
    missing = [p for p in subpackages if f"`{p}" not in readme]
    assert missing == []
