"""Human-readable text: a failing test's message and the session's summary table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline._safe_text import printable
from pytest_roofline.model import Machine, Verdict

if TYPE_CHECKING:
    from pytest_roofline.measure.ops.times import OpReport
    from pytest_roofline.measure.regions import Region


def format_ai(verdict: Verdict) -> str:
    ai = verdict.ai
    if not ai:
        return "n/a"
    return ", ".join(f"{level} {value:.3g}" for level, value in ai.items())


def fraction_digits(value: float) -> str:
    """``0.017``, ``9.6e-05`` (never ``0.000``): three decimals, two significant digits below 0.01."""
    return f"{value:.3f}" if value >= 0.01 or value == 0 else f"{value:.2g}"


def failure_message(
    verdict: Verdict, min_fraction: float, artifacts: Sequence[Path] = (), notes: Sequence[str] = (),
    spread: str | None = None, machine: Machine | None = None,
) -> str:
    """One readable message: fraction vs threshold, bound, AI, achieved vs roof, headroom, artifacts.

    With ``machine`` (the roofs the test was judged against, which results.json records as ``judged_roofs``),
    the roofs quoted are that machine's: the peak of the precision and the bandwidth of the level named.
    Without it, the rates the work would reach at its lower-bound time."""
    lines = [
        f"roofline: attained fraction {fraction_digits(verdict.fraction)} is below min_fraction {min_fraction:g}",
        f"  bound:      {verdict.bound}",
        f"  AI:         {format_ai(verdict) + ' FLOP/byte' if verdict.ai else 'n/a (no bytes counted)'}",
    ]
    precision = _quoted_precision(verdict)
    flop_roof = verdict.roof_flops_per_s
    if machine is not None and precision is not None:
        flop_roof = machine.peak_for(precision)
    lines.append(f"  compute:    {verdict.achieved_flops_per_s / 1e9:.3g} GFLOP/s achieved of a "
                 f"{flop_roof / 1e9:.3g} GFLOP/s roof"
                 + (f" ({precision})" if machine is not None and precision else ""))
    level = verdict.bound_level
    if level is not None:
        byte_roof = machine.bandwidth_for(level) if machine is not None else verdict.roof_bytes_per_s(level)
        lines.append(
            f"  memory:     {verdict.achieved_bytes_per_s(level) / 1e9:.3g} GB/s achieved of a "
            f"{byte_roof / 1e9:.3g} GB/s roof at {level}"
        )
    headroom = "unbounded" if math.isinf(verdict.headroom) else f"{verdict.headroom:.2f}x"
    lines.append(
        f"  time:       {verdict.time_s * 1e3:.4g} ms measured, {verdict.t_min * 1e3:.4g} ms at the roof "
        f"(headroom {headroom})"
    )
    if spread:
        lines.append(f"  spread:     {spread}")
    lines.extend(f"  note:       {note}" for note in notes)
    lines.extend(f"  artifact:   {path}" for path in artifacts)
    return "\n".join(lines)


def _quoted_precision(verdict: Verdict) -> str | None:
    """The precision whose roof a message quotes: the bound's, else the one with the most FLOPs."""
    if verdict.bound.startswith("compute:"):
        return verdict.bound.split(":", 1)[1]
    counted = {k: v for k, v in verdict.flops.items() if v > 0}
    return max(counted, key=lambda k: counted[k]) if counted else None


def uncounted_text(moved: Mapping[str, int], total_bytes: float) -> str:
    """``aten.foo, aten.bar (12% of the bytes)``: FLOP-bearing ops without a counting rule, each with the bytes it
    moved, as a share of ``total_bytes`` counted; empty when every op was counted. The one wording for a live
    test (:func:`regions_uncounted`) and a record read back (``output.summary``)."""
    if not moved:
        return ""
    names = sorted(moved, key=lambda op: -moved[op])
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{shown} ({sum(moved.values()) / (total_bytes or 1):.0%} of the bytes)"


def regions_uncounted(regions: Sequence[Region]) -> str:
    """:func:`uncounted_text` of the regions a test ran."""
    moved: dict[str, int] = {}
    for region in regions:
        for op, count in getattr(region, "uncounted", {}).items():
            moved[op] = moved.get(op, 0) + count
    return uncounted_text(moved, sum(sum(k.bytes.values()) for region in regions for k in region.kernels))


def emulated_note(machine: Machine, precision: str) -> str | None:
    """'bf16 is emulated on this CPU (measured 1.0 GFLOP/s; judged against the fp32 roof)' or None."""
    entry = (machine.info.get("emulated") or {}).get(precision)
    if not isinstance(entry, Mapping):
        return None
    measured = float(entry.get("measured_flops", 0.0))
    return (f"{precision} is emulated on this machine (measured {measured / 1e9:.3g} GFLOP/s); it is judged "
            f"against the {entry.get('roof_from', 'fp32')} roof the hardware can compute it on")


def op_lines(regions: Sequence[Region]) -> list[str]:
    """Lines for a failure message from the per-op timing pass (regions with ``ops``): coverage and
    overhead per region, the ops that lose the most time (time - t_min) with their fractions, findings."""
    # getattr: a region without an ``ops`` attribute has had no per-op pass
    reports: list[tuple[str, OpReport]] = [(region.label, ops) for region in regions
                                          if (ops := getattr(region, "ops", None)) is not None]
    if not reports:
        return []
    lines = [f"gpu:        {row}" for _, report in reports for row in getattr(report, "gpu_rows", list)()]
    for label, report in reports:
        unmatched = sum(report.unmatched.values())
        lines.append(f"ops:        coverage {report.coverage:.2f} of the region time, profiler overhead "
                     f"{report.overhead:+.0%} ({report.calls} profiled call{'s' if report.calls != 1 else ''}; "
                     f"{report.total - unmatched} of {report.total} op calls matched"
                     + (f"; {label}" if len(reports) > 1 else "") + ")")
    rows = sorted((row for _, report in reports for row in report.top_lost()), key=lambda r: -(r.lost_s or 0.0))
    for i, row in enumerate(rows[:3]):
        lost, seconds = row.lost_s, row.time_s
        if lost is None or seconds is None:  # top_lost() gives timed rows only, whose loss is known
            continue
        lines.append(f"{'lost most:' if i == 0 else '':<12}{printable(row.name)}: {lost * 1e3:.3g} ms lost of "
                     f"{seconds * 1e3:.3g} ms (fraction {row.fraction:.3g}, {row.bound})")
    lines.extend(f"op note:    {line}" for _, report in reports for line in report.diagnostics)
    return lines
