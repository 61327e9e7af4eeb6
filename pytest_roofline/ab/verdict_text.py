"""The words of the A/B verdict (:mod:`.verdict` decides it): a failed test's message, and the A/B table and
notes the session's summary prints from the tests' records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_roofline.ab.paired_stats import AUTO_BANDS, AUTO_STEADY_CV, level_text, sure_move
from pytest_roofline.gates.comparison import TestComparison
from pytest_roofline.model.units import time_text
from pytest_roofline.record.ab_record import ABRecord


def failure_message(nodeid: str, result: TestComparison, record: ABRecord) -> str:
    """One message: the explanation, both sides' times and fractions, the ratio and its interval, the base."""
    t, f = result.time, result.fraction
    ci = "" if t.ci is None else f", 95% CI [{t.ci[0]:.3f}, {t.ci[1]:.3f}]"
    if t.claim_ci is not None:
        ci += f", {level_text(t.claim_level)} CI [{t.claim_ci[0]:.3f}, {t.claim_ci[1]:.3f}]"
    why = {"time": f"time rose more than max_slowdown {record.max_slowdown or 0:.0%}{band_note(record)}",
           "fraction": f"fraction fell more than max_drop {record.max_drop or 0:.0%}",
           "work": "the counted work changed (fail_on includes work)"}
    ref = record.ref or "REF"
    lines = [f"roofline: A/B regression: {result.explanation}",  # the explanation names REF once
             (f"  time per call {time_text(t.now, 4)} here, {time_text(t.reference, 4)} at {ref}; "
              f"paired ratio {t.ratio:.3f}{ci} over "
              + (f"{record.process_pairs} process pairs ({record.pairs} turns; {_interval_name(record)} over "
                 f"the pairs' Hodges-Lehmann ratios {_ratios(record.pair_ratios)})" if record.pair_ratios else
                 f"process pairs ({record.pairs} turns; intervals over each site's pairs, combined site by site)"
                 if record.extra.get("sites") else
                 f"{record.pairs} pairs taken in turns (Hodges-Lehmann, Wilcoxon signed-rank interval)")),
             f"  fraction {f.now:.3g} here, {f.reference:.3g} at {ref}",
             f"  fails on: {'; '.join(why[q] for q in result.failed_on)}"]
    if result.work is not None and result.work.verdict != "same":
        lines.append(f"  work: {result.work.now.total_flops:.4g} FLOPs here, {result.work.reference.total_flops:.4g}"
                     f" at {ref}")
    return "\n".join(lines)


def band_note(record: ABRecord) -> str:
    """Why the band is that wide, where it was the auto one (:func:`.paired_stats.auto_band`); else nothing."""
    if not record.auto_band or record.max_slowdown is None:
        return ""
    steady = record.max_slowdown <= AUTO_BANDS[0]
    return f" (auto: its process pairs {'agreed within' if steady else 'spread more than'} {AUTO_STEADY_CV:.1%})"


def _interval_name(record: ABRecord) -> str:
    """"t-interval", "signed-rank interval" or "trimmed-mean interval (Yuen)": which one decided
    (:func:`.paired_stats.between_pairs`)."""
    interval = record.interval or ""
    if interval.startswith("signed-rank"):
        return "signed-rank interval"
    return "trimmed-mean interval (Yuen)" if interval.startswith("trimmed-mean") else "t-interval"


def _ratios(ratios: Sequence[float]) -> str:
    return " ".join(f"{r:.3f}" for r in ratios)


def process_effects(records: Iterable[tuple[str, ABRecord | None]], tolerance: float) -> str | None:
    """One line when some test's process pairs disagree by more than ``tolerance`` (max/min ratio - 1):
    "process effects of ±x %", x half the widest spread, naming that test; None when all agree."""
    widest, name = 0.0, ""
    for nodeid, record in records:
        ratios = [r for r in (record.pair_ratios if record is not None else ()) if r > 0]
        if len(ratios) >= 2 and max(ratios) / min(ratios) - 1 > widest:
            widest, name = max(ratios) / min(ratios) - 1, nodeid
    if widest <= tolerance:
        return None
    return (f"process effects of ±{100 * widest / 2:.1f} %: process pairs disagree by more than the tolerance "
            f"({tolerance:.0%}); widest at {name}; only the interval over pairs is to be trusted")


def _said(record: ABRecord) -> tuple[str, tuple[float, float], float] | None:
    """(way, claim interval, tolerance) of a move :func:`said_move` says; None where it says none."""
    time = record.time
    if record.verdict not in ("steady", "inconclusive") or time is None:
        return None
    if record.verdict == "inconclusive" and time.verdict != "inconclusive":
        return None  # the time was decided; what was not is the fraction, and the note speaks of that
    claim, tolerance = time.claim_ci, record.max_slowdown
    if claim is None or tolerance is None or time.ratio is None:
        return None
    way = sure_move(claim, tolerance)
    return None if way is None else (way, claim, tolerance)


def said_move(record: ABRecord) -> str | None:
    """``slower`` / ``faster`` for a ``steady`` or ``inconclusive`` test whose move is said (:func:`sure_move`);
    None for any other. On kept CPU compare sessions at a 3 % band: 1 of 1,699 steady and none of
    224 inconclusive A/A comparisons; 22 of the 40 planted 3 % slowdowns that were not failed (compute-bound: 18
    of 25)."""
    said = _said(record)
    return None if said is None else said[0]


def inside_band_move(record: ABRecord) -> str | None:
    """A ``steady`` test whose time the pairs place, at the claim level, more than a third of the band from 1 but
    not past the band: a move too small to fail on and too sure to be noise. Said, never failed; else None. (An
    ``inconclusive`` test's note says the same in its own words: :func:`.verdict.inconclusive_note`.)"""
    said = _said(record) if record.verdict == "steady" else None
    if said is None or record.time is None or record.time.ratio is None:
        return None
    way, claim, tolerance = said
    return (f"{way}, inside the ±{100 * tolerance:g}% band (max_slowdown): "
            f"time ×{record.time.ratio:.3f}, "
            f"{level_text(record.time.claim_level)} interval [{claim[0]:.3f}, {claim[1]:.3f}]")


def summary_lines(ref: str, commit: str, records: Iterable[tuple[str, ABRecord | None]]) -> list[str]:
    """The A/B table: test, REF time, this time, ratio [interval], fractions, verdict; then explanations."""
    rows = [(nodeid, r) for nodeid, r in records]
    lines = [(f"compare: against {ref} ({commit[:12]}), each call site in pairs of processes (this checkout, "
             "REF) taking turns; interval over the pairs")]
    head = (f"{'test':<40} {'REF':>9} {'this':>9} {'ratio [95% CI]':>24}  {'fraction':>11}  {'verdict':<12}  "
            "per-pair ratios (CV)")
    lines.append(head)
    counts: dict[str, int] = {}
    for nodeid, record in rows:
        name = nodeid if len(nodeid) <= 40 else "..." + nodeid[-37:]
        if record is None or record.time is None or record.fraction is None:  # not compared: new, or an error
            verdict = "new" if record is None else str(record.verdict)
            label = {"new": "new (not in REF)", "unchanged": "unchanged at REF: not compared"}.get(
                verdict, "error: not compared")
            lines.append(f"{name:<40} {'-':>9} {'-':>9} {'-':>24}  {'-':>11}  {label}")
            counts[verdict] = counts.get(verdict, 0) + 1
            continue
        t, f, ci = record.time, record.fraction, record.time.ci
        interval = f"{_number(t.ratio)} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{_number(t.ratio)} [-]"
        per_pair = record.pair_ratios
        spread = f"{_ratios(per_pair)} ({record.between_cv or 0:.1%})" if per_pair else "-"
        lines.append(f"{name:<40} {_time(t.reference):>9} {_time(t.now):>9} {interval:>24}  "
                     f"{_number(f.reference)}→{_number(f.now)}  {record.verdict!s:<12}  {spread}")
        counts[str(record.verdict)] = counts.get(str(record.verdict), 0) + 1
    for nodeid, record in rows:
        if record is not None and record.verdict == "unchanged":
            continue  # counted below; the table row says it
        if record is not None and record.verdict != "steady":
            explanation = record.explanation
            if record.verdict == "error":  # the twin's log tail is in the test's failure
                explanation = explanation.split("\n", 1)[0]
            lines.append(f"  {record.verdict}: {nodeid}: {explanation}")
        elif record is not None and (move := inside_band_move(record)) is not None:
            lines.append(f"  steady: {nodeid}: {move}")
    lines.append("  " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return lines


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _time(value: float | None) -> str:
    return "-" if value is None else time_text(value, 4)
