"""What CI reads of a session: each test's figures as JUnit XML properties, and the session as a markdown table
for a CI job's summary page (GitHub Actions: ``$GITHUB_STEP_SUMMARY``). Plain Python, from the tests' records.

JUnit property values are strings, as JUnit properties are; a figure the test does not have is left out rather
than written as an empty value, so a CI tool that reads ``roofline_drop`` finds it only where there is one.

The step summary puts regressions and failures on top, then the worst first, with each test's artifact paths and
the machine. Appending never raises: a CI summary must not turn a finished run into an error, so a failure
comes back as a message for the terminal.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_roofline.model import Machine
from pytest_roofline.record.baseline_record import BaselineRecord
from pytest_roofline.record.tests import KEYS, TestRecord

PREFIX = "roofline_"


def number(value: float) -> str:
    """Six significant digits: enough to tell a 1 % change apart, short enough to read in a CI table."""
    return f"{float(value):.6g}"


def junit_properties(result: TestRecord) -> list[tuple[str, str]]:
    """``(name, value)`` pairs from a test's ``results.json`` record:
    ``roofline_fraction``, ``roofline_min_fraction``, ``roofline_bound``, ``roofline_not_gated`` (why its
    gate did not hold it: ``contended``, ``warn-only``), a test that counted nothing (``roofline_`` and
    ``nothing_counted``'s results.json key, ``record.tests.KEYS``), and from the baseline gate's
    ``baseline`` record ``roofline_baseline_fraction``, ``roofline_drop``, ``roofline_verdict`` and
    ``roofline_time_ratio``; from ``--roofline-compare``'s ``compare`` record ``roofline_compare_ref`` (REF's
    commit), ``roofline_compare_ratio`` (time here / at REF), ``roofline_compare_ci_low``/``_high`` and
    ``roofline_compare_verdict``."""
    baseline = _baseline(result)
    figures: list[tuple[str, float | str | None]] = [
        ("fraction", result.fraction), ("min_fraction", result.min_fraction), ("bound", result.bound or None),
        ("not_gated", result.not_gated or None),
        (KEYS["nothing_counted"], "1" if result.nothing_counted is not None else None),
        ("baseline_fraction", baseline.fraction), ("drop", baseline.drop), ("verdict", baseline.verdict or None),
        ("time_ratio", baseline.time_ratio)]
    pairs = [(f"{PREFIX}{name}", value if isinstance(value, str) else number(value))
             for name, value in figures if value is not None]
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


# -- the step summary ------------------------------------------------------------------------------------------

ENV = "GITHUB_STEP_SUMMARY"
MAX_ROWS = 300  # GitHub keeps at most 1 MiB of summary per step; a suite larger than this is cut with a note
BAD_OUTCOMES = ("failed", "error")
NO_BASELINE = BaselineRecord(None)  # a test the baseline gate did not judge


def _baseline(result: TestRecord) -> BaselineRecord:
    return result.baseline or NO_BASELINE


def is_bad(result: TestRecord) -> bool:
    """Failed (its own gate, an error) or regressed against the baseline."""
    return result.outcome in BAD_OUTCOMES or _baseline(result).verdict == "regressed"


def sort_key(result: TestRecord) -> tuple[int, float, float]:
    """Bad tests first; then the largest drop since the baseline; then the smallest fraction relative to the
    test's threshold (its fraction alone when it has none); tests without a figure last."""
    drop = _baseline(result).drop
    fraction, minimum = result.fraction, result.min_fraction
    if fraction is None:
        margin = math.inf
    else:
        margin = fraction / minimum if minimum else fraction
    return (0 if is_bad(result) else 1, -float(drop) if drop is not None else math.inf, margin)


def _cell(text: object) -> str:
    return str(text).replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def _code(text: object) -> str:
    return f"`{_cell(text).replace('`', chr(39))}`"


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "" if value is None else format(float(value), fmt)


def _mark(result: TestRecord) -> str:
    if is_bad(result):
        return "❌"
    verdict = _baseline(result).verdict
    if verdict == "improved":
        return "⬆️"
    if verdict == "noisy":
        return "〰️"
    return "✅" if result.outcome == "passed" else "➖"


def _row(result: TestRecord) -> str:
    baseline = _baseline(result)
    drop = baseline.drop
    artifacts = "<br>".join(_code(path) for path in result.artifacts)
    cells = [_mark(result), _code(result.nodeid), _cell(result.outcome),
             _num(result.fraction), _num(result.min_fraction, "g"), _cell(result.bound or ""),
             _num(baseline.fraction), "" if drop is None else f"{float(drop):+.1%}",
             _cell(baseline.verdict or ""), artifacts]
    return "| " + " | ".join(cells) + " |"


def machine_text(machine: Machine | None) -> str:
    if machine is None:
        return "machine: not characterized"
    info = machine.info
    device = info.get("device")
    fingerprint = info.get("fingerprint_hash")
    extras = [f"device {device}" if device else "", f"fingerprint `{fingerprint}`" if fingerprint else "",
              "pinned ceilings" if info.get("source") == "pinned" else ""]
    extra = ", ".join(part for part in extras if part)
    return f"machine: **{_cell(machine.name or '?')}**" + (f" ({extra})" if extra else "")


def summary_markdown(tests: Sequence[TestRecord], machine: Machine | None,
                     results_path: str, session_dir: str | None = None, exit_status: int | None = None,
                     title: str = "pytest-roofline") -> str:
    """The markdown block: a headline with the counts, the machine, the table and where the files are."""
    ordered = sorted(tests, key=sort_key)
    failed = sum(1 for t in tests if t.outcome in BAD_OUTCOMES)
    regressed = sum(1 for t in tests if _baseline(t).verdict == "regressed")
    improved = sum(1 for t in tests if _baseline(t).verdict == "improved")
    counts = [f"{len(tests)} roofline test{'s' if len(tests) != 1 else ''}", f"{failed} failed"]
    if regressed or improved or any(t.baseline is not None for t in tests):
        counts += [f"{regressed} regressed", f"{improved} improved"]
    status = f" · exit status {exit_status}" if exit_status is not None else ""
    lines = [f"### {title}", "", f"**{', '.join(counts)}**{status}", "", machine_text(machine), "",
             "| | test | outcome | fraction | min | bound | baseline | drop | verdict | artifacts |",
             "|---|---|---|---:|---:|---|---:|---:|---|---|"]
    lines += [_row(result) for result in ordered[:MAX_ROWS]]
    if len(ordered) > MAX_ROWS:
        lines += ["", f"… and {len(ordered) - MAX_ROWS} more tests: see `{_cell(results_path)}`."]
    where = f"results: `{_cell(results_path)}`"
    if session_dir:
        where += f"; this session's charts and kernel tables: `{_cell(session_dir)}/`"
    lines += ["", where, ""]
    return "\n".join(lines)


def append_step_summary(tests: Sequence[TestRecord], machine: Machine | None,
                        results_path: str, session_dir: str | None = None, exit_status: int | None = None,
                        environ: Mapping[str, str] | None = None) -> str | None:
    """Append the table to ``$GITHUB_STEP_SUMMARY`` when it is set; return an error message instead of
    raising (None when written or not asked for)."""
    target = (os.environ if environ is None else environ).get(ENV)
    if not target or not tests:
        return None
    try:
        text = summary_markdown(tests, machine, results_path, session_dir, exit_status)
        with Path(target).open("a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    except Exception as exc:  # noqa: BLE001 - any failure becomes one line of the terminal summary
        return f"roofline: could not write the step summary to ${ENV} ({target!r}): {exc}"
    return None
