"""The record both gates share (gates/comparison.py, measure/work.py) and history retention, on hand-made
numbers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_roofline.errors import SettingError
from pytest_roofline.gates.baseline_stats import Change, Spread
from pytest_roofline.gates.comparison import combine, explain
from pytest_roofline.history.retention import Keep, parse_keep, prune_machine
from pytest_roofline.measure.work import Work, usual_work, work_change
from pytest_roofline.record.tests import TestRecord

SPREAD = Spread(0.01, 4, "own")


def change(quantity: str, now: float, reference: float, verdict: str) -> Change:
    return Change(quantity, now, reference, now / reference, (0.9, 1.1), SPREAD, verdict)


def gemm(n: int) -> Work:
    # a GEMM's 2*M*N*K FLOPs and its compulsory bytes (A, B read and C written, fp32)
    return Work({"fp32": 2.0 * n**3}, {"DRAM": 3.0 * n * n * 4})


def test_work_ratio_is_read_where_the_test_is_bound() -> None:
    twice = Work({"fp32": 2 * 2.0 * 64**3}, {"DRAM": 2 * 3.0 * 64 * 64 * 4})
    assert work_change(twice, gemm(64), "compute:fp32").ratio == 2.0
    assert work_change(twice, gemm(64), "compute:fp32").verdict == "more"
    bigger = gemm(128)  # FLOPs x8, bytes x4
    assert work_change(bigger, gemm(64), "compute:fp32").ratio == 8.0
    assert work_change(bigger, gemm(64), "memory:DRAM").ratio == 4.0
    assert work_change(gemm(64), bigger, "compute:fp32").verdict == "less"
    assert work_change(gemm(64), gemm(64), "compute:fp32").verdict == "same"
    mixed = Work({"fp32": 2.0 * 64**3 * 2}, {"DRAM": 3.0 * 64 * 64 * 4 / 2})
    assert work_change(mixed, gemm(64), "memory:DRAM").verdict == "changed"


def test_work_from_a_record_and_the_usual_work_of_the_baseline() -> None:
    def work(**fields: object) -> Work | None:
        return Work.from_record(TestRecord.from_dict({"nodeid": "t", **fields}))

    assert work(flops_by_precision={"fp32": 8.0, "fp64": 0}, bytes={"DRAM": 4}) == Work({"fp32": 8.0}, {"DRAM": 4.0})
    assert work(flops_by_precision={"fp32": float("nan")}, bytes={}) is None
    assert work(flops_by_precision="x", bytes={}) is None and work(bytes={"DRAM": 4}) is None
    old, new = gemm(64), gemm(128)
    assert usual_work([old, old, new]) == old  # one session with other work is not the reference yet
    assert usual_work([old, new, new]) == new
    assert usual_work([old, new]) == new  # a tie: the latest
    assert usual_work([None, None]) is None


def test_explanations_say_which_of_work_and_fraction_moved() -> None:
    same_f = change("fraction", 0.80, 0.80, "same")
    time2 = change("time", 0.0475, 0.024, "worse")
    assert explain("the baseline", time2, same_f, work_change(Work({"fp32": 2.0}, {}), Work({"fp32": 1.0}, {}),
                                                               "compute:fp32")) == (
        "time ×1.98 since the baseline: work ×2.00 at the same fraction (0.80)")
    lower = change("fraction", 0.64, 0.80, "worse")
    assert explain("the baseline", change("time", 1.25, 1.0, "worse"), lower, work_change(
        gemm(8), gemm(8), "compute:fp32")) == "time ×1.25 since the baseline at the same work: fraction 0.80 → 0.64"
    assert explain("REF abc123", change("time", 2.5, 1.0, "worse"), lower, work_change(
        Work({"fp32": 2.0}, {}), Work({"fp32": 1.0}, {}), None)) == (
        "time ×2.50 against REF abc123: work ×2.00 and fraction 0.80 → 0.64")


def test_the_verdict_fails_only_on_what_is_asked() -> None:
    worse_t, same_f = change("time", 2.0, 1.0, "worse"), change("fraction", 0.8, 0.8, "same")
    more = work_change(Work({"fp32": 2.0}, {}), Work({"fp32": 1.0}, {}), None)
    both = combine("the baseline", worse_t, same_f, more, ("time", "fraction"))
    assert both.verdict == "regressed" and both.failed_on == ("time",)
    assert combine("the baseline", worse_t, same_f, more, ("fraction",)).verdict == "changed"
    steady_t = change("time", 1.0, 1.0, "same")
    assert combine("the baseline", steady_t, same_f, more, ("work",)).failed_on == ("work",)
    assert combine("the baseline", steady_t, same_f, None, ("time",)).verdict == "steady"
    noisy = change("time", 1.3, 1.0, "noisy")
    assert combine("the baseline", noisy, same_f, None, ("time",)).verdict == "noisy"
    faster = change("time", 0.5, 1.0, "better")
    assert combine("the baseline", faster, same_f, None, ("time",)).verdict == "improved"
    record = both.to_dict()
    assert record["changes"]["time"]["ratio"] == 2.0 and record["changes"]["work"]["verdict"] == "more"
    assert json.loads(json.dumps(record)) == record


def test_keep_is_parsed_with_a_clear_message() -> None:
    assert parse_keep("50", "--k") == Keep(sessions=50)
    assert parse_keep("30d", "--k") == Keep(days=30.0)
    assert parse_keep("all", "--k") is None
    assert parse_keep("", "--k") == Keep(sessions=200)
    with pytest.raises(SettingError, match=r"--k must be a number of sessions \(200\), of days \(90d\), or all"):
        parse_keep("forever", "--k")


def session_file(folder: Path, index: int, tests: tuple[str, ...]) -> Path:
    """A history record started ``index`` hours after 2026-11-01 00:00 UTC (retention reads what it parses)."""
    day, hour = index // 24 + 1, index % 24
    path = folder / f"202611{day:02d}T{hour:02d}0000Z-nogit-{index:04x}.json"
    path.write_text(json.dumps({"format": "pytest-roofline-history", "schema": 1,
                                "session": {"id": f"s{index}", "start": f"2026-11-{day:02d}T{hour:02d}:00:00+00:00"},
                                "machine": {"name": "m", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
                                "tests": [{"nodeid": t, "fraction": 0.5} for t in tests]}))
    return path


def test_fifty_sessions_stay_within_the_bound_and_a_rare_test_keeps_its_baseline(tmp_path: Path) -> None:
    # a nightly-only test ran in the first 3 sessions; 47 partial sessions of another test followed
    for index in range(50):
        session_file(tmp_path, index, ("nightly", "quick") if index < 3 else ("quick",))
        prune_machine(tmp_path, Keep(sessions=10), protect=3)
        assert len(list(tmp_path.glob("*.json"))) <= 10 * 1.1 + 3
    left = sorted(p.name for p in tmp_path.glob("*.json"))
    nightly = [n for n in left if "nightly" in (tmp_path / n).read_text()]
    assert len(nightly) == 3  # its 3 baseline sessions are kept whatever their age
    assert len(left) == 13


def test_days_keep_the_recent_files(tmp_path: Path) -> None:
    old = session_file(tmp_path, 0, ("a",))
    for index in range(1, 5):
        session_file(tmp_path, index, ("a",))
    os.utime(old, (0, 0))
    removed = prune_machine(tmp_path, Keep(days=1.0), protect=3)
    assert removed == [old]
    assert prune_machine(tmp_path, Keep(days=1.0), protect=3) == []
