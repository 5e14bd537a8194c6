"""Policies by name: what ``--policy NAME`` and ``--compare a,b,c`` select.

``make_policy(name, spec, **options)`` builds one. Options form one shared bag so a caller (the
simulator's CLI) can pass everything it knows — e.g. the engine's ``max_num_seqs`` — to every policy:
each policy takes the options it understands and ignores the rest, while an option *no* policy knows is
a ``ConfigError`` (a typo must not pass silently).

* ``replicas`` — ``static`` (default: the spec's ``replicas.min``);
* ``target_utilization`` — ``hpa-util`` (default 0.8);
* ``max_num_seqs``, ``target_fraction`` — ``hpa-running`` (target = fraction × max_num_seqs, by default
  0.8 × the spec's ``batch_limit.max``);
* ``waiting_threshold`` — ``keda-waiting`` (default 5);
* every field of ``FleetSLOConfig`` but ``behavior`` — ``fleetslo`` (``headroom``, ``step_cost``,
  ``hysteresis``, ``min_scale_down``, ``learning_rate``, …;
  see ``fleetslo/policy/fleetslo/config.py``);
* ``schedule`` — ``oracle``, required: the offline schedule ``fleetslo.policy.oracle.OraclePolicy``
  replays (that class belongs to the simulator's oracle and is imported only when asked for).

An option given as ``None`` counts as not given.

To add a policy, add one ``_Entry`` to ``_REGISTRY``. This module builds objects; it does no I/O.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.base import Policy
from fleetslo.policy.baselines import (
    HpaRunningPolicy,
    HpaUtilizationPolicy,
    KedaWaitingPolicy,
    LlmdSloPolicy,
    StaticPolicy,
)
from fleetslo.policy.fleetslo.config import FleetSLOConfig

#: The ``fleetslo`` tunables an option may set: every scalar field of its config.
_FLEETSLO_OPTIONS = {f.name: f.name for f in fields(FleetSLOConfig) if f.name != "behavior"}


@dataclass(frozen=True, slots=True)
class _Entry:
    #: Builds the policy from the spec and the options it accepts (already filtered).
    build: Callable[[FleetSLOSpec, Mapping[str, Any]], Policy[Any]]
    #: Option name in the shared bag → constructor keyword.
    options: Mapping[str, str]
    summary: str


def _oracle(spec: FleetSLOSpec, options: Mapping[str, Any]) -> Policy[Any]:
    """Imported lazily: the oracle is the simulator's, and needs a schedule computed offline."""
    if options.get("schedule") is None:
        raise ConfigError("oracle: needs a precomputed schedule (make_policy('oracle', spec, schedule=...))")
    try:
        module = importlib.import_module("fleetslo.policy.oracle")
    except ModuleNotFoundError as exc:
        if exc.name != "fleetslo.policy.oracle":
            raise
        raise ConfigError("oracle: not available in this build (fleetslo.policy.oracle is missing)") from exc
    policy: Policy[Any] = module.OraclePolicy(options["schedule"])
    return policy


def _fleetslo(spec: FleetSLOSpec, options: Mapping[str, Any]) -> Policy[Any]:
    from fleetslo.policy.fleetslo import FleetSLOConfig, FleetSLOPolicy

    return FleetSLOPolicy(FleetSLOConfig(**options))


def _plain(cls: Callable[..., Policy[Any]]) -> Callable[[FleetSLOSpec, Mapping[str, Any]], Policy[Any]]:
    return lambda _spec, options: cls(**options)


_REGISTRY: dict[str, _Entry] = {
    "static": _Entry(_plain(StaticPolicy), {"replicas": "replicas"}, "fixed pool of N replicas"),
    "hpa-util": _Entry(
        _plain(HpaUtilizationPolicy),
        {"target_utilization": "target"},
        "Kubernetes HPA on GPU utilization 80%",
    ),
    "hpa-running": _Entry(
        _plain(HpaRunningPolicy),
        {"max_num_seqs": "max_num_seqs", "target_fraction": "target_fraction"},
        "Kubernetes HPA on running requests per replica",
    ),
    "keda-waiting": _Entry(
        _plain(KedaWaitingPolicy),
        {"waiting_threshold": "threshold"},
        "vLLM production-stack KEDA recipe: waiting requests, 5 per replica",
    ),
    "llmd-slo": _Entry(_plain(LlmdSloPolicy), {}, "llm-d SLO-aware recipe: max(p90 TTFT/SLO, p90 TPOT/SLO)"),
    "fleetslo": _Entry(
        _fleetslo,
        _FLEETSLO_OPTIONS,
        "fleetslo: feed-forward sizing on a learned latency model, batch limit, safe limits",
    ),
    "oracle": _Entry(
        _oracle, {"schedule": "schedule"}, "knows the future: cheapest schedule meeting the SLO"
    ),
}

#: Every policy name, in the order reports list them.
POLICIES: tuple[str, ...] = tuple(_REGISTRY)
#: Every option some policy understands.
OPTIONS: frozenset[str] = frozenset(o for entry in _REGISTRY.values() for o in entry.options)


def describe() -> dict[str, str]:
    """Name → one-line summary, for ``--help`` and the docs."""
    return {name: entry.summary for name, entry in _REGISTRY.items()}


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """``ConfigError`` unless ``name`` is a policy that takes every one of ``options``: for one
    chosen policy (the controller's), an option it ignores is a mistake, not a shared bag."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ConfigError(f"policy: unknown policy {name!r}; valid policies: {', '.join(POLICIES)}")
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        known = ", ".join(sorted(entry.options)) or "none"
        raise ConfigError(f"policy {name}: unknown option(s) {', '.join(unknown)}; it takes: {known}")


def make_policy(name: str, spec: FleetSLOSpec, **options: Any) -> Policy[Any]:
    """The policy called ``name``, configured from ``options`` (see the module docstring)."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ConfigError(f"policy: unknown policy {name!r}; valid policies: {', '.join(POLICIES)}")
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise ConfigError(
            f"policy {name}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(OPTIONS))}"
        )
    given = {entry.options[k]: v for k, v in options.items() if k in entry.options and v is not None}
    try:
        return entry.build(spec, given)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"policy {name}: bad option value ({exc})") from exc
