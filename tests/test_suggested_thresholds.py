"""Thresholds from history (``history/suggested_thresholds.py`` and ``python -m pytest_roofline thresholds``), checked
against values worked out by hand."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_roofline.commands import main
from pytest_roofline.history.suggested_thresholds import advise, advise_test, t_999
from pytest_roofline.record.sessions import Session
from pytest_roofline.record.tests import TestRecord


def test_student_t_quantiles_come_from_the_table_and_tend_to_the_normal() -> None:
    assert t_999(4) == 7.173 and t_999(30) == 3.385
    assert t_999(60) == pytest.approx(3.090 + 0.295 / 2)  # halfway in 1/df between df 30 and the normal
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_999(0)


def test_three_sessions_a_percent_apart() -> None:
    # log fractions ln 0.5 + (-0.01, 0, +0.01): median 0.5, sd 0.01. The bound 0.5 · exp(-22.327 · 0.01 ·
    # sqrt(4/3)) = 0.38637 is below 0.99 x the worst (0.49007), rounded down to 0.386; a slowdown is caught
    # from 0.5 / 0.386 · exp(1.645 · 0.01) - 1 = 0.3168.
    fractions = [0.5 * math.exp(x) for x in (-0.01, 0.0, 0.01)]
    advice = advise_test("t", "m", fractions, current=0.45)
    assert advice.median == pytest.approx(0.5) and advice.log_sd == pytest.approx(0.01)
    assert advice.suggested == 0.386
    assert advice.catches == pytest.approx(0.3168, abs=5e-4)
    assert advice.warning == "above the suggestion: clean sessions may fail it"


def test_steady_sessions_are_bounded_by_the_worst_one_seen() -> None:
    # Nine sessions at 0.80 and one at 0.79: sd of the logs ln(0.8/0.79) · sqrt(0.1) = 0.003978, so the bound
    # is 0.8 · exp(-4.297 · 0.003978 · sqrt(1.1)) = 0.7858, above 0.99 x 0.79 = 0.7821, which wins: 0.782.
    advice = advise_test("t", "m", [0.80] * 9 + [0.79], current=0.5)
    assert advice.log_sd == pytest.approx(math.log(0.8 / 0.79) * math.sqrt(0.1))
    assert advice.suggested == 0.782
    # 0.5 is far below: it catches only slowdowns beyond 0.8 / 0.5 · exp(1.645 · 0.003978) - 1 = 61 %
    assert advice.warning == "far below the suggestion: catches only slowdowns over 61%"


def test_two_sessions_are_too_few_and_bad_fractions_are_rejected() -> None:
    advice = advise_test("t", "m", [0.5, 0.6], current=None)
    assert advice.suggested is None and advice.catches is None and advice.warning == ""
    with pytest.raises(ValueError, match="fractions must be positive"):
        advise_test("t", "m", [0.5, 0.0, 0.4], current=None)


def _session(index: int, key: str, fractions: dict[str, float | None], min_fraction: float | None = None) -> Session:
    tests = {nodeid: TestRecord(nodeid, fraction=f, min_fraction=min_fraction) for nodeid, f in fractions.items()}
    return Session(id=f"s{index}", start=f"2026-11-25T10:{index:02d}:00", machine_key=key, commit=None, branch=None,
                   source=f"s{index}.json", tests=tests)


def test_advice_per_machine_from_each_tests_last_sessions() -> None:
    sessions = [_session(i, "zen4", {"a": 0.1 if i < 2 else 0.5, "b": None if i == 3 else 0.7}) for i in range(5)]
    sessions.append(_session(9, "xeon", {"a": 0.3}, min_fraction=0.2))
    sessions[-2] = _session(4, "zen4", {"a": 0.5, "b": 0.7}, min_fraction=0.4)
    advice = {(a.machine_key, a.nodeid): a for a in advise(sessions, last=3)}
    zen_a = advice[("zen4", "a")]
    assert zen_a.sessions == 3 and zen_a.median == 0.5 and zen_a.worst == 0.5  # the two 0.1 sessions aged out
    assert zen_a.current == 0.4 and zen_a.suggested == pytest.approx(0.495)  # sd 0: 0.99 x the worst
    assert advice[("zen4", "b")].sessions == 3  # its session without a fraction does not count
    assert advice[("xeon", "a")].sessions == 1 and advice[("xeon", "a")].suggested is None


def test_an_expected_failure_gets_no_warning() -> None:
    # The example suite's row-by-row matmul is marked xfail with min_fraction 0.5 while it reads 0.03: that a
    # clean session "fails" it is the point, so its row says xfail instead of warning.
    sessions = [_session(i, "zen4", {"slow": 0.03}, min_fraction=0.5) for i in range(3)]
    sessions = [replace(s, tests={"slow": replace(s.tests["slow"], outcome="xfailed")}) for s in sessions]
    (advice,) = advise(sessions)
    assert advice.expected_failure and advice.warning == "" and advice.suggested == pytest.approx(0.029, abs=1e-9)
    sessions[-1] = _session(2, "zen4", {"slow": 0.03}, min_fraction=0.5)  # no longer marked xfail
    assert advise(sessions)[0].warning == "above the suggestion: clean sessions may fail it"


def _results(directory: Path, index: int, fraction: float) -> None:
    document = {"schema": 1, "session": {"id": f"s{index}", "start": f"2026-11-25T10:0{index}:00"},
                "machine": {"name": "test machine"},
                "tests": [{"nodeid": "t.py::test_a", "fraction": fraction, "min_fraction": 0.75}]}
    (directory / f"s{index}.json").write_text(json.dumps(document))


def test_the_command_prints_a_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for index, fraction in enumerate((0.80, 0.81, 0.79, 0.80)):
        _results(tmp_path, index, fraction)
    assert main(["thresholds", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # 0.75 is above what four sessions support: 0.8 · exp(-10.215 · 0.010207 · sqrt(1.25)) = 0.71198
    assert "t.py::test_a" in out and "above the suggestion" in out
    assert main(["thresholds", str(tmp_path), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["sessions"] == 4 and row["median"] == pytest.approx(0.80) and row["current"] == 0.75
    assert row["suggested"] == 0.711 and row["warning"].startswith("above the suggestion")


def test_the_command_names_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["thresholds", str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["thresholds", str(tmp_path)]) == 1
    assert "no session" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["thresholds", str(tmp_path), "--last", "0"])
    assert "--last must be a whole number >= 1, got '0'" in capsys.readouterr().err


def test_the_table_fits_columns_and_the_history_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / ".roofline" / "history"
    folder.mkdir(parents=True)
    long_id = "tests/deep/" + "nested/" * 12 + "test_file.py::test_a_rather_long_name[fp32-1024]"
    for index, fraction in enumerate((0.80, 0.81, 0.79, 0.80)):
        _results(folder, index, fraction)
        path = folder / f"s{index}.json"
        path.write_text(path.read_text().replace("t.py::test_a", long_id))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["thresholds"]) == 0  # HISTORY omitted: .roofline/history, as the help says
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert any("test_file.py::" in line and line.rstrip().endswith("%") for line in lines)
    assert any(line.strip().startswith("<- above the suggestion") for line in lines)
