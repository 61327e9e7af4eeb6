"""The history site's reader, verdict rule and change points, on hand-made data."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

from pytest_roofline.record.sessions import Session as GateSession
from pytest_roofline.site import verdicts
from pytest_roofline.site.history_reader import HistoryFileWarning, read_history


def _history_file(path: Path, start: str, key: str, fraction: float = 0.5, **overrides: object) -> Path:
    document = {"format": "pytest-roofline-history", "schema": 1,
                "session": {"id": start, "start": start, "exit_status": 0,
                            "git": {"commit": "ab" * 20, "branch": "main", "dirty": False}},
                "machine": {"key": key, "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
                "tests": [{"nodeid": "t.py::test_a", "fraction": fraction, "params": {}, "function": "t.py::test_a"}]}
    document.update(overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_reader_orders_by_start_groups_by_key_and_skips_bad_files_with_one_warning_each(tmp_path: Path) -> None:
    # File names sort against the start times, and one file of machine b sits in a's folder.
    _history_file(tmp_path / "a" / "1.json", "2026-01-03T00:00:00+00:00", "a", 0.3)
    _history_file(tmp_path / "a" / "2.json", "2026-01-01T00:00:00+00:00", "a", 0.1)
    _history_file(tmp_path / "a" / "3.json", "2026-01-02T00:00:00+01:00", "b", 0.2)
    (tmp_path / "a" / "corrupt.json").write_text("{not json")
    _history_file(tmp_path / "a" / "foreign.json", "2026-01-01T00:00:00+00:00", "a", format="something-else")
    _history_file(tmp_path / "a" / "newer.json", "2026-01-01T00:00:00+00:00", "a", schema=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sessions = read_history(tmp_path)
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, HistoryFileWarning))
    assert len(messages) == 3
    assert [m.split(":")[0].rsplit("/", 1)[1] for m in messages] == ["corrupt.json", "foreign.json", "newer.json"]
    assert "schema 2 is newer" in messages[2]
    assert list(sessions) == ["a", "b"]
    assert [next(iter(s.tests.values())).fraction for s in sessions["a"]] == [0.1, 0.3]
    assert sessions["b"][0].short_commit == "ab" * 6
    # the site reads the one Session the gates read: the start "+01:00" written in UTC, ordered by the time
    assert type(sessions["b"][0]) is GateSession
    assert sessions["b"][0].start == "2026-01-01T23:00:00.000000+00:00"


def test_reader_filters_machine_and_since(tmp_path: Path) -> None:
    from datetime import datetime, timezone
    for day in (1, 2, 3):
        _history_file(tmp_path / f"{day}.json", f"2026-01-0{day}T12:00:00+00:00", "a")
        _history_file(tmp_path / f"b{day}.json", f"2026-01-0{day}T12:00:00+00:00", "b")
    since = datetime(2026, 1, 2, tzinfo=timezone.utc)
    sessions = read_history(tmp_path, machine="a", since=since)
    assert list(sessions) == ["a"]
    assert [s.started.day for s in sessions["a"]] == [2, 3]


PRIOR = [1.00, 1.01, 1.02, 1.03, 1.04]


def test_a_clear_drop_is_a_regression_with_the_exact_p_value() -> None:
    recent = [0.90, 0.91, 0.92, 0.93, 0.94]
    result = verdicts.compare(recent, PRIOR)
    assert result.verdict == "regressed"
    assert result.change == pytest.approx(0.92 / 1.02 - 1)
    # Every recent value below every prior one: U = 0, the most extreme of C(10, 5) = 252 splits, both tails.
    assert result.p_value == pytest.approx(2 / 252)
    assert verdicts.compare(PRIOR, recent).verdict == "improved"


def test_the_permutation_fallback_matches_scipy_without_ties() -> None:
    recent, prior = [1, 2, 3, 4, 5, 6, 7], [3.5, 8, 9, 10]
    p, method = verdicts._permutation_p(recent, prior)
    assert method == "exact permutation U test"
    assert verdicts._u_statistic(recent, prior) == 4.0  # 4, 5, 6 and 7 exceed 3.5; nothing exceeds 8, 9, 10
    pytest.importorskip("scipy")
    assert p == pytest.approx(verdicts.p_value(recent, prior)[0])


def test_small_or_insignificant_changes_are_steady_and_short_histories_new() -> None:
    # Significant (every value lower) but only 3.2 % down: under the 5 % minimum.
    assert verdicts.compare([0.985, 0.986, 0.987, 0.988, 0.989], PRIOR).verdict == "steady"
    # 10 % down in the median but interleaved: not significant.
    mixed = verdicts.compare([0.80, 1.05, 0.90, 1.04, 0.918], PRIOR)
    assert mixed.verdict == "steady" and mixed.p_value > 0.05
    assert verdicts.compare([1.0, 1.0], [1.0]).verdict == "new"
    assert verdicts.trend([1.0] * 7).verdict == "steady"  # 5 recent against 2 prior, all equal
    assert verdicts.trend([1.0] * 6).verdict == "new"  # 1 prior value


def test_change_points_find_a_step_and_nothing_in_noise() -> None:
    pytest.importorskip("ruptures")
    from pytest_roofline.site.changepoints import change_points, noise_sigma

    wiggle = [1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.01]
    series = [0.5 * w for w in wiggle] + [0.4 * w for w in wiggle]
    found = change_points(series)
    assert [cp.index for cp in found] == [10]
    assert found[0].before == pytest.approx(0.5) and found[0].after == pytest.approx(0.4)
    assert found[0].change == pytest.approx(-0.2)
    assert change_points([0.5 * w for w in wiggle * 3]) == []
    assert change_points([0.5, 0.4, 0.5]) == []  # shorter than two segments of 3
    # Differences of log values alternate in size; their median over 0.6745 * sqrt(2) is the noise.
    logs = [0.0, 0.1, 0.0, 0.1]
    assert noise_sigma(logs) == pytest.approx(0.1 / 0.6745 / math.sqrt(2))
