"""The timing loop's logic with a fake clock and fake page-fault counters: no timed assertions."""

from __future__ import annotations

import itertools

import pytest

from pytest_roofline.measure.timing import TimingPolicy, summarize, time_callable


class FakeClock:
    """Each call of the measured function advances time by the next step and takes the next fault count."""

    def __init__(self, steps: list[float], faults: list[int] | None = None) -> None:
        self.now = 0.0
        self.steps = steps
        self.fault_steps = faults or [0]
        self.calls = 0
        self.minor = 0

    def __call__(self) -> float:
        return self.now

    def faults(self) -> tuple[int, int]:
        return self.minor, 0

    def work(self) -> None:
        index = self.calls
        self.now += self.steps[min(index, len(self.steps) - 1)]
        self.minor += self.fault_steps[min(index, len(self.fault_steps) - 1)]
        self.calls += 1


def timed(clock: FakeClock, **policy: float) -> object:
    return time_callable(clock.work, clock=clock, faults=clock.faults, policy=TimingPolicy(**policy))


def test_median_of_constant_work_is_exact_and_stable() -> None:
    clock = FakeClock([0.010])
    stats = timed(clock, max_time_s=1.0)
    assert stats.median_s == pytest.approx(0.010)
    assert stats.stable and not stats.budget_limited
    assert stats.rounds >= 10  # two batches are needed to see that the median settled
    assert stats.warmup_rounds == 3  # no page faults: three quiet warm-up calls in a row
    assert clock.calls == stats.rounds + stats.warmup_rounds
    assert stats.measure_s == pytest.approx(0.010 * clock.calls)


def test_a_call_longer_than_the_budget_runs_one_warmup_and_three_timed_calls() -> None:
    # Issue 7: a 2 s call under a 1 s budget is called at most 5 times, counting the counted call.
    clock = FakeClock([2.0])
    stats = timed(clock, max_time_s=1.0)
    assert (stats.warmup_rounds, stats.rounds, clock.calls) == (1, 3, 4)
    assert stats.budget_limited
    assert stats.measure_s == pytest.approx(8.0)


def test_the_budget_covers_warmup_and_timed_calls() -> None:
    # 0.1 s calls, 1 s budget: 3 quiet warm-up calls (0.3 s), then timed calls while the next one still fits.
    clock = FakeClock([0.1])
    stats = timed(clock, max_time_s=1.0, rel_tolerance=0.0)
    assert stats.warmup_rounds == 3
    assert stats.rounds == 7
    assert stats.measure_s == pytest.approx(1.0)
    assert not stats.budget_limited  # more than the minimum ran


def test_warmup_goes_on_while_calls_fault_and_faults_of_timed_calls_are_recorded() -> None:
    # First-touch faults in the first three calls, then a steady 5 faults per call that never stops.
    clock = FakeClock([0.01], faults=[300, 200, 100, 5])
    stats = timed(clock, max_time_s=0.2, warmup_share=0.1)
    assert stats.warmup_rounds == 2  # 2 calls fill the 0.02 s warm-up share even though faults go on
    assert stats.minor_faults[:2] == (100, 5)
    assert stats.faults_per_call == 5
    assert stats.to_dict()["minor_faults"][:2] == [100, 5]


def test_warmup_stops_when_faults_stop() -> None:
    clock = FakeClock([0.001], faults=[50, 50, 50, 0])
    stats = timed(clock, max_time_s=1.0)
    assert stats.warmup_rounds == 6  # three faulting calls, then three quiet ones in a row
    assert stats.faults_per_call == 0


def test_one_quiet_call_is_not_the_end_of_warmup() -> None:
    # Measured in a fresh process (tuned malloc, 8 MiB add output): 2079, 0, then 2048 faults for six
    # more calls before the heap settled. Stopping at the first quiet call would time the faulting ones.
    clock = FakeClock([0.001], faults=[2079, 0] + [2048] * 6 + [0])
    stats = timed(clock, max_time_s=1.0)
    assert stats.warmup_rounds == 11  # 8 calls with a quiet one among them, then 3 quiet in a row
    assert stats.faults_per_call == 0 and sum(stats.minor_faults) == 0


def test_quiet_warmup_must_be_positive() -> None:
    with pytest.raises(ValueError, match="quiet_warmup"):
        TimingPolicy(quiet_warmup=0)


def test_timed_calls_span_min_time_before_the_median_counts_as_settled() -> None:
    # Constant 1 ms calls settle at the second check (10 rounds); with min_time_s=0.1 they go on until the
    # timed calls have spanned 100 ms: batches of 5, 5, 5, 7, 11, 16, 24, 36 end at 109 calls.
    quick = timed(FakeClock([0.001]), max_time_s=1.0)
    assert quick.rounds == 10
    clock = FakeClock([0.001])
    stats = timed(clock, max_time_s=1.0, min_time_s=0.1)
    assert stats.stable and stats.rounds == 109
    assert clock.calls == stats.rounds + stats.warmup_rounds
    # max_rounds ends it too, settled: 1 ms calls capped at 40 rounds (batches 5, 5, 5, 7, 11, then 7).
    capped = timed(FakeClock([0.001]), max_time_s=1.0, min_time_s=0.1, max_rounds=40)
    assert capped.stable and capped.rounds == 40
    # The budget still wins: 1 ms calls under a 50 ms budget stop before it, unsettled by min_time_s.
    short = timed(FakeClock([0.001]), max_time_s=0.05, min_time_s=0.1)
    assert not short.stable and short.measure_s <= 0.05 + 1e-9


def test_a_long_run_exports_samples_spread_over_its_whole_span() -> None:
    # 2,500 calls whose times count up: the export keeps 1,000 of them, evenly spaced, first to last.
    stats = summarize([float(i) for i in range(1, 2501)], minor_faults=list(range(2500)),
                      major_faults=[0] * 2500)
    exported = stats.to_dict()
    assert len(exported["samples_s"]) == len(exported["minor_faults"]) == 1000
    assert exported["samples_s"][:3] == [1.0, 3.0, 6.0] and exported["samples_s"][-1] == 2498.0
    assert exported["minor_faults"][:3] == [0, 2, 5]  # the same calls as the times
    assert summarize([1.0, 2.0]).to_dict()["samples_s"] == [1.0, 2.0]


def test_slow_calls_stop_at_min_rounds_when_the_budget_is_spent() -> None:
    clock = FakeClock([0.5])
    stats = timed(clock, max_time_s=1.0, min_rounds=3)
    assert stats.rounds == 3 and stats.warmup_rounds == 1
    assert stats.median_s == pytest.approx(0.5)


def test_warmup_calls_are_not_in_the_statistics() -> None:
    clock = FakeClock([1.0, 1.0] + [0.001] * 1000)  # two slow first calls (page faults, JIT)
    stats = timed(clock, max_time_s=10.0, min_warmup=2)
    assert stats.max_s == pytest.approx(0.001)


def test_summary_statistics_by_hand() -> None:
    stats = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (stats.median_s, stats.min_s, stats.max_s) == (3.0, 1.0, 100.0)
    assert (stats.q1_s, stats.q3_s) == (2.0, 4.0)
    assert stats.iqr_rel == pytest.approx(2.0 / 3.0)
    assert stats.mean_s == pytest.approx(22.0)


def test_bad_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_time_s"):
        TimingPolicy(max_time_s=0)
    with pytest.raises(ValueError, match="min_rounds"):
        TimingPolicy(min_rounds=10, max_rounds=5)
    with pytest.raises(ValueError, match="min_warmup"):
        TimingPolicy(min_warmup=0)
    with pytest.raises(ValueError, match="min_time_s"):
        TimingPolicy(min_time_s=-0.1)


def test_setup_runs_before_every_call_outside_the_timed_interval() -> None:
    clock = FakeClock([0.01])
    events: list[str] = []

    def setup() -> None:
        clock.now += 5.0  # a slow setup: none of it may show in the timed calls
        events.append("setup")

    def work() -> None:
        events.append("call")
        clock.work()

    stats = time_callable(work, clock=clock, faults=clock.faults, setup=setup,
                          policy=TimingPolicy(max_time_s=100.0, rel_tolerance=0.0, max_rounds=6))
    assert events == ["setup", "call"] * (stats.warmup_rounds + stats.rounds)
    assert stats.median_s == pytest.approx(0.01) and stats.max_s == pytest.approx(0.01)


def test_setup_may_return_fresh_arguments() -> None:
    seen: list[tuple[object, ...]] = []
    fresh = iter(range(100))

    stats = time_callable(lambda *a, **k: seen.append((a, k)), (0,), {"k": 0},
                          setup=lambda: ((next(fresh),), {"k": "new"}),
                          policy=TimingPolicy(max_time_s=100.0, max_rounds=3, first_batch=3))
    assert [a for a, _ in seen] == [(i,) for i in range(stats.warmup_rounds + stats.rounds)]
    assert {k["k"] for _, k in seen} == {"new"}


def test_setup_returning_something_else_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match=r"setup must return None or \(args, kwargs\)"):
        time_callable(lambda: None, setup=lambda: 42)


def test_before_timed_call_runs_untimed_before_each_timed_call() -> None:
    # The hook for work that must run beside the timed calls (a live probe of the roof), never inside them.
    clock = FakeClock([0.01])
    seen: list[float] = []

    def hook(previous_s: float) -> None:
        seen.append(previous_s)
        clock.now += 1.0  # slow, and outside the timed interval

    stats = time_callable(clock.work, clock=clock, faults=clock.faults, before_timed_call=hook,
                          policy=TimingPolicy(max_time_s=100.0, rel_tolerance=0.0, max_rounds=6))
    assert len(seen) == stats.rounds == 6
    assert seen[0] == 0.0 and seen[1:] == pytest.approx([0.01] * 5)
    assert stats.max_s == pytest.approx(0.01)


def test_a_hook_that_evicted_the_data_gets_one_untimed_call_after_it() -> None:
    clock = FakeClock([0.01])
    calls_before: list[int] = []

    def hook(previous_s: float) -> bool:
        calls_before.append(clock.calls)
        return len(calls_before) % 2 == 1  # every other hook evicts the call's data

    stats = time_callable(clock.work, clock=clock, faults=clock.faults, before_timed_call=hook,
                          policy=TimingPolicy(max_time_s=100.0, rel_tolerance=0.0, max_rounds=4))
    assert stats.rounds == 4
    # between the hooks: the rewarm call (after hooks 1 and 3) plus the timed call
    assert [b - a for a, b in itertools.pairwise(calls_before)] == [2, 1, 2]


def test_no_profile_hook_runs_while_calls_are_timed_and_it_is_restored_after() -> None:
    """A change trace (--roofline-compare on Python 3.11) or another tool's profile hook must not run inside timed
    calls: it would slow them and so the fraction."""
    import sys

    from pytest_roofline.measure.timing import DEFAULT_POLICY, time_callable

    seen: list[str] = []

    def hook(frame: object, event: str, arg: object) -> None:
        if event == "call":
            seen.append(frame.f_code.co_name)  # type: ignore[attr-defined]

    def timed_work() -> int:
        return sum(range(100))

    sys.setprofile(hook)
    try:
        stats = time_callable(timed_work, policy=DEFAULT_POLICY)
        timed_work()  # after timing: the hook is back
    finally:
        restored = sys.getprofile()
        sys.setprofile(None)
    assert stats.rounds >= 1 and restored is hook
    assert seen.count("timed_work") == 1  # the call after, never one of the timed ones
