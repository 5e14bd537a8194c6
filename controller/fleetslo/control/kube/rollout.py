"""``--max-num-seqs`` in a workload's pod templates: find it, and the JSON patch that changes it.

vLLM takes the batch limit only as a launch flag, so changing it means changing the pod template
(and a rolling restart). The flag may appear as ``--max-num-seqs=64``, as ``--max-num-seqs 64`` (two
list items) or inside a shell string (``sh -c "vllm serve … --max-num-seqs 64"``), in ``args`` or in
``command``, and with underscores. Every template of the workload whose vLLM container has the flag
is patched (a LeaderWorkerSet has a leader and a worker template); a ``test`` operation on the
container's name guards each replace, so a template that changed shape meanwhile fails the patch
instead of corrupting another container.

Pure functions over plain dicts; the API calls are the caller's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FLAG = "--max-num-seqs"
_FLAG_RE = re.compile(r"(--max[-_]num[-_]seqs)(=|\s+)(\d+)")
_BARE_FLAG = re.compile(r"^--max[-_]num[-_]seqs$")


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """One vLLM container: where it is (JSON pointer of the containers list) and what it runs."""

    pointer: str
    index: int
    name: str
    command: tuple[str, ...]
    args: tuple[str, ...]


def find_limit(tokens: Sequence[str]) -> int | None:
    """The value of ``--max-num-seqs`` in a command line, in any of its spellings; ``None`` if absent."""
    for i, token in enumerate(tokens):
        match = _FLAG_RE.search(token)
        if match:
            return int(match.group(3))
        if _BARE_FLAG.match(token) and i + 1 < len(tokens) and tokens[i + 1].isdigit():
            return int(tokens[i + 1])
    return None


def with_limit(tokens: Sequence[str], limit: int) -> list[str]:
    """The command line with ``--max-num-seqs`` set to ``limit`` (where it already is)."""
    out = list(tokens)
    for i, token in enumerate(out):
        if _FLAG_RE.search(token):
            out[i] = _FLAG_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{limit}", token)
            return out
        if _BARE_FLAG.match(token) and i + 1 < len(out) and out[i + 1].isdigit():
            out[i + 1] = str(limit)
            return out
    return out


def _pointer_get(obj: Mapping[str, Any], pointer: str) -> Any:
    node: Any = obj
    for part in pointer.strip("/").split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def vllm_containers(obj: Mapping[str, Any], templates: Sequence[str], name: str | None) -> list[ContainerRef]:
    """The vLLM container of each template: named ``name``, else the one mentioning vLLM or the flag."""
    found = []
    for template in templates:
        containers = _pointer_get(obj, f"{template}/spec/containers") or []
        for index, c in enumerate(containers):
            ref = ContainerRef(
                f"{template}/spec/containers", index, c.get("name", ""),
                tuple(c.get("command") or ()), tuple(c.get("args") or ()),
            )  # fmt: skip
            if _is_vllm(ref, name, len(containers)):
                found.append(ref)
                break
    return found


def _is_vllm(ref: ContainerRef, name: str | None, count: int) -> bool:
    if name is not None:
        return ref.name == name
    line = " ".join(ref.command + ref.args)
    return count == 1 or "vllm" in line or find_limit(ref.command + ref.args) is not None


def current_limit(containers: Sequence[ContainerRef]) -> int | None:
    """The limit the first template's vLLM container runs with (``None``: vLLM's default)."""
    for ref in containers:
        value = find_limit(ref.command + ref.args)
        if value is not None:
            return value
    return None


def limit_patch(containers: Sequence[ContainerRef], limit: int) -> list[dict[str, Any]]:
    """JSON patch operations setting ``--max-num-seqs`` to ``limit`` in every vLLM container.

    Where no container has the flag yet, it is appended to the first container's ``args``.
    """
    ops: list[dict[str, Any]] = []
    for ref in containers:
        for field, tokens in (("args", ref.args), ("command", ref.command)):
            if find_limit(tokens) is not None:
                path = f"{ref.pointer}/{ref.index}"
                ops.append({"op": "test", "path": f"{path}/name", "value": ref.name})
                ops.append({"op": "replace", "path": f"{path}/{field}", "value": with_limit(tokens, limit)})
                break
    if not ops and containers:
        ref = containers[0]
        path = f"{ref.pointer}/{ref.index}"
        ops.append({"op": "test", "path": f"{path}/name", "value": ref.name})
        ops.append({"op": "add", "path": f"{path}/args", "value": [*ref.args, f"{FLAG}={limit}"]})
    return ops
