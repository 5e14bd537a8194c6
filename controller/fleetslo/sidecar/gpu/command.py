"""Running a GPU tool (``amd-smi``, ``rocm-smi``) with a hard timeout, and reading its JSON.

A tool that hangs must never hang the sampler for longer than the timeout. ``subprocess.run``'s
own timeout is not enough: it kills the tool but then waits for EOF on the pipes, which a
grandchild the tool started still holds open. So the tool runs in its own session and the whole
process group is killed. Errors come out as ``GpuReadError`` with a reason token.

Must not parse any tool's output shape; the backend modules do that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

from fleetslo.core.errors import GpuReadError, GpuUnavailable

#: How much of a tool's stderr or stdout goes into an error message.
_EXCERPT = 200


def run_tool(argv: Sequence[str], timeout: float) -> str:
    """The tool's stdout; ``GpuUnavailable`` if it is not installed, ``GpuReadError`` otherwise."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise GpuUnavailable(f"{argv[0]}: not installed", "no_tool") from exc
    except OSError as exc:
        raise GpuReadError(f"{argv[0]}: cannot run ({exc.strerror})", "exec") from exc
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise GpuReadError(f"{' '.join(argv)}: no answer within {timeout:g}s", "timeout") from exc
    if proc.returncode != 0:
        detail = _excerpt(err or out)
        raise GpuReadError(f"{' '.join(argv)}: exit status {proc.returncode}: {detail}", "exit_status")
    return out.decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


def parse_json(text: str, tool: str) -> Any:
    """The JSON document in a tool's output, tolerating banner lines before it.

    ``rocm-smi --json`` may print ``WARNING: No JSON data to report`` instead of JSON, and some
    builds print warnings before the document, so the first line starting with ``{`` or ``[``
    is where the document begins.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip()[:1] in ("{", "[")), None)
    if start is None:
        raise GpuReadError(f"{tool}: no JSON in output: {_excerpt(text.encode())}", "parse")
    try:
        return json.loads("\n".join(lines[start:]))
    except (ValueError, RecursionError) as exc:
        raise GpuReadError(f"{tool}: output is not valid JSON ({exc})", "parse") from exc


def _excerpt(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip().replace("\n", " | ")
    return text[:_EXCERPT] + ("…" if len(text) > _EXCERPT else "")
