"""How the two Make targets install: ``make demo`` the runtime only, ``make test`` the dev tools too;
and the GPU extras name libraries that exist (checked once with ``pip download --no-deps``)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib

import pytest

from tests.support import ROOT


def _dry_run(target: str) -> list[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    # -B: as on a fresh checkout (every stamp out of date); -n: print the commands, run nothing.
    out = subprocess.run(
        [make, "-n", "-B", "-C", str(ROOT), target], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if "pip install" in line]


def test_make_demo_installs_the_runtime_without_the_dev_tools() -> None:
    installs = _dry_run("demo")
    assert installs, "make demo must install the package"
    assert not any("[dev]" in line for line in installs), installs


def test_make_unit_installs_the_dev_tools() -> None:
    assert any("[dev]" in line for line in _dry_run("unit"))


def test_the_gpu_extras_name_the_vendor_libraries() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("nvidia-ml-py") for req in extras["nvidia"])  # `import pynvml`
    assert any(req.startswith("amdsmi") for req in extras["amd"])  # `import amdsmi`
    runtime = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not {"pytest", "mypy", "ruff", "hypothesis"} & {r.split(">")[0].split("[")[0] for r in runtime}
