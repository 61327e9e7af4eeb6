"""What happens after a test is measured: its failure report and chart, and the summary's lines.

No pytest here: the plugin passes in plain values, so the CLI and other runners can reuse it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline.model import KernelSample, Machine, Verdict
from pytest_roofline.output.artifacts import artifact_path, write_kernels_csv
from pytest_roofline.output.text import emulated_note, failure_message, op_lines
from pytest_roofline.record.tests import TestRecord

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pytest_roofline.host.cores import Placement
    from pytest_roofline.measure.regions import Region
    from pytest_roofline.output.chart import ChartOptions


def all_kernels(regions: Sequence[Region]) -> list[KernelSample]:
    return [kernel for region in regions for kernel in region.kernels]


def failure_report(directory: Path, nodeid: str, machine: Machine, regions: Sequence[Region],
                   verdict: Verdict, min_fraction: float, details: Sequence[str] = ()) -> tuple[str, list[Path]]:
    """Write the chart and kernel table of a test under its threshold; return its message and paths.

    ``details`` are extra lines for the message (the ncu diagnostics), indented under the notes.
    """
    notes = [note for region in regions for note in region.notes] + roof_notes(machine, verdict.flops)
    # the chart's caption: the diagnosis, as the message's first lines (fraction vs threshold, bound, time)
    diagnosis = failure_message(verdict, min_fraction).splitlines()
    caption = [diagnosis[0], diagnosis[1].strip(), *(line.strip() for line in diagnosis if "time:" in line)]
    paths, problems = test_artifacts(directory, nodeid, machine, all_kernels(regions), verdict, title=nodeid,
                                     min_fraction=min_fraction, caption=caption)
    notes += problems
    message = failure_message(verdict, min_fraction, paths, notes, timing_spread(regions), machine=machine)
    details = [*op_lines(regions), *details]
    if details:
        message += "\n" + "\n".join(f"  {line}" for line in details)
    return message, paths


def test_artifacts(directory: Path, nodeid: str, machine: Machine, kernels: Sequence[KernelSample],
                   verdict: Verdict | None, **chart: Unpack[ChartOptions]) -> tuple[list[Path], list[str]]:
    """A failing test's roofline chart (``chart``: ``draw_roofline``'s keywords) and kernel table; their paths,
    and a note for each that could not be written: a broken chart must not hide the verdict."""
    from pytest_roofline.output.chart import draw_roofline

    writers = (
        lambda: draw_roofline(artifact_path(directory, nodeid, ".png"), machine, kernels, verdict, **chart),
        lambda: write_kernels_csv(artifact_path(directory, nodeid, ".kernels.csv"), kernels, machine),
    )
    paths: list[Path] = []
    notes: list[str] = []
    for write in writers:
        try:
            paths.append(write())
        except Exception as exc:  # noqa: BLE001 - any failure becomes a note
            notes.append(f"could not write an artifact: {exc!r}")
    return paths, notes


def timing_spread(regions: Sequence[Region]) -> str:
    """How noisy the timing was: the widest interquartile range of any region, relative to its median."""
    widest = max(regions, key=lambda r: r.timing.iqr_rel)
    rounds = sum(r.timing.rounds for r in regions)
    return (f"IQR {widest.timing.iqr_rel:.1%} of the median ({widest.label}); {rounds} timed calls"
            + ("" if all(r.timing.stable for r in regions)
               else ", median not settled (or --roofline-min-time not spanned) within the time budget"))


BASELINE_WORDS = {"regressed": "REGRESSED", "noisy": "worse, not significant", "changed": "changed, not gated",
                  "improved": "improved", "inconclusive": "inconclusive"}


def baseline_lines(description: str, records: Iterable[TestRecord]) -> list[str]:
    """The baseline gate in the summary (from ``results.json`` records): which sessions, then every test that moved
    (regressions first, then changes that were not significant or not gated, then improvements and tests too new to
    judge), each with its explanation, and a count per verdict."""
    lines = [description]
    compared = [(r.nodeid, r.baseline, r.baseline.verdict) for r in records
                if r.baseline is not None and r.baseline.verdict]
    order = list(BASELINE_WORDS)
    for nodeid, b, verdict in sorted((x for x in compared if x[2] in BASELINE_WORDS),
                                     key=lambda x: order.index(x[2])):
        word = BASELINE_WORDS[verdict]
        if b.excused:
            word += f" ({b.excused}: not failed)"
        detail = b.statistic if verdict == "inconclusive" else b.explanation
        lines.append(f"  {word}: {nodeid}: {detail}")
    counts: dict[str, int] = {}
    for _, _, verdict in compared:
        counts[verdict] = counts.get(verdict, 0) + 1
    if counts:
        lines.append("  " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return lines


def auto_cores_line(placements: Iterable[Placement | None]) -> str:
    """Say once what ``--roofline-cores auto`` did when it took fewer than all cores (rows say it only when
    a neighbour was busy): ``cores: auto: each call site ran on 1 of 2 cores, judged against 1-core roofs``."""
    counts = sorted({(p.count, len(p.allowed)) for p in placements
                     if p is not None and getattr(p, "setting", "") == "auto" and p.count < len(p.allowed)})
    if not counts:
        return ""
    shares = ", ".join(f"{used} of {allowed}" for used, allowed in counts)
    return (f"cores: auto: call sites ran on {shares} cores (half the machine's, the least loaded at each call "
            "site), judged against roofs for that many; --roofline-cores all for every core")


# A measured call cannot beat the hardware: a fraction this far above 1 means the roof it was judged against
# is wrong (a disturbed characterization, a pinned value off by a factor), not that the code is fast.
IMPOSSIBLE_FRACTION = 1.2


def impossible_fraction_message(verdict: Verdict, machine: Machine, origin: str) -> str | None:
    """An error message naming the roof that must be wrong when ``verdict.fraction`` > IMPOSSIBLE_FRACTION."""
    if verdict.fraction <= IMPOSSIBLE_FRACTION:
        return None
    sources = dict(machine.info.get("sources") or {})
    named = []
    for bound in sorted(verdict.bound_shares or {verdict.bound: 1.0}, key=lambda b: -(verdict.bound_shares or {})
                        .get(b, 1.0)):
        kind, _, name = bound.partition(":")
        if kind == "compute" and name in machine.peak_flops:
            key, value = f"peak_flops.{name}", f"{machine.peak_flops[name] / 1e9:.4g} GFLOP/s"
        elif kind == "memory":
            try:
                value = f"{machine.bandwidth_for(name) / 1e9:.4g} GB/s"
            except ValueError:
                continue
            key = f"bandwidth.{name}"
        else:
            continue
        named.append(f"{key} = {value} ({sources.get(key, machine.info.get('source', 'unknown source'))})")
    return (f"roofline: attained fraction {verdict.fraction:.3g} is above {IMPOSSIBLE_FRACTION:g}: the call ran "
            f"faster than the roof allows, so the roof is wrong, not the code fast: "
            f"{'; '.join(named) or verdict.bound} from {origin}. Re-measure it (--roofline-recharacterize) or "
            "fix the pinned file.")


def roof_notes(machine: Machine, flops: Mapping[str, float]) -> list[str]:
    """Notes for precisions judged against another precision's roof because this machine emulates them."""
    return [note for precision, count in flops.items() if count > 0
            for note in [emulated_note(machine, precision)] if note]


def machine_line(machine: Machine) -> str:
    """One line: every roof with the kernel that set it, emulated/fallback/flagged roofs called out."""
    info = machine.info
    sources = dict(info.get("sources") or {})
    emulated = dict(info.get("emulated") or {})

    def source(key: str) -> str:
        text = str(sources.get(key, info.get("source", "?")))
        return text.split(" (", 1)[0]

    parts = []
    for precision, value in machine.peak_flops.items():
        tag = source(f"peak_flops.{precision}")
        if precision in emulated:
            tag = (f"emulated: measured {float(emulated[precision].get('measured_flops', 0)) / 1e9:.3g}, "
                   f"judged on the {emulated[precision].get('roof_from', 'fp32')} roof")
        parts.append(f"{precision} {value / 1e9:.4g} GFLOP/s [{tag}]")
    parts += [f"{level} {value / 1e9:.4g} GB/s [{source(f'bandwidth.{level}')}]"
              for level, value in machine.bandwidth.items()]
    method = info.get("method") or info.get("source") or "?"
    flags = [f"{key}: {info[key]}" if key != "not_kept" else str(info[key])
             for key in ("not_kept", "disturbed", "inconsistent", "degraded") if info.get(key)]
    if info.get("fallback_reason"):
        flags.append(f"fallback: {str(info['fallback_reason']).splitlines()[0][:120]}")
    return (f"machine: {machine.name} ({method}): {', '.join(parts)}"
            + (f" -- NOT KEPT (this session only, not cached): {'; '.join(flags)}" if flags else ""))


def short_machine_line(machine: Machine) -> str:
    """The machine in one short line for the default summary: its roofs to three digits, without their
    sources (those, and every flag, under ``-v`` and in results.json)."""
    info = machine.info
    method = info.get("method") or info.get("source") or "?"
    roofs = ", ".join(f"{precision} {value / 1e9:.3g}" for precision, value in machine.peak_flops.items())
    levels = ", ".join(f"{level} {value / 1e9:.3g}" for level, value in machine.bandwidth.items())
    flags = [key for key in ("not_kept", "disturbed", "inconsistent", "degraded", "fallback_reason") if info.get(key)]
    how = "" if method == "ert" else f" ({method})"  # measured here is the usual case; pinned or fallback is said
    return (f"machine: {machine.name}{how}: {roofs or '-'} GFLOP/s; {levels or '-'} GB/s"
            + (f" -- NOT KEPT, this session only ({', '.join(flags)}; -v for details)" if flags else ""))
