"""The gate and the ncu fallback policy as plain Python: no pytester, no pytest session."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.errors import CountersNotPermitted, NcuNotFound, NoKernelsInRange
from pytest_roofline.gates.judge import Judgement, judge, keep, remeasure_contended
from pytest_roofline.measure.regions import Region
from pytest_roofline.measure.timing import summarize
from pytest_roofline.model import KernelSample, Machine, evaluate
from pytest_roofline.record.tests import Measured
from pytest_roofline.session import ncu_fallback
from pytest_roofline.session.settings import MarkerOptions, Settings
from pytest_roofline.session.state import RooflineState, TestEntry

# 100 GFLOP/s fp32, 10 GB/s DRAM. A GEMM of M=N=K=100 does 2*M*N*K = 2e6 FLOPs: t_min = 2e6 / 1e11 = 20 us.
MACHINE = {"name": "unit", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}}
GEMM = KernelSample("mm", flops={"fp32": 2 * 100**3}, bytes={"DRAM": 3 * 100 * 100 * 4})
T_MIN = 2e6 / 1e11


class FakeRecorder:
    """The recorder's face the gate uses: regions, their verdict, contention, and a confirming re-measure."""

    def __init__(self, machine: Machine, times: Sequence[float], contended: bool = False) -> None:
        self.machine = machine
        self.times = list(times)  # the first measurement, then each confirming one
        self.regions = [self._region(self.times.pop(0))]
        self.contended: list[Any] = [object()] if contended else []  # call sites to measure again
        self.busy_now = contended  # whether the latest measurement had no free core
        self.confirm_calls = 0
        self.remeasured = 0
        self.calls: dict[int, Any] = {}  # index -> (counter, fn, args, kwargs, setup) of each call site

    def _region(self, seconds: float) -> Region:
        timing = summarize([seconds] * 5)
        return Region("mm", "declared", [GEMM], timing, evaluate(GEMM, self.machine, seconds))

    def verdict(self) -> Any:
        return self.regions[0].verdict

    def judged_machine(self) -> Machine:
        return self.machine

    def measured(self) -> Measured:
        return Measured(self.verdict(), self.machine, None, (), "declared", tuple(r.to_dict() for r in self.regions))

    def is_contended(self) -> bool:
        return self.busy_now

    def confirm(self) -> bool:
        self.confirm_calls += 1
        second = self._region(self.times.pop(0))
        if second.verdict.fraction > self.regions[0].verdict.fraction:  # the faster of the two is kept
            self.regions = [second]
        return True

    def time_ops(self) -> None:
        """No per-op pass for declared work."""

    def remeasure_contended(self) -> int:
        self.remeasured += 1
        self.busy_now = False
        self.regions = [self._region(self.times.pop(0))]
        return 1


def make_state(tmp_path: Path, **overrides: Any) -> RooflineState:
    machine_file = tmp_path / "machine.json"
    machine_file.write_text(json.dumps(MACHINE))
    fields: dict[str, Any] = {
        "enabled": True, "directory": tmp_path / "out", "machine_file": machine_file, "counter": "auto",
        "device": "cpu", "max_time_s": 0.05, "recharacterize": False, "malloc": "default", "confirm": "off"}
    fields.update(overrides)
    return RooflineState(Settings(**fields))


def entry_for(state: RooflineState, min_fraction: float | None, times: Sequence[float],
              contended: bool = False) -> TestEntry:
    entry = TestEntry("test_mm", min_fraction, FakeRecorder(state.machine(), times, contended))
    state.tests[entry.nodeid] = entry
    return entry


def test_a_test_at_its_threshold_passes(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    entry = entry_for(state, 0.5, [T_MIN / 0.5])  # fraction exactly 0.5
    assert entry.recorder.verdict().fraction == pytest.approx(0.5)
    assert judged(state, entry, MarkerOptions(min_fraction=0.5), xfail=False).failure is None


def judged(state: RooflineState, entry: TestEntry, options: MarkerOptions | None, xfail: bool) -> Judgement:
    """Judge the test and keep the judgement on its entry, as the plugin does."""
    outcome = judge(state, entry, entry.recorder.measured(), options, xfail=xfail)
    keep(entry, outcome)
    return outcome


def test_after_a_confirmation_the_later_gate_judges_the_measurement_kept(tmp_path: Path) -> None:
    """Below its threshold at first, above it measured once more: the A/B gate after it (as the baseline gate)
    is handed the kept measurement, never the one thrown away."""
    state = make_state(tmp_path, confirm="on")
    state.compare_ref = {"ref": "HEAD", "commit": "0" * 40}
    entry = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.8])
    seen: list[float] = []

    def compare(state: RooflineState, entry: TestEntry, measured: Measured, options: MarkerOptions | None
                ) -> Judgement:
        assert measured.verdict is not None
        seen.append(measured.verdict.fraction)
        return Judgement()

    outcome = judge(state, entry, entry.recorder.measured(), MarkerOptions(min_fraction=0.5), xfail=False,
                    compare=compare)
    assert outcome.failure is None and outcome.confirmed == (pytest.approx(0.25), pytest.approx(0.8))
    assert seen == [pytest.approx(0.8)]


def test_judging_writes_nothing_to_the_test_it_judges(tmp_path: Path) -> None:
    state = make_state(tmp_path, confirm="on")
    entry = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.3])  # below its threshold twice: fails, with a chart
    outcome = judge(state, entry, entry.recorder.measured(), MarkerOptions(min_fraction=0.5), xfail=False)
    assert outcome.failure is not None and entry.extra == {} and entry.artifacts == []
    assert outcome.confirmed == (pytest.approx(0.25), pytest.approx(0.3))
    assert outcome.record_fields()["confirmed"] == {"first": pytest.approx(0.25), "second": pytest.approx(0.3)}
    assert [Path(p).suffix for p in outcome.artifacts] == [".png", ".csv"] and outcome.min_fraction == 0.5
    keep(entry, outcome)
    assert entry.extra["confirmed"]["second"] == pytest.approx(0.3) and entry.artifacts == list(outcome.artifacts)


def test_below_threshold_fails_with_the_fraction_and_writes_artifacts(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    entry = entry_for(state, 0.5, [T_MIN / 0.25])  # 80 us for 20 us of work: fraction 0.25
    outcome = judged(state, entry, MarkerOptions(min_fraction=0.5), xfail=False)
    assert outcome.failure is not None and outcome.error is None
    assert "0.25" in outcome.failure and "0.5" in outcome.failure
    assert [Path(p).suffix for p in entry.artifacts] == [".png", ".csv"]
    assert all(Path(p).is_file() for p in entry.artifacts)


def test_confirm_keeps_the_faster_measurement(tmp_path: Path) -> None:
    state = make_state(tmp_path, confirm="on")
    entry = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.8])  # a hiccup, then a clean measurement
    assert judged(state, entry, None, xfail=False).failure is None
    assert entry.extra["confirmed"] == {"first": pytest.approx(0.25), "second": pytest.approx(0.8)}


def test_confirm_fails_a_test_slow_both_times(tmp_path: Path) -> None:
    state = make_state(tmp_path, confirm="on")
    entry = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.3])
    assert judged(state, entry, None, xfail=False).failure is not None
    assert entry.extra["confirmed"]["second"] == pytest.approx(0.3)


def test_xfail_is_not_confirmed(tmp_path: Path) -> None:
    state = make_state(tmp_path, confirm="on")
    entry = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN])
    assert judged(state, entry, None, xfail=True).failure is not None
    assert entry.recorder.confirm_calls == 0


@pytest.mark.parametrize(("strict", "fails"), [(False, False), (True, True)])
def test_contended_measurement_is_excused_unless_strict(tmp_path: Path, strict: bool, fails: bool) -> None:
    state = make_state(tmp_path, strict=strict)
    entry = entry_for(state, 0.5, [T_MIN / 0.25], contended=True)
    assert (judged(state, entry, None, xfail=False).failure is not None) is fails


def test_a_fraction_no_roof_allows_is_an_error_naming_the_roof(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    entry = entry_for(state, 0.5, [T_MIN / 2])  # twice as fast as the roof allows
    outcome = judged(state, entry, None, xfail=False)
    assert outcome.failure is None
    assert outcome.error is not None and "peak_flops.fp32 = 100 GFLOP/s" in outcome.error


def test_uncounted_fail_policy_fails_before_the_threshold(tmp_path: Path) -> None:
    state = make_state(tmp_path, uncounted="fail")
    entry = entry_for(state, None, [T_MIN])
    entry.recorder.regions = [Region("mm", "analytic", [GEMM], summarize([T_MIN]), evaluate(GEMM, state.machine(),
                                     T_MIN), uncounted={"aten::weird": 400})]
    outcome = judged(state, entry, None, xfail=False)
    assert outcome.failure is not None and "aten::weird" in outcome.failure


def test_remeasured_contended_test_fails_the_session_only_when_still_below(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    slow = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.3], contended=True)
    slow.outcome = "passed"
    (done,) = remeasure_contended(state)
    assert done.entry is slow and done.failure is not None
    assert done.failure.startswith("roofline: attained fraction 0.300 is below min_fraction 0.5")
    assert slow.outcome == "failed" and slow.extra["contended"]["failed_when_remeasured"] is True
    assert slow.recorder.remeasured == 1 and not slow.recorder.contended and "not_gated" not in slow.extra

    state = make_state(tmp_path)
    fine = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.9], contended=True)
    fine.outcome = "passed"
    (done,) = remeasure_contended(state)
    assert done.failure is None and fine.outcome == "passed"


def test_contended_below_threshold_is_recorded_as_not_gated(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    entry = entry_for(state, 0.5, [T_MIN / 0.25], contended=True)
    assert judged(state, entry, None, xfail=False).failure is None
    assert entry.extra["not_gated"] == "contended"


def test_a_failed_or_strictly_gated_contended_test_is_not_measured_again(tmp_path: Path) -> None:
    state = make_state(tmp_path)
    failed = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.9], contended=True)
    failed.outcome = "failed"  # its message quoted this measurement: the table must quote it too
    assert remeasure_contended(state) == [] and failed.recorder.remeasured == 0 and not failed.recorder.contended

    state = make_state(tmp_path, strict=True)
    strict = entry_for(state, 0.5, [T_MIN / 0.25, T_MIN / 0.9], contended=True)
    strict.outcome = "passed"
    assert remeasure_contended(state) == [] and strict.recorder.remeasured == 0


# -- the ncu fallback policy ----------------------------------------------------------------------------------


class Choice:
    def __init__(self, setup: Any) -> None:
        self.setup = setup


class PendingRecorder:
    def __init__(self) -> None:
        self.counted_with: list[Any] = []

        self.notes: list[str | None] = []

    def count_pending(self, counter: Any, note: str | None = None) -> None:
        self.counted_with.append(counter)
        self.notes.append(note)


def pending_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: str,
                  profile_error: BaseException) -> tuple[RooflineState, TestEntry]:
    """A session that chose ncu, whose profiling of the test raises ``profile_error``."""
    from pytest_roofline.counters.ncu import deferred as parent

    def profile_test(*args: Any, **kwargs: Any) -> Any:
        raise profile_error

    monkeypatch.setattr(parent, "profile_test", profile_test)
    state = make_state(tmp_path, counter=counter)
    state._choice = Choice(setup=object())
    state.make_counter = lambda name: f"<{name} counter>"
    return state, TestEntry("test_gpu", 0.5, PendingRecorder())


CHILD = ncu_fallback.ChildRun(Path("."), None, False)


def test_auto_falls_back_to_analytic_for_this_and_later_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state, entry = pending_state(tmp_path, monkeypatch, "auto", NcuNotFound("ncu not found"))
    warnings: list[Warning] = []
    assert ncu_fallback.judge_pending(state, entry, "test_gpu", CHILD, warnings.append) == ncu_fallback.PendingOutcome()
    assert entry.recorder.counted_with == ["<analytic counter>"]
    assert state.choose_counter().name == "analytic"
    assert len(warnings) == 1 and "ncu not found" in str(warnings[0])


def test_auto_counts_analytically_in_a_compare_session_where_it_would_pick_ncu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.counters.ncu import deferred as parent

    monkeypatch.setattr(parent.backend, "detect_compute_capability", lambda: (9, 0))
    monkeypatch.setattr(parent.backend, "find_ncu", lambda: "/usr/local/cuda/bin/ncu")
    monkeypatch.setattr(parent, "counters_restricted", lambda: False)
    assert make_state(tmp_path).choose_counter().name == "ncu"  # a GPU runner: auto picks ncu
    compare = make_state(tmp_path, compare="HEAD~1")
    assert compare.choose_counter().name == "analytic" and compare.choose_counter().warning is None


def test_a_twin_gets_the_counter_this_side_resolved(tmp_path: Path) -> None:
    from pytest_roofline.ab.plugin.session import twin_roofline_args

    for given, sent in (("auto", "analytic"), ("analytic", "analytic"), ("declared", "declared")):
        state = make_state(tmp_path, counter=given, compare="HEAD~1")
        args = twin_roofline_args(state, tmp_path / "machine.json", tmp_path / "twin")
        assert f"--roofline-counter={sent}" in args


def test_explicit_ncu_without_counter_access_skips_this_and_later_tests(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    state, entry = pending_state(tmp_path, monkeypatch, "ncu", CountersNotPermitted("ERR_NVGPUCTRPERM"))
    first = ncu_fallback.judge_pending(state, entry, "test_gpu", CHILD, lambda w: None)
    assert first.skip == "roofline: ERR_NVGPUCTRPERM" and entry.recorder.counted_with == []
    later = TestEntry("test_gpu2", 0.5, PendingRecorder())
    assert ncu_fallback.judge_pending(state, later, "test_gpu2", CHILD, lambda w: None).skip == first.skip
    assert later.extra["ncu"] == {"error": first.skip, "logs": []}


@pytest.mark.parametrize("counter", ["ncu", "auto"])
def test_a_test_of_copies_only_is_counted_analytically_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: str) -> None:
    # the H100: dst.copy_(src) of 1 GiB ran as cudaMemcpy, ncu profiled no kernel, and the test was an error
    state, entry = pending_state(tmp_path, monkeypatch, counter, NoKernelsInRange("no kernel ran inside ..."))
    assert ncu_fallback.judge_pending(state, entry, "test_copy", CHILD, lambda w: None) == ncu_fallback.PendingOutcome()
    assert entry.recorder.counted_with == ["<analytic counter>"]
    assert entry.recorder.notes == [ncu_fallback.NO_KERNEL_NOTE] and "cudaMemcpy" in ncu_fallback.NO_KERNEL_NOTE
    assert entry.extra["ncu"]["error"].startswith("no kernel ran inside")
    assert state.choose_counter().setup is not None  # later tests still go to ncu


def test_explicit_ncu_that_is_missing_is_an_error_of_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state, entry = pending_state(tmp_path, monkeypatch, "ncu", NcuNotFound("ncu not found"))
    outcome = ncu_fallback.judge_pending(state, entry, "test_gpu", CHILD, lambda w: None)
    assert outcome.error == "roofline: --roofline-counter=ncu: ncu not found"
    assert outcome.skip is None and outcome.fail is None


def test_an_unreadable_profile_is_an_error_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state, entry = pending_state(tmp_path, monkeypatch, "ncu", KeyError("gpu__time_duration.sum"))
    outcome = ncu_fallback.judge_pending(state, entry, "test_gpu", CHILD, lambda w: None)
    assert outcome.error is not None and "could not use the ncu profile of test_gpu" in outcome.error
    assert "gpu__time_duration.sum" in entry.extra["ncu"]["error"]


def test_the_failure_speaks_of_the_roofs_the_test_was_judged_against(tmp_path: Path) -> None:
    """Under --roofline-cores auto a call site is judged against the roofs of the cores it ran on, not the whole
    machine's: its message (and chart) must name those, or they disagree with its fraction."""
    state = make_state(tmp_path)
    one_core = Machine("unit, 1 core", {"fp32": 0.5e11}, {"DRAM": 0.5e10})  # half the machine's roofs
    entry = entry_for(state, 0.9, [T_MIN / 0.25])
    entry.recorder.machine = one_core
    entry.recorder.regions = [entry.recorder._region(2 * T_MIN / 0.25)]  # judged on one core: 0.25 of its roof
    outcome = judged(state, entry, None, xfail=False)
    assert outcome.failure is not None and "of a 50 GFLOP/s roof" in outcome.failure
    table = next(Path(p) for p in entry.artifacts if p.endswith(".kernels.csv"))
    row = dict(zip(*[line.split(",") for line in table.read_text().splitlines()[:2]], strict=True))
    assert float(row["t_min_s"]) == pytest.approx(2e6 / 0.5e11)  # the GEMM on one core's roof, not the machine's


# -- nothing counted ------------------------------------------------------------------------------------------


class Traced:
    def __init__(self) -> None:
        self.trace = [type("Op", (), {"op": "aten::view"})(), type("Op", (), {"op": "aten::clone"})()]


def no_work(state: RooflineState, min_fraction: float | None) -> TestEntry:
    entry = entry_for(state, min_fraction, [T_MIN, T_MIN], contended=True)
    nothing = KernelSample("numpy", flops={}, bytes={})
    entry.recorder.regions = [Region("numpy", "analytic", [nothing], summarize([1e-3] * 5),
                                     evaluate(nothing, state.machine(), 1e-3))]
    entry.recorder.calls = {0: (Traced(), None, (), {}, None)}
    return entry


def test_nothing_counted_under_a_threshold_is_an_error_naming_the_ops(tmp_path: Path) -> None:
    state = make_state(tmp_path, confirm="on")
    entry = no_work(state, 0.5)
    outcome = judged(state, entry, MarkerOptions(min_fraction=0.5), xfail=False)
    assert outcome.failure is None and outcome.error is not None
    assert outcome.error.startswith("roofline: no work counted: declare it with roofline.declare(flops=..., "
                                    "bytes=...)")
    assert "the counter saw aten::view, aten::clone; 1 call site(s), 1 ms per call" in outcome.error
    assert entry.nothing_counted is not None and entry.nothing_counted.ops == ("aten::view", "aten::clone")
    # not measured again (no confirmation, nothing left for the end of the session), no chart
    assert entry.recorder.confirm_calls == 0 and entry.recorder.contended == [] and entry.artifacts == []
    entry.outcome = "error"
    assert remeasure_contended(state) == [] and entry.recorder.remeasured == 0


def test_nothing_counted_without_a_threshold_passes_and_says_so(tmp_path: Path) -> None:
    from pytest_roofline.output.summary import verdict_text
    from pytest_roofline.plugin.ci_output import record_of

    state = make_state(tmp_path)
    entry = no_work(state, None)
    outcome = judge(state, entry, entry.recorder.measured(), None, xfail=False)
    assert (outcome.failure, outcome.error, outcome.warning) == (None, None, None) and entry.extra == {}
    assert outcome.record_fields() == {} and outcome.min_fraction is None
    assert outcome.nothing_counted is not None and entry.nothing_counted is None  # kept on the entry by keep()
    keep(entry, outcome)
    entry.outcome = "passed"
    record = record_of(entry)
    assert record.fraction is None and record.bound is None and record.time_s == pytest.approx(1e-3)
    assert verdict_text(record) == "passed (no work counted)"
    # written under its results.json key, read back the same
    written = record.to_dict()
    assert written["no_work"] == {"ops": ["aten::view", "aten::clone"], "message": outcome.nothing_counted.message}
    assert type(record).from_dict(written).nothing_counted == outcome.nothing_counted
