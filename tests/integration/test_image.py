"""The built image, run as a container runtime would run it: its entrypoint, its user, a read-only root.

``scripts/build-image.sh`` (``make image``; cached, so this is instant when nothing changed) builds
the Containerfile into an OCI layout; umoci unpacks it into a root filesystem and the runtime
``config.json`` (entrypoint, env, user, working directory, exactly as the image's config says). Each
command then runs in new mount and PID namespaces, chrooted into that root mounted read-only, with
a tmpfs on /tmp (as the chart mounts an emptyDir there), as the image's user, and as PID 1 — so
SIGTERM handling is tested where a container has it. The network is the host's, so the exporter
can reach a fake vLLM on loopback and the test its /metrics.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fleetslo.testing import FakeVllmServer, replay_page

from tests.prometheus import free_port
from tests.support import AFTER_LOAD, ROOT, capture, require_tool

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass(frozen=True)
class Bundle:
    """An unpacked image: its root filesystem and its process (args, env, user, cwd)."""

    rootfs: Path
    args: list[str]
    env: list[str]
    uid: int
    gid: int
    cwd: str

    def command(self, args: Sequence[str] | None = None) -> list[str]:
        """The argv that runs ``args`` (default: the image's entrypoint and cmd) in the image."""
        argv = list(args) if args is not None else self.args
        root = shlex.quote(str(self.rootfs))
        mounts = " && ".join([
            "mount --make-rprivate /",
            f"mount --bind {root} {root}",
            f"mount -o remount,bind,ro {root}",
            f"mount -t proc proc {root}/proc",
            f"mount --rbind /dev {root}/dev",
            f"mount -t tmpfs -o size=64m,mode=1777 tmpfs {root}/tmp",
        ])  # fmt: skip
        inner = " ".join(shlex.quote(a) for a in ["env", "-i", *self.env, *argv])
        run = (f"exec chroot --userspec={self.uid}:{self.gid} {root} "
               f"/bin/sh -c {shlex.quote(f'cd {shlex.quote(self.cwd)} && exec {inner}')}")  # fmt: skip
        return [
            "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--",
            "/bin/sh",
            "-c",
            f"{mounts} && {run}",
        ]


def entrypoint(bundle: Bundle, *args: str) -> list[str]:
    """The image's entrypoint (its ``args`` without the default cmd) followed by ``args``."""
    return [bundle.args[0], *args]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bundle]:
    if os.geteuid() != 0:
        pytest.fail("the image test needs root (debootstrap, buildah, namespaces): run `make test` as root")
    for tool in ("buildah", "umoci", "unshare"):
        require_tool(tool, "bash scripts/install-image-tools.sh (Debian packages, as root)")
    build = subprocess.run(
        ["bash", "scripts/build-image.sh"], cwd=ROOT, check=False, capture_output=True, text=True
    )
    assert build.returncode == 0, f"make image failed:\n{build.stdout}\n{build.stderr}"
    version = json.loads((ROOT / ".image/oci/index.json").read_text())["manifests"][0]["annotations"][
        "org.opencontainers.image.ref.name"
    ]
    target = tmp_path_factory.mktemp("image") / "bundle"
    subprocess.run(["umoci", "unpack", "--image", f"{ROOT}/.image/oci:{version}", str(target)],
                   check=True, capture_output=True)  # fmt: skip
    process = json.loads((target / "config.json").read_text())["process"]
    yield Bundle(target / "rootfs", process["args"], process["env"], process["user"]["uid"],
                 process["user"]["gid"], process.get("cwd", "/"))  # fmt: skip
    subprocess.run(["rm", "-rf", str(target)], check=False)


def test_the_image_runs_as_a_non_root_user_with_fleetslo_as_its_entrypoint(bundle: Bundle) -> None:
    assert bundle.uid != 0 and bundle.gid != 0
    assert bundle.args[0] == "/opt/fleetslo/bin/fleetslo"
    default = subprocess.run(bundle.command(), check=False, capture_output=True, text=True, timeout=60)
    assert default.returncode == 0, default.stderr
    assert "exporter" in default.stdout and "run" in default.stdout


def test_fleetslo_run_help_works_in_the_image(bundle: Bundle) -> None:
    result = subprocess.run(bundle.command(entrypoint(bundle, "run", "--help")),
                            check=False, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--slo" in result.stdout and "--dry-run" in result.stdout


def test_nothing_in_the_image_needs_a_writable_root(bundle: Bundle) -> None:
    """Importing every program must not try to write bytecode (or anything else) under /."""
    probe = (
        "import os, fleetslo.cli, fleetslo.control.service, fleetslo.sidecar.app\n"
        "try:\n    open('/probe', 'w')\nexcept OSError as e:\n    print('root', e.errno)\n"
        "print('uid', os.getuid())\n"
    )
    python = str(Path(bundle.args[0]).parent / "python")
    result = subprocess.run(
        bundle.command([python, "-c", probe]), check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "root 30" in result.stdout  # EROFS: the root is read-only, as the chart mounts it
    assert f"uid {bundle.uid}" in result.stdout
    assert not result.stderr


def test_fleetslo_exporter_in_the_image_serves_metrics_and_stops_on_sigterm(
    bundle: Bundle, tmp_path: Path
) -> None:
    port = free_port()
    args = entrypoint(bundle, "exporter", "--vllm-url", "", "--listen", f"127.0.0.1:{port}",
                      "--interval", "200ms", "--windows", "1s", "--slo-ttft", "2s")  # fmt: skip
    log = tmp_path / "exporter.log"
    with FakeVllmServer(replay_page(capture(AFTER_LOAD), 20.0)) as fake, log.open("w") as stderr:
        args[args.index("--vllm-url") + 1] = fake.url
        process = subprocess.Popen(bundle.command(args), stdout=stderr, stderr=stderr)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            page = _wait_for(url, 'fleetslo_ttft_seconds{model_name="tiny-llama"', process, log)
            assert 'fleetslo_engine_up{model_name="tiny-llama"} 1.0' in page
            # As a kubelet stops a container: SIGTERM to its PID 1, which must handle it itself.
            os.kill(_namespace_init(process.pid), signal.SIGTERM)
            assert process.wait(timeout=20) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def _namespace_init(unshare_pid: int) -> int:
    """The host PID of the PID namespace's init (``unshare --fork``'s only child; unshare itself
    ignores SIGTERM and passes nothing on, and returns the child's exit status)."""
    children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def _wait_for(
    url: str, check: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0
) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the exporter exited with {process.returncode}:\n{log.read_text()}")
        try:
            text = httpx.get(url, timeout=1).text
            if check in text:
                return text
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never showed {check!r}:\n{log.read_text()}")
