"""A roofline test's figures as JUnit XML properties (the plugin adds them to ``item.user_properties``).

Plain Python. Values are strings, as JUnit properties are; a figure the test does not have is left out rather
than written as an empty value, so a CI tool that reads ``roofline_drop`` finds it only where there is one.
"""

from __future__ import annotations

from pytest_roofline.output.record import KEYS, TestRecord

PREFIX = "roofline_"


def number(value: float) -> str:
    """Six significant digits: enough to tell a 1 % change apart, short enough to read in a CI table."""
    return f"{float(value):.6g}"


def junit_properties(result: TestRecord) -> list[tuple[str, str]]:
    """``(name, value)`` pairs from a test's ``results.json`` record:
    ``roofline_fraction``, ``roofline_min_fraction``, ``roofline_bound``, ``roofline_not_gated`` (why its
    gate did not hold it: ``contended``, ``warn-only``), a test that counted nothing (``roofline_`` and
    ``nothing_counted``'s results.json key, ``output.record.KEYS``), and from the baseline gate's
    ``baseline`` record ``roofline_baseline_fraction``, ``roofline_drop``, ``roofline_verdict`` and
    ``roofline_time_ratio``; from ``--roofline-compare``'s ``compare`` record ``roofline_compare_ref`` (REF's
    commit), ``roofline_compare_ratio`` (time here / at REF), ``roofline_compare_ci_low``/``_high`` and
    ``roofline_compare_verdict``."""
    pairs: list[tuple[str, str]] = []
    if result.fraction is not None:
        pairs.append((f"{PREFIX}fraction", number(result.fraction)))
    if result.min_fraction is not None:
        pairs.append((f"{PREFIX}min_fraction", number(result.min_fraction)))
    if result.bound:
        pairs.append((f"{PREFIX}bound", result.bound))
    if result.not_gated:
        pairs.append((f"{PREFIX}not_gated", result.not_gated))
    if result.nothing_counted is not None:
        pairs.append((f"{PREFIX}{KEYS['nothing_counted']}", "1"))
    baseline = result.baseline
    if baseline is not None:
        if baseline.get("fraction") is not None:
            pairs.append((f"{PREFIX}baseline_fraction", number(baseline["fraction"])))
        if baseline.get("drop") is not None:
            pairs.append((f"{PREFIX}drop", number(baseline["drop"])))
        if baseline.get("verdict"):
            pairs.append((f"{PREFIX}verdict", str(baseline["verdict"])))
        time = (baseline.get("changes") or {}).get("time") or {}
        if time.get("ratio") is not None:
            pairs.append((f"{PREFIX}time_ratio", number(time["ratio"])))
    compare = result.compare
    if compare is not None and compare.time is not None and (ratio := compare.time.ratio) is not None:
        ci = compare.time.ci
        pairs.append((f"{PREFIX}compare_ref", str(compare.commit or compare.ref)))
        pairs.append((f"{PREFIX}compare_ratio", number(ratio)))
        if ci:
            pairs.append((f"{PREFIX}compare_ci_low", number(ci[0])))
            pairs.append((f"{PREFIX}compare_ci_high", number(ci[1])))
        pairs.append((f"{PREFIX}compare_verdict", str(compare.verdict)))
    elif compare is not None and compare.verdict:  # not compared: new, or an error
        pairs.append((f"{PREFIX}compare_verdict", compare.verdict))
    return pairs
