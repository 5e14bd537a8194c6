"""The baseline autoscalers fleetslo is compared with, each as research/autoscalers.md describes it.

``static`` (fixed pool), ``hpa-util`` / ``hpa-running`` (Kubernetes HPA, §2.5), ``keda-waiting`` (vLLM
production-stack KEDA recipe, §2.7) and ``llmd-slo`` (llm-d SLO-aware recipe, §2.8). The HPA arithmetic
they share lives once, in ``hpa``. All are pure ``Policy`` implementations: no I/O, no clock.
"""

from fleetslo.policy.baselines.hpa import Behavior, HpaState, RatePolicy, ScalingRules
from fleetslo.policy.baselines.hpa_metric import HpaRunningPolicy, HpaUtilizationPolicy
from fleetslo.policy.baselines.keda import KedaState, KedaWaitingPolicy
from fleetslo.policy.baselines.llmd import LLMD_BEHAVIOR, LlmdSloPolicy, LlmdState
from fleetslo.policy.baselines.static import StaticPolicy

__all__ = [
    "LLMD_BEHAVIOR",
    "Behavior",
    "HpaRunningPolicy",
    "HpaState",
    "HpaUtilizationPolicy",
    "KedaState",
    "KedaWaitingPolicy",
    "LlmdSloPolicy",
    "LlmdState",
    "RatePolicy",
    "ScalingRules",
    "StaticPolicy",
]
