"""PromQL building blocks shared by the alert rules and the dashboards.

vLLM series may be stored under several names (``vllm:``, the escaped ``vllm_``, ``ray_vllm:``,
legacy aliases; see ``conventions.promql_names``). A ``{__name__=~"a|b"}`` selector works for
plain selections, but any function that drops the name (``rate``, ``max_over_time``) fails with
"vector cannot contain metrics with the same labelset" while one target has both names — for a
whole window after someone adds the colon-restoring relabel rule. So functions are applied per
name and joined with ``or`` *before* aggregating: ``or`` matches on every label but the name,
which keeps each target once and still sums a fleet whose targets use different names.

String building only; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fleetslo.core import conventions as cv


def matchers(labels: Mapping[str, str], regex: Mapping[str, str] | None = None) -> str:
    """``{a="x", b=~"y|z"}`` from equality and regex matchers, or "" for none."""
    parts = [f'{k}="{quote(v)}"' for k, v in labels.items()]
    parts.extend(f'{k}=~"{quote(v)}"' for k, v in (regex or {}).items())
    return "{" + ", ".join(parts) + "}" if parts else ""


def quote(value: str) -> str:
    """A label value inside a PromQL double-quoted string."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def vllm_any(
    canonical: str,
    suffix: str = "",
    selector: str = "",
    fn: Callable[[str], str] = lambda s: s,
) -> str:
    """``fn(name1{sel}) or fn(name2{sel}) or …`` over every stored name of a vLLM series.

    One term per line: the rule files and the dashboards' query editors stay readable.
    """
    return "\nor\n".join(fn(f"{name}{selector}") for name in cv.promql_names(canonical, suffix))


def vllm_rate(canonical: str, suffix: str, selector: str, window: str) -> str:
    """Per-series ``rate`` of a vLLM counter under any of its names."""
    return vllm_any(canonical, suffix, selector, lambda s: f"rate({s}[{window}])")


def vllm_over_time(func: str, canonical: str, selector: str, window: str) -> str:
    """Per-series ``<func>_over_time`` of a vLLM gauge under any of its names."""
    return vllm_any(canonical, "", selector, lambda s: f"{func}({s}[{window}])")


def vllm_gauge(canonical: str, selector: str = "") -> str:
    """A vLLM gauge under any of its names, each target once."""
    return vllm_any(canonical, "", selector)


def sum_by(labels: str, inner: str) -> str:
    """``sum by (labels) (inner)``; a multi-line ``inner`` is indented inside the parentheses."""
    if "\n" not in inner:
        return f"sum by ({labels}) ({inner})"
    return f"sum by ({labels}) (\n{indent(inner)}\n)"


def indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line for line in text.splitlines())


def fmt(value: float) -> str:
    """A constant as rules show it: 6 significant digits, so 5.5 * 0.1 reads 0.55, not 0.5499….

    Whole numbers are written whole (a 28-day period is 2419200, not 2.4192e+06).
    """
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"
