"""The A/B verdict of a test: its call sites' paired ratios combined into the shared comparison record
(``gates.comparison.TestComparison``), explained in roofline terms, and the lines the summary prints."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pytest_roofline.ab.paired_stats import (
    AUTO_BANDS,
    AUTO_STEADY_CV,
    CLAIM_CONFIDENCE,
    EQUIVALENCE_CONFIDENCE,
    BetweenPairs,
    PairedRatio,
    between_pairs,
    inside_band,
    verdict,
)
from pytest_roofline.gates.baseline_stats import Change
from pytest_roofline.gates.comparison import TestComparison, Tolerances, combine
from pytest_roofline.measure.work import Work, work_change
from pytest_roofline.model import sum_maps
from pytest_roofline.model.units import time_text

_TIME_VERDICT = {"slower": "worse", "faster": "better", "unchanged": "same", "inconclusive": "inconclusive"}


def undecided(paired: PairedRatio, tolerance: float) -> bool:
    """A ratio inside the band whose equivalence interval (90 %; :attr:`.PairedRatio.equivalence_interval`) still
    reaches past it: the pairs cannot tell "unchanged" from a change of the size asked about (``inconclusive``,
    not ``steady``)."""
    interval = paired.equivalence_interval
    return interval is None or not (inside_band(interval[0], tolerance) and inside_band(interval[1], tolerance))


def time_verdict(paired: PairedRatio, tolerance: float) -> str:
    """``worse`` / ``better`` (beyond the band, the claim interval excluding 1), ``same`` (the equivalence
    interval inside the band), else ``inconclusive``."""
    said = verdict(paired, tolerance)
    if said == "unchanged" and undecided(paired, tolerance):
        said = "inconclusive"
    return _TIME_VERDICT[said]


PAIRS_DOMINATE = 4.0  # the pairs' spread past this many times what their turns explain: turns <= 1/4 of it


def what_narrows(spread: BetweenPairs | None, within: Sequence[Mapping[str, Any]] | None) -> str:
    """Which level to sample more. The pairs' spread beyond what their own turns explain (a pair's state: where
    its buffers landed) is narrowed only by more pairs; the turns' part also by a longer budget per pair, and only
    where the pairs ran out of budget (not where their turns reached their own target). From the pairs' spread
    (``spread.cv``) and their own 95 % intervals; the general advice where they do not say."""
    pairs = "more process pairs (--roofline-compare-pairs)"
    either = f"{pairs} or a longer --roofline-max-time narrow it"
    records = list(within or ())
    if records and all("budget_limited" in w for w in records) and not any(w["budget_limited"] for w in records):
        return f"{pairs} narrow it (each pair's turns reached their own target)"
    own = [(math.log(w["ci"][1]) - math.log(w["ci"][0])) / (2 * 1.96) for w in records
           if w.get("ci") and w["ci"][0] > 0 and w["ci"][1] > w["ci"][0]]
    if spread is None or spread.pairs < 3 or len(own) != spread.pairs:
        return either
    turns = sum(se * se for se in own) / len(own)  # what the turns alone would spread the pairs by
    if spread.cv ** 2 > PAIRS_DOMINATE * turns:
        return (f"the pairs differ by more than their own turns explain: {pairs} narrow it most, a longer "
                f"--roofline-max-time hardly")
    return either


def inconclusive_note(paired: PairedRatio, record_ratios: Sequence[float] | None, tolerance: float,
                      within: Sequence[Mapping[str, Any]] | None = None) -> str:
    """Why no verdict: the interval against the band, what the process pairs said, and what would narrow it."""
    if paired.ci is None:
        return (f"; inconclusive: too few process pairs for an interval ({paired.pairs}); more process pairs "
                f"(--roofline-compare-pairs) give one")
    spread = between_pairs(record_ratios, robust=False) if record_ratios else None
    pairs = "" if spread is None else f"; process pairs {_ratios(record_ratios or ())} (CV {spread.cv:.1%})"
    beyond = not inside_band(paired.ratio, tolerance)
    claim = paired.claim_ci
    if beyond and claim is not None:  # a change too uncertain to claim
        where = f"the {CLAIM_CONFIDENCE:.0%} interval [{claim[0]:.3f}, {claim[1]:.3f}] reaches 1"
    else:
        low, high = paired.equivalence_interval or paired.ci
        level = f"{EQUIVALENCE_CONFIDENCE:.0%} " if paired.equivalence_ci is not None else ""
        where = f"the {level}interval [{low:.3f}, {high:.3f}] reaches past the ±{tolerance:.0%} band"
        if claim is not None and (way := sure_move(claim, tolerance)) is not None:
            # a change about the band's size: not failed, and not to be read as "no change" either
            edge = notice_edge(tolerance)
            side = f"above ×{edge:.3f}" if way == "slower" else f"below ×{1 / edge:.3f}"
            where += (f"; {way} all the same: the {CLAIM_CONFIDENCE:.0%} interval [{claim[0]:.3f}, "
                      f"{claim[1]:.3f}] lies {side}")
    return f"; inconclusive: {where}{pairs}; {what_narrows(spread, within)}"


def combined_ratio(sites: Sequence[tuple[float, PairedRatio]]) -> PairedRatio:
    """The test's ratio from its call sites' (REF's time, paired ratio): each weighted by its share of REF's
    time, on the log scale; the interval's ends combine the same way (as wide as the widest share allows)."""
    if len(sites) == 1:
        return sites[0][1]
    total = sum(t for t, _ in sites)
    if total <= 0 or any(r.ci is None for _, r in sites):
        return PairedRatio(math.exp(sum(math.log(r.ratio) * t for t, r in sites) / total) if total > 0 else
                           math.nan, None, sum(r.pairs for _, r in sites))
    log_ratio = sum(math.log(r.ratio) * t for t, r in sites) / total

    def combined(ends: Sequence[tuple[float, tuple[float, float]]]) -> tuple[float, float]:
        return (math.exp(sum(math.log(lo) * t for t, (lo, _) in ends) / total),
                math.exp(sum(math.log(hi) * t for t, (_, hi) in ends) / total))

    ci = combined([(t, r.ci) for t, r in sites if r.ci is not None])
    claim = combined([(t, r.claim_interval) for t, r in sites if r.claim_interval is not None])
    # the 90 % interval only where every site has one (a site of three pairs, or an older record, has its 95 % one)
    equivalence = (combined([(t, r.equivalence_ci) for t, r in sites if r.equivalence_ci is not None])
                   if all(r.equivalence_ci is not None for _, r in sites) else None)
    return PairedRatio(math.exp(log_ratio), ci, sum(r.pairs for _, r in sites), claim, equivalence)


def over_process_pairs(sites: Sequence[tuple[float, Sequence[float]]],
                       tolerance: float | None = None) -> BetweenPairs | None:
    """The test's per-pair ratios from its call sites' (REF's time, per-pair ratios), each pair's log ratio
    weighted by the sites' shares of REF's time, and the interval over them (:func:`.paired_stats.between_pairs`:
    t, or a robust one where that one claims a change beyond ``tolerance``); None unless every site was
    measured over the same number (at least two) of process pairs."""
    counts = {len(r) for _, r in sites}
    total = sum(t for t, _ in sites)
    if len(counts) != 1 or min(counts) < 2 or total <= 0:
        return None
    k = counts.pop()
    logs = [sum(t * math.log(r[j]) for t, r in sites) / total for j in range(k)]
    return between_pairs([math.exp(v) for v in logs], tolerance=tolerance)


def process_record(regions: Sequence[Mapping[str, Any]], tolerance: float | None = None) -> dict[str, Any]:
    """What varies between process pairs, for the test's record: per-pair ratios, their CV, and each call
    site's pairs (their own ratios and intervals, for diagnosis)."""
    compared = [r for r in regions if (r.get("compare") or {}).get("compared") and r["compare"].get("ref")]
    sites = [(float(r["compare"]["ref"]["time_s"]), r["compare"]["pair_ratios"]) for r in compared
             if r["compare"].get("pair_ratios")]
    top = over_process_pairs(sites, tolerance) if sites and len(sites) == len(compared) else None
    if not sites:
        return {}
    overall = {} if top is None else {"process_pairs": top.pairs, "pair_ratios": list(top.ratios),
                                      "between_cv": top.cv}
    interval = (f"{top.interval} over process pairs" if top is not None else
                str(compared[0]["compare"].get("interval") or "t over process pairs") if len(compared) == 1 else
                "over process pairs, site by site")
    return {**overall, "interval": interval,
            "sites": [{"label": r.get("label"), "pair_ratios": r["compare"]["pair_ratios"],
                       "within": [{"ratio": w["ratio"], "ci": w["ci"], "turns": w["turns"]}
                                  for w in r["compare"].get("within") or []]} for r in compared]}


def compare_regions(regions: Sequence[Mapping[str, Any]], tolerances: Tolerances, against: str,
                    bound: str | None) -> TestComparison | None:
    """The test's record from its regions (results.json dicts); None when no call site was compared."""
    compared = [r for r in regions if (r.get("compare") or {}).get("compared") and (r["compare"].get("ref"))]
    if not compared:
        return None
    sites, this_time, ref_time, this_tmin, ref_tmin = [], 0.0, 0.0, 0.0, 0.0
    for region in compared:
        pair, ref = region["compare"], region["compare"]["ref"]
        ratio = PairedRatio(float(pair["ratio"]), _interval(pair.get("ci")), int(pair["pairs"]),
                            _interval(pair.get("claim_ci")), _interval(pair.get("equivalence_ci")))
        sites.append((float(ref["time_s"]), ratio))
        # paired numbers only: the turns of the pairs, never a solo re-measure of this side
        this_time += float(pair.get("this_time_s") or region["time_s"])
        ref_time += float(pair.get("ref_time_s") or ref["time_s"])
        this_tmin += float(region["t_min_s"])
        ref_tmin += float(ref["t_min_s"])
    over_pairs = None
    if len(compared) > 1 and all(r["compare"].get("pair_ratios") for r in compared):
        over_pairs = over_process_pairs([(float(r["compare"]["ref"]["time_s"]), r["compare"]["pair_ratios"])
                                 for r in compared], tolerances.max_slowdown)
    paired = combined_ratio(sites) if over_pairs is None else over_pairs.as_paired()
    time = Change("time", this_time, ref_time, paired.ratio, paired.ci, None,
                  time_verdict(paired, tolerances.max_slowdown), paired.claim_ci, paired.equivalence_ci)
    # fraction = t_min / time on both sides (the same roofs): its ratio is the t_min ratio over the time ratio
    scale = this_tmin / ref_tmin if ref_tmin > 0 else 1.0

    def fraction_ci(ci: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if ci is None else (scale / ci[1], scale / ci[0])

    def over_scale(ci: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if ci is None else (ci[0] / scale, ci[1] / scale)

    f_ci, f_claim = fraction_ci(paired.ci), fraction_ci(paired.claim_ci)
    f_ratio = scale / paired.ratio
    this_f, ref_f = this_tmin / this_time, ref_tmin / ref_time
    # the fraction's drop judged as a slowdown: the time ratio over the t_min ratio, with its intervals
    f_paired = PairedRatio(paired.ratio / scale, over_scale(paired.ci), paired.pairs, over_scale(paired.claim_ci))
    f_verdict = _TIME_VERDICT[verdict(f_paired, 1 / (1 - tolerances.max_drop) - 1)]
    fraction = Change("fraction", this_f, ref_f, f_ratio, f_ci, None, f_verdict, f_claim)
    now = Work.of(sum_maps(r.get("flops_by_precision") or {} for r in compared),
                  sum_maps(r.get("bytes") or {} for r in compared))
    ref_work = Work.of(sum_maps((r["compare"]["ref"].get("flops_by_precision") or {}) for r in compared),
                       sum_maps((r["compare"]["ref"].get("bytes") or {}) for r in compared))
    work = None if now is None or ref_work is None else work_change(now, ref_work, bound)
    result = combine(against, time, fraction, work, tolerances.fail_on)
    if result.verdict != "inconclusive" or time.verdict != "inconclusive":
        return result
    ratios: Sequence[float] | None = None  # the pairs' ratios, where one set stands for the whole test
    within: Sequence[Mapping[str, Any]] | None = None  # and their own intervals, where the test has one site
    if over_pairs is not None:
        ratios = over_pairs.ratios
    elif len(compared) == 1:
        ratios = compared[0]["compare"].get("pair_ratios")
        within = compared[0]["compare"].get("within")
    return replace(result, explanation=result.explanation + inconclusive_note(paired, ratios,
                                                                               tolerances.max_slowdown, within))


def failure_message(nodeid: str, result: TestComparison, record: Mapping[str, Any]) -> str:
    """One message: the explanation, both sides' times and fractions, the ratio and its interval, the base."""
    t, f = result.time, result.fraction
    ci = "" if t.ci is None else f", 95% CI [{t.ci[0]:.3f}, {t.ci[1]:.3f}]"
    if t.claim_ci is not None:
        ci += f", {CLAIM_CONFIDENCE:.0%} CI [{t.claim_ci[0]:.3f}, {t.claim_ci[1]:.3f}]"
    why = {"time": f"time rose more than max_slowdown {record['max_slowdown']:.0%}{band_note(record)}",
           "fraction": f"fraction fell more than max_drop {record['max_drop']:.0%}",
           "work": "the counted work changed (fail_on includes work)"}
    ref = str(record.get("ref") or "REF")
    lines = [f"roofline: A/B regression: {result.explanation}",  # the explanation names REF once
             (f"  time per call {time_text(t.now, 4)} here, {time_text(t.reference, 4)} at {ref}; "
              f"paired ratio {t.ratio:.3f}{ci} over "
              + (f"{record['process_pairs']} process pairs ({record['pairs']} turns; {_interval_name(record)} over "
                 f"the pairs' Hodges-Lehmann ratios {_ratios(record['pair_ratios'])})" if record.get("pair_ratios") else
                 f"process pairs ({record['pairs']} turns; intervals over each site's pairs, combined site by site)"
                 if record.get("sites") else
                 f"{record['pairs']} pairs taken in turns (Hodges-Lehmann, Wilcoxon signed-rank interval)")),
             f"  fraction {f.now:.3g} here, {f.reference:.3g} at {ref}",
             f"  fails on: {'; '.join(why[q] for q in result.failed_on)}"]
    if result.work is not None and result.work.verdict != "same":
        lines.append(f"  work: {result.work.now.total_flops:.4g} FLOPs here, {result.work.reference.total_flops:.4g}"
                     f" at {ref}")
    return "\n".join(lines)


def band_note(record: Mapping[str, Any]) -> str:
    """Why the band is that wide, where it was the auto one (:func:`.paired_stats.auto_band`); else nothing."""
    if not record.get("auto_band"):
        return ""
    steady = float(record["max_slowdown"]) <= AUTO_BANDS[0]
    return f" (auto: its process pairs {'agreed within' if steady else 'spread more than'} {AUTO_STEADY_CV:.1%})"


def _interval_name(record: Mapping[str, Any]) -> str:
    """"t-interval", "signed-rank interval" or "trimmed-mean interval (Yuen)": which one decided
    (:func:`.paired_stats.between_pairs`)."""
    interval = str(record.get("interval", ""))
    if interval.startswith("signed-rank"):
        return "signed-rank interval"
    return "trimmed-mean interval (Yuen)" if interval.startswith("trimmed-mean") else "t-interval"


def _interval(value: Sequence[float] | None) -> tuple[float, float] | None:
    """A record's interval (a JSON list of two numbers) as a pair of floats; None for anything else."""
    return (float(value[0]), float(value[1])) if isinstance(value, (list, tuple)) and len(value) == 2 else None


def _ratios(ratios: Sequence[float]) -> str:
    return " ".join(f"{r:.3f}" for r in ratios)


def process_effects(records: Iterable[tuple[str, Mapping[str, Any] | None]], tolerance: float) -> str | None:
    """One line when some test's process pairs disagree by more than ``tolerance`` (max/min ratio - 1):
    "process effects of ±x %", x half the widest spread, naming that test; None when all agree."""
    widest, name = 0.0, ""
    for nodeid, record in records:
        ratios = [r for r in (record or {}).get("pair_ratios") or [] if r > 0]
        if len(ratios) >= 2 and max(ratios) / min(ratios) - 1 > widest:
            widest, name = max(ratios) / min(ratios) - 1, nodeid
    if widest <= tolerance:
        return None
    return (f"process effects of ±{100 * widest / 2:.1f} %: process pairs disagree by more than the tolerance "
            f"({tolerance:.0%}); widest at {name}; only the interval over pairs is to be trusted")


NOTICE_SHARE = 1 / 3  # a move not failed on is said when its 99 % interval lies beyond this share of the band


def notice_edge(tolerance: float) -> float:
    """The ratio a third of the band above 1 (its mirror below 1 is ``1 / notice_edge``)."""
    return 1 + NOTICE_SHARE * tolerance


def sure_move(claim: tuple[float, float], tolerance: float) -> str | None:
    """``slower`` / ``faster`` where the claim interval (99 %) lies wholly beyond a third of the band from 1
    (on the log scale), else None: a move too sure to be noise, said where the test is not failed on it."""
    edge = notice_edge(tolerance)
    if claim[0] > edge:
        return "slower"
    if claim[1] < 1 / edge:
        return "faster"
    return None


def _said(record: Mapping[str, Any]) -> tuple[str, tuple[float, float], float] | None:
    """(way, claim interval, tolerance) of a move :func:`said_move` says; None where it says none."""
    if record.get("verdict") not in ("steady", "inconclusive"):
        return None
    time = (record.get("changes") or {}).get("time") or {}
    if record["verdict"] == "inconclusive" and time.get("verdict") != "inconclusive":
        return None  # the time was decided; what was not is the fraction, and the note speaks of that
    claim, tolerance = _interval(time.get("claim_ci")), record.get("max_slowdown")
    if claim is None or tolerance is None or time.get("ratio") is None:
        return None
    way = sure_move(claim, float(tolerance))
    return None if way is None else (way, claim, float(tolerance))


def said_move(record: Mapping[str, Any]) -> str | None:
    """``slower`` / ``faster`` for a ``steady`` or ``inconclusive`` test whose move is said (:func:`sure_move`);
    None for any other. On kept CPU compare sessions at a 3 % band: 1 of 1,699 steady and none of
    224 inconclusive A/A comparisons; 22 of the 40 planted 3 % slowdowns that were not failed (compute-bound: 18
    of 25)."""
    said = _said(record)
    return None if said is None else said[0]


def inside_band_move(record: Mapping[str, Any]) -> str | None:
    """A ``steady`` test whose time the pairs place, at 99 %, more than a third of the band from 1 but not past
    the band: a move too small to fail on and too sure to be noise. Said, never failed; else None. (An
    ``inconclusive`` test's note says the same in its own words: :func:`inconclusive_note`.)"""
    said = _said(record) if record.get("verdict") == "steady" else None
    if said is None:
        return None
    way, claim, tolerance = said
    return (f"{way}, inside the ±{100 * tolerance:g}% band (max_slowdown): "
            f"time ×{float(record['changes']['time']['ratio']):.3f}, "
            f"{CLAIM_CONFIDENCE:.0%} interval [{claim[0]:.3f}, {claim[1]:.3f}]")


def summary_lines(ref: str, commit: str, records: Iterable[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
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
        if record is None or "changes" not in record:  # not compared: new at REF, or an error
            verdict = "new" if record is None else str(record.get("verdict"))
            label = "new (not in REF)" if verdict == "new" else "error: not compared"
            lines.append(f"{name:<40} {'-':>9} {'-':>9} {'-':>24}  {'-':>11}  {label}")
            counts[verdict] = counts.get(verdict, 0) + 1
            continue
        changes = record["changes"]
        t, f = changes["time"], changes["fraction"]
        ci = t.get("ci")
        interval = f"{t['ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{t['ratio']:.3f} [-]"
        per_pair = record.get("pair_ratios")
        spread = f"{_ratios(per_pair)} ({record['between_cv']:.1%})" if per_pair else "-"
        lines.append(f"{name:<40} {time_text(t['reference'], 4):>9} {time_text(t['now'], 4):>9} {interval:>24}  "
                     f"{f['reference']:.3f}→{f['now']:.3f}  {record['verdict']:<12}  {spread}")
        counts[record["verdict"]] = counts.get(record["verdict"], 0) + 1
    for nodeid, record in rows:
        if record is not None and record.get("verdict") not in ("steady",):
            explanation = str(record.get("explanation", ""))
            if record.get("verdict") == "error":  # the twin's log tail is in the test's failure
                explanation = explanation.split("\n", 1)[0]
            lines.append(f"  {record.get('verdict')}: {nodeid}: {explanation}")
        elif record is not None and (move := inside_band_move(record)) is not None:
            lines.append(f"  steady: {nodeid}: {move}")
    lines.append("  " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return lines
