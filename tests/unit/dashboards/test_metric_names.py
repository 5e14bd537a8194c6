"""Every metric the dashboards and alerts name exists: vLLM names in a real vLLM capture (under
any stored prefix or legacy alias), fleetslo names in ``conventions`` (what the exporters and the
controller emit), and ``fleetslo:`` names recorded by the generated rules. The integration test
checks the same names against what live exporters produce."""

from __future__ import annotations

from fleetslo.core import conventions as cv
from fleetslo.core.metrics.exposition import parse_vllm

from tests.support import AFTER_LOAD, UNDER_LOAD, capture
from tests.unit.alerts.promtool_support import spec
from tests.unit.dashboards.catalog import (
    Producer,
    base_name,
    dashboard_queries,
    producer,
    recorded_names,
    rule_queries,
    variable_selectors,
)

SLOS = [spec()]


def all_names() -> set[str]:
    queries = [*dashboard_queries(), *variable_selectors(), *rule_queries(SLOS)]
    return {n for q in queries for n in q.names()}


def vllm_families() -> set[str]:
    """Family names (no prefix, no suffix) on real vLLM 0.32 pages."""
    families: set[str] = set()
    for name in (AFTER_LOAD, UNDER_LOAD):
        for line in capture(name).splitlines():
            if line.startswith("# TYPE "):
                bare = cv.strip_vllm_prefix(line.split()[2])
                if bare is not None:
                    families.add(base_name(bare))
    assert parse_vllm(capture(AFTER_LOAD))  # the capture is a real page
    return families


def fleetslo_names() -> set[str]:
    return {
        v for k, v in vars(cv).items() if isinstance(v, str) and v.startswith("fleetslo_") and k.isupper()
    }


def test_every_vllm_name_is_on_a_real_vllm_page() -> None:
    families = vllm_families()
    for name in (n for n in all_names() if producer(n) is Producer.VLLM):
        bare = cv.strip_vllm_prefix(name)
        assert bare is not None, name
        canonical = cv.canonical_vllm_name(base_name(bare))
        assert canonical in families, f"{name}: no family {canonical} in the vLLM capture"


def test_every_fleetslo_name_is_declared_in_conventions() -> None:
    declared = fleetslo_names()
    for name in (n for n in all_names() if n.startswith("fleetslo_")):
        assert name in declared or base_name(name) in declared, f"{name} is not a conventions name"


def test_every_recording_rule_name_is_generated() -> None:
    recorded = recorded_names(SLOS)
    for name in (n for n in all_names() if producer(n) is Producer.RULES):
        assert name in recorded, f"{name} is used but no rule records it"


def test_dashboards_use_every_producer() -> None:
    producers = {p for q in dashboard_queries() for p in q.producers()}
    assert producers == set(Producer)
