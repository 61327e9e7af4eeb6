"""The timing loop's logic with a fake clock: no timed assertions."""

from __future__ import annotations

import pytest

from pytest_roofline.timing import TimingPolicy, summarize, time_callable


class FakeClock:
    """Each call of the measured function advances time by the next step."""

    def __init__(self, steps: list[float]) -> None:
        self.now = 0.0
        self.steps = steps
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.now += self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1


def test_median_of_constant_work_is_exact_and_stable() -> None:
    clock = FakeClock([0.010])
    stats = time_callable(clock.work, clock=clock, policy=TimingPolicy(max_time_s=1.0, min_rounds=5))
    assert stats.median_s == pytest.approx(0.010)
    assert stats.stable
    assert stats.rounds >= 10  # two batches are needed to see that the median settled
    assert stats.warmup_rounds >= 2
    assert clock.calls == stats.rounds + stats.warmup_rounds


def test_slow_calls_stop_at_min_rounds_when_the_budget_is_spent() -> None:
    clock = FakeClock([0.5])
    stats = time_callable(clock.work, clock=clock, policy=TimingPolicy(max_time_s=1.0, min_rounds=3))
    assert stats.rounds == 3
    assert stats.median_s == pytest.approx(0.5)


def test_warmup_calls_are_not_in_the_statistics() -> None:
    clock = FakeClock([1.0, 1.0] + [0.001] * 1000)  # two slow first calls (page faults, JIT)
    stats = time_callable(clock.work, clock=clock, policy=TimingPolicy(min_warmup=2))
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
