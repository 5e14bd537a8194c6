"""The baseline autoscalers fleetslo is compared with, each as research/autoscalers.md describes it.

``static`` (fixed pool), ``hpa-util`` / ``hpa-running`` (Kubernetes HPA, §2.5), ``keda-waiting`` (vLLM
production-stack KEDA recipe, §2.7) and ``llmd-slo`` (llm-d SLO-aware recipe, §2.8). The HPA arithmetic
they share lives once, in ``hpa``. All are pure ``Policy`` implementations: no I/O, no clock.
"""

from controller.policy.baselines.hpa import Behavior, HpaState, RatePolicy, ScalingRules
from controller.policy.baselines.hpa_metric import HpaRunningPolicy, HpaUtilizationPolicy
from controller.policy.baselines.keda import KedaState, KedaWaitingPolicy
from controller.policy.baselines.llmd import LLMD_BEHAVIOR, LlmdSloPolicy, LlmdState
from controller.policy.baselines.static import StaticPolicy

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
