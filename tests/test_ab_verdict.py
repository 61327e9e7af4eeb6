"""The A/B verdict and its words (ab/verdict.py, ab/verdict_text.py, record/ab_record.py): work against time,
inconclusive and steady notes, the table, the typed record, and the band a test was judged on."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import pytest
from ab_fakes import ab, region, twelve

from pytest_roofline.ab.paired_stats import (
    over_process_pairs,
)
from pytest_roofline.ab.verdict import compare_regions, process_record
from pytest_roofline.ab.verdict_text import failure_message, inside_band_move, process_effects, said_move, summary_lines
from pytest_roofline.gates.comparison import Tolerances
from pytest_roofline.history.baseline import _measured
from pytest_roofline.record.tests import TestRecord


def test_work_is_not_time_changed_versus_regressed() -> None:
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))
    # 8 % more work, the same time (pairs agree within the band): the work changed, the code is not slower
    same_time = compare_regions([region(1.0, [0.995, 1.0, 1.005], flops=1.08e8)], tolerances, "REF", "compute:fp32")
    assert same_time is not None and same_time.verdict == "changed" and same_time.failed_on == ()
    # 8 % more work and 8 % more time, twelve pairs 1 % apart: the claim interval above the band, regressed on time
    slower = compare_regions([region(1.08, twelve(1.08), flops=1.08e8)], tolerances, "REF", "compute:fp32")
    assert slower is not None and slower.verdict == "regressed" and slower.failed_on == ("time",)
    # pairs that disagree (0.98 .. 1.12): the interval reaches 1, so no verdict on time
    noisy = compare_regions([region(1.05, [0.98, 1.12, 1.05])], tolerances, "REF", "compute:fp32")
    assert noisy is not None and noisy.time.verdict == "inconclusive" and noisy.verdict == "inconclusive"
    assert noisy.failed_on == () and "process pairs 0.980 1.120 1.050" in noisy.explanation


def test_a_ratio_inside_the_band_with_an_interval_past_it_is_inconclusive_not_steady() -> None:
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))
    # mean of the logs ~1.000; sd ~3 %: t(2) = 4.30 puts the interval at about [0.93, 1.08], past the 3 % band
    wide = compare_regions([region(1.0, [0.97, 1.0, 1.03])], tolerances, "REF", "compute:fp32")
    assert wide is not None and wide.time.verdict == "inconclusive" and wide.verdict == "inconclusive"
    assert wide.time.ci is not None and wide.time.ci[0] < 1 / 1.03 and wide.time.ci[1] > 1.03
    assert "reaches past the ±3% band" in wide.explanation
    assert wide.explanation.endswith("more process pairs (--roofline-compare-pairs) or a longer --roofline-max-time "
                                     "narrow it")
    # the same mean with pairs that agree to 0.5 %: the interval [0.988, 1.012] lies inside the band
    narrow = compare_regions([region(1.0, [0.995, 1.0, 1.005])], tolerances, "REF", "compute:fp32")
    assert narrow is not None and narrow.time.verdict == "same" and narrow.verdict == "steady"


def test_an_inconclusive_note_says_which_level_to_sample_more() -> None:
    """Pairs 3 % apart whose own turns are known to ±0.2 % (se 0.1 %): the spread is the pairs' state, which only
    more pairs sample; the same pairs with turns of ±6 % (se ~3 %, as far apart as the pairs are): the turns
    explain it, and a longer budget per pair narrows it too, if the pairs ran out of budget; pairs whose turns
    reached their own target would not use a longer one."""
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))

    def with_turns(half_width: float, limited: bool = True) -> dict[str, Any]:
        record = region(1.0, [0.97, 1.0, 1.03])
        record["compare"]["within"] = [{"ratio": r, "ci": [r / (1 + half_width), r * (1 + half_width)], "turns": 40,
                                        "budget_limited": limited} for r in record["compare"]["pair_ratios"]]
        return record

    def note(record: dict[str, Any]) -> str:
        result = compare_regions([record], tolerances, "REF", "compute:fp32")
        assert result is not None and result.time.verdict == "inconclusive"
        return result.explanation

    assert note(with_turns(0.002)).endswith("the pairs differ by more than their own turns explain: more process "
                                           "pairs (--roofline-compare-pairs) narrow it most, a longer "
                                           "--roofline-max-time hardly")
    # turns of ±1.5 % (se ~0.75 %): the pairs' 3 % spread is 16 times their variance, still the pairs'
    assert "narrow it most" in note(with_turns(0.015))
    # turns of ±3 % (se ~1.5 %): 4 times, at the threshold: either
    assert note(with_turns(0.03)).endswith("more process pairs (--roofline-compare-pairs) or a longer "
                                           "--roofline-max-time narrow it")
    assert note(with_turns(0.06)).endswith("more process pairs (--roofline-compare-pairs) or a longer "
                                           "--roofline-max-time narrow it")
    assert note(with_turns(0.06, limited=False)).endswith(
        "more process pairs (--roofline-compare-pairs) narrow it (each pair's turns reached their own target)")


def test_an_inconclusive_change_the_pairs_place_past_a_third_of_the_band_is_said_slower() -> None:
    """A planted 3 % conv slowdown's twelve pairs (CPU VM, tenth round) against a 3 % band: the 90 % interval
    reaches past 1.03, so neither steady nor failed; its claim interval (the last look's, 99.3 %) lies above 1.01
    (a third of the band),
    so the note says "slower all the same". Identical code's inconclusive pairs (0.97, 1.0, 1.03) are not said."""
    tolerances = Tolerances(0.1, 0.03, ("time", "fraction"))
    pairs = [1.000, 1.035, 1.041, 1.026, 1.024, 1.024, 1.018, 1.023, 1.028, 1.059, 1.034, 1.017]

    def explained(ratios: list[float]) -> str:
        result = compare_regions([region(1.0, ratios)], tolerances, "REF", "compute:fp32")
        assert result is not None and result.time.verdict == "inconclusive" and result.verdict == "inconclusive"
        return result.explanation

    logs = [math.log(r) for r in pairs]
    mean, half = statistics.fmean(logs), 3.306245 * statistics.stdev(logs) / math.sqrt(12)  # t(0.9965, 11)
    low, high = math.exp(mean - half), math.exp(mean + half)
    assert 1.01 < low < 1.03 < high  # by hand: [1.0137, 1.0411]
    assert (f"; slower all the same: the 99.3% interval [{low:.3f}, {high:.3f}] lies above ×1.010; process pairs"
            in explained(pairs))
    faster = explained([1 / r for r in pairs])  # the mirror, on the log scale: below 1 / 1.01
    assert f"; faster all the same: the 99.3% interval [{1 / high:.3f}, {1 / low:.3f}] lies below ×0.990" in faster
    assert "all the same" not in explained([0.97, 1.0, 1.03])
    time = {"ratio": math.exp(mean), "claim_ci": [low, high], "verdict": "inconclusive"}
    record = {"verdict": "inconclusive", "max_slowdown": 0.03, "changes": {"time": time}}
    assert said_move(ab(record)) == "slower" and inside_band_move(ab(record)) is None  # said in the note, not twice
    assert said_move(ab({**record, "verdict": "regressed"})) is None
    # inconclusive on the fraction alone, the time decided: no note on the time, nothing said
    assert said_move(ab({**record, "changes": {"time": {**time, "verdict": "same"}}})) is None


def test_paired_numbers_only_and_call_sites_combined_pair_by_pair() -> None:
    # this side's region time was replaced by a solo re-measure (0.2 ms); the record keeps the pairs' 1.1 ms
    one = region(1.1, [1.1, 1.1, 1.1], this_time=0.2e-3)
    result = compare_regions([one], Tolerances(0.1, 0.03, ("time",)), "REF", None)
    assert result is not None and result.time.now == pytest.approx(1.1e-3)
    # two sites, REF times 3 ms and 1 ms: pair j's log ratio is (3 log a_j + log b_j) / 4
    sites = [(3e-3, [1.0, 1.02, 0.98]), (1e-3, [2.0, 2.0, 2.0])]
    top = over_process_pairs(sites)
    assert top is not None
    assert top.ratios == pytest.approx(tuple(math.exp((3 * math.log(a) + math.log(2.0)) / 4)
                                             for a in (1.0, 1.02, 0.98)))
    assert over_process_pairs([(1e-3, [1.0, 1.0, 1.0]), (1e-3, [1.0, 1.0])]) is None  # unequal pair counts
    record = process_record([one])
    assert record["process_pairs"] == 3 and record["pair_ratios"] == pytest.approx([1.1, 1.1, 1.1])
    assert record["sites"][0]["within"][0]["turns"] == 10


def test_one_line_says_when_process_pairs_disagree() -> None:
    records = [("t::a", ab({"pair_ratios": [1.0, 1.01, 0.99]})), ("t::b", ab({"pair_ratios": [0.96, 1.04, 1.0]})),
               ("t::new", None)]
    line = process_effects(records, 0.03)
    assert line is not None and line.startswith("process effects of ±4.2 %") and "t::b" in line
    assert process_effects(records[:1], 0.03) is None


def test_a_steady_test_the_pairs_place_past_a_third_of_the_band_is_said_not_failed() -> None:
    def steady(ratio: float, claim: list[float], tolerance: float = 0.03) -> dict:
        return {"verdict": "steady", "max_slowdown": tolerance, "pair_ratios": [ratio] * 3, "between_cv": 0.001,
                "changes": {"time": {"ratio": ratio, "ci": claim, "claim_ci": claim, "now": 1.024e-3,
                                     "reference": 1e-3},
                            "fraction": {"now": 0.5, "reference": 0.5}}}

    # a third of a 3 % band is 1.01: a 99 % interval from 1.012 is past it, one from 1.008 is not
    slower, unsure = steady(1.024, [1.012, 1.037]), steady(1.02, [1.008, 1.033])
    faster = steady(0.975, [0.962, 0.988])  # 0.988 < 1 / 1.01 = 0.9901
    assert inside_band_move(ab(slower)) == ("slower, inside the ±3% band (max_slowdown): time ×1.024, "
                                        "99% interval [1.012, 1.037]")
    assert inside_band_move(ab(unsure)) is None
    assert (inside_band_move(ab(faster)) or "").startswith("faster, inside the ±3% band (max_slowdown): time ×0.975")
    # the faster side mirrors on the log scale: below 1 / 1.01 = 0.990099, not below 1 - 0.01 = 0.99
    assert (inside_band_move(ab(steady(0.98, [0.97, 0.99005]))) or "").startswith("faster")
    assert inside_band_move(ab(steady(1.02, [1.009, 1.03]))) is None  # short of a third of the band
    assert inside_band_move(ab(steady(1.024, [1.012, 1.037], tolerance=0.06))) is None  # a third of 6 %: 1.02
    assert (inside_band_move(ab(steady(1.024, [1.012, 1.037], tolerance=0.025))) or "").startswith(
        "slower, inside the ±2.5% band")
    assert inside_band_move(ab({**slower, "changes": {"time": {"ratio": 1.024, "claim_ci": None}}})) is None
    assert inside_band_move(ab({**slower, "verdict": "worse"})) is None  # a failed test says more already
    lines = summary_lines("HEAD~1", "0" * 40, [("t::slower", ab(slower)), ("t::unsure", ab(unsure)),
                                                ("t::new", None)])
    assert "  steady: t::slower: slower, inside the ±3% band (max_slowdown): time ×1.024" in "\n".join(lines)
    assert not any("t::unsure:" in line for line in lines)


def test_an_a_b_block_reads_typed_and_writes_back_unchanged() -> None:
    # the block as judge_compare writes it: the comparison, REF, the band and the process pairs' record
    pairs = twelve(1.08)
    result = compare_regions([region(1.08, pairs)], Tolerances(0.1, 0.03, ("time", "fraction")), "REF", None)
    assert result is not None
    written = json.loads(json.dumps({**result.to_dict(), "ref": "HEAD~1", "commit": "c" * 40, "pairs": 30,
                                     "max_drop": 0.1, "max_slowdown": 0.03, "auto_band": True,
                                     "ref_outcome": "passed", **process_record([region(1.08, pairs)])}))
    block = ab(written)
    assert block.to_dict() == written  # every key kept, typed or in extra
    assert block.verdict == "regressed" and block.compared and block.failed_on == ("time",)
    # the pairs' geometric mean (the t-interval's), with the claim interval's level at the last look
    assert block.time is not None and block.time.ratio == pytest.approx((1.0692 * 1.08 * 1.0908) ** (1 / 3))
    assert block.time.claim_level == pytest.approx(0.993) and "claim_level" not in block.time.extra
    assert block.time.now == pytest.approx(1.08e-3) and block.time.reference == pytest.approx(1e-3)
    assert block.pair_ratios == tuple(pairs) and block.process_pairs == 12 and block.auto_band
    assert block.extra["ref_outcome"] == "passed" and block.extra["sites"][0]["label"] == "step"
    # through the test's record too
    record = TestRecord.from_dict({"nodeid": "t", "compare": written})
    assert record.compare == block and record.to_dict()["compare"] == written
    # a test that was not compared, and values of the wrong type
    error = ab({"verdict": "error", "explanation": "the REF twin crashed"})
    assert not error.compared and error.to_dict() == {"verdict": "error", "explanation": "the REF twin crashed"}
    odd = ab({"verdict": 3, "pairs": True, "pair_ratios": [1.0, "x"], "changes": {"time": {"ratio": "1.1"}}})
    assert (odd.verdict, odd.pairs, odd.pair_ratios) == (None, None, (1.0,))
    assert odd.time is not None and odd.time.ratio is None and not odd.compared


def test_a_b_records_stay_out_of_baselines() -> None:
    assert _measured(TestRecord("t", fraction=0.5))
    assert not _measured(TestRecord("t", fraction=0.5, compare=ab({"verdict": "steady"})))


def test_a_tests_auto_band_is_the_widest_its_call_sites_were_judged_with() -> None:
    from pytest_roofline.ab.verdict import sites_band

    def judged(band: float | None, compared: bool = True) -> dict[str, Any]:
        return {"compare": {"compared": compared, **({} if band is None else {"max_slowdown": band})}}

    assert sites_band([judged(0.02), judged(0.02)]) == 0.02
    assert sites_band([judged(0.02), judged(0.03)]) == 0.03
    assert sites_band([judged(0.02), judged(0.03, compared=False)]) == 0.02  # not compared: not judged
    assert sites_band([judged(None)]) == sites_band([]) == 0.03  # an older record: the wide band
    settled = {"compare": {"compared": True, "max_slowdown": 0.03, "settled": True}}
    assert sites_band([settled]) == sites_band([settled, settled]) == 0.03  # every site settled: the wide band
    assert sites_band([judged(0.02), settled]) == 0.02  # beside a site on 2 %: that site's claim is not blunted
    assert sites_band([judged(0.03), settled]) == 0.03


def test_a_failure_says_why_the_auto_band_is_that_wide() -> None:
    pairs = [1.026, 1.024, 1.025, 1.025]
    said = compare_regions([region(1.025, pairs)], Tolerances(0.1, 0.02, ("time",)), "REF", "compute:fp32")
    assert said is not None and said.verdict == "regressed"
    record = {"max_slowdown": 0.02, "max_drop": 0.1, "ref": "REF", "pairs": 40, "auto_band": True,
              **process_record([region(1.025, pairs)])}
    assert ("fails on: time rose more than max_slowdown 2% (auto: its process pairs agreed within 2.5%)"
            in failure_message("t", said, ab(record)))
    wide = {**record, "max_slowdown": 0.03}
    assert "max_slowdown 3% (auto: its process pairs spread more than 2.5%)" in failure_message("t", said, ab(wide))
    assert "max_slowdown 2%\n" in failure_message("t", said, ab({**record, "auto_band": False})) + "\n"


def test_a_records_last_look_is_read_as_a_pool_size_or_the_default() -> None:
    # two sites of twelve pairs each: combined pair by pair at the last look's level (99.3 %) when the records
    # say a pool of 12, at the interim level (99.99 %) when they say 20; nonsense reads as the default pool
    tolerances = Tolerances(0.1, 0.03, ("time",))
    levels = {}
    for look in (12, 20, "x", None):
        sites = [region(1.08, twelve(1.08)), region(1.08, twelve(1.08))]
        for site_record in sites:
            site_record["compare"]["last_look"] = look
        said = compare_regions(sites, tolerances, "REF", "compute:fp32")
        assert said is not None and said.time.claim_level is not None
        levels[look] = said.time.claim_level
    assert levels[12] == levels["x"] == levels[None] == pytest.approx(0.993)
    assert levels[20] == pytest.approx(1 - 0.001 / 17)
