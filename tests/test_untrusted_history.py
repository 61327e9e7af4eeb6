"""Issue 26: a history file is untrusted input. Crafted records are skipped with one warning naming the file and
the field, in every reader (gate, thresholds, site); nothing crashes, nothing is silenced."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.commands import main
from pytest_roofline.errors import HistoryFileWarning
from pytest_roofline.history.reader import check_reference, load
from pytest_roofline.record import loader as validate
from pytest_roofline.site.history_reader import read_history

KEY = "box-00000000"


def test_record(nodeid: str = "t.py::test_a", fraction: Any = 0.5, **extra: Any) -> dict[str, Any]:
    return {"nodeid": nodeid, "fraction": fraction, "min_fraction": 0.2, "outcome": "passed", "time_s": 2e-3,
            "flops": 1e8, "ai": {"DRAM": 10.0}, "params": {"n": 2},
            "regions": [{"t_min_s": 1e-3, "timing": {"samples_s": [2e-3] * 5, "rounds": 5}}], **extra}


test_record.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def history(index: int, tests: list[Any]) -> dict[str, Any]:
    return {"format": "pytest-roofline-history", "schema": 1,
            "session": {"id": f"s{index}", "start": f"2026-11-2{index}T06:00:00+00:00",
                        "git": {"commit": f"{index:040d}", "branch": "main", "dirty": False}},
            "machine": {"key": KEY, "name": "box", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
            "tests": tests}


def write(folder: Path, name: str, document: Any) -> Path:
    path = folder / KEY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("fraction", float("nan"), "fraction: nan is not a finite number in (0, 1.2]"),
    ("fraction", float("inf"), "fraction: inf is not a finite number in (0, 1.2]"),
    ("fraction", 1e308, "fraction: 1e+308 is not a finite number in (0, 1.2]"),
    ("fraction", 5.0, "fraction: 5.0 is not a finite number in (0, 1.2]"),
    ("fraction", -0.5, "fraction: -0.5 is not a finite number in (0, 1.2]"),
    ("fraction", "0.5", "fraction: '0.5' is not a finite number in (0, 1.2]"),
    ("min_fraction", 1.1, "min_fraction: 1.1 is not a finite number in (0, 1]"),
    ("time_s", 0.0, "time_s: 0.0 is not a finite number in [1e-12, 1e+07]"),  # validate.TIME_RANGE
    ("time_s", 1e-13, "time_s: 1e-13 is not a finite number in [1e-12, 1e+07]"),
    ("time_s", 1e8, "time_s: 100000000.0 is not a finite number in [1e-12, 1e+07]"),
    ("flops", 1e25, "flops: 1e+25 is not a finite number in [0, 1e+24]"),  # validate.MAX_WORK
    ("ai", {"DRAM": 1e13}, "ai.DRAM: 10000000000000.0 is not a finite number in [1e-12, 1e+12]"),  # validate.AI_RANGE
    ("ai", {"DRAM": 1e-13}, "ai.DRAM: 1e-13 is not a finite number in [1e-12, 1e+12]"),
    ("compare", {"changes": {"time": {"ratio": 2e6}}},  # validate.RATIO_RANGE
     "compare.changes.time.ratio: 2000000.0 is not a finite number in [1e-06, 1e+06]"),
    ("compare", {"changes": {"time": {"ratio": 1.5, "ci": [1e-7, 2.0]}}},
     "compare.changes.time.ci[0]: 1e-07 is not a finite number in [1e-06, 1e+06]"),
    ("params", "batch=8", "params: 'batch=8' is not an object"),
    ("params", {"n": [1, 2]}, "params.n: [1, 2] is not a string, a finite number, a bool or null"),
    ("regions", [{"t_min_s": 1e-3, "timing": {"rounds": "many"}}],
     "regions[0].timing.rounds: 'many' is not a whole number >= 0"),
    ("regions", [{"t_min_s": 1e-3, "timing": {"samples_s": ["fast"]}}],
     "regions[0].timing.samples_s[0]: 'fast' is not a finite number in [1e-12, 1e+07]"),
    ("kernels", [{"name": 7}], "kernels[0].name: 7 is not a string"),
    ("artifacts", [{"path": "/etc/passwd"}], "artifacts[0]: {'path': '/etc/passwd'} is not a string"),
    ("judged_roofs", {"peak_flops": {"fp32": 0}},  # validate.ROOF_RANGE
     "judged_roofs.peak_flops.fp32: 0 is not a finite number in [1000, 1e+20]"),
    ("judged_roofs", {"bandwidth": {"DRAM": 2e20}},
     "judged_roofs.bandwidth.DRAM: 2e+20 is not a finite number in [1000, 1e+20]"),
    # the record's words come from closed sets (record.outcomes)
    ("outcome", "PASSED", "outcome: 'PASSED' is not one of passed, failed, skipped, xfailed, xpassed, error, not run"),
    ("not_gated", "trusted", "not_gated: 'trusted' is not one of contended, warn-only"),
    ("baseline", {"verdict": "fine"}, ("baseline.verdict: 'fine' is not one of regressed, improved, steady, noisy, "
     "inconclusive, changed, new")),
    ("compare", {"verdict": "error; rm -rf"}, ("compare.verdict: 'error; rm -rf' is not one of regressed, improved, "
     "steady, noisy, inconclusive, changed, new, error, unchanged")),
])
def test_check_test_names_the_field(field: str, value: Any, expected: str) -> None:
    with pytest.raises(validate.Invalid) as info:
        validate.check_test(test_record(**{field: value}))
    assert str(info.value) == expected


def test_a_sound_record_passes() -> None:
    validate.check_test(test_record())
    validate.check_test({"nodeid": "t.py::test_b", "fraction": None})  # not measured: null fraction
    # the ends of each physical range are inside it, and an intensity may be 0 (no bytes moved at that level)
    validate.check_test(test_record(time_s=1e-12, t_min_s=1e7, flops=1e24, ai={"DRAM": 0, "L2": 1e-12, "L1": 1e12},
                                    judged_roofs={"peak_flops": {"fp32": 1e3}, "bandwidth": {"DRAM": 1e20}},
                                    compare={"changes": {"time": {"ratio": 1e6, "ci": [1e-6, 1e6]}}}))
    for outcome in ("passed", "failed", "skipped", "xfailed", "xpassed", "error", "not run"):  # every word of its set
        validate.check_test(test_record(outcome=outcome, not_gated="warn-only", baseline={"verdict": "new"},
                                        compare={"verdict": "unchanged"}))


def test_deep_nesting_is_refused_before_json_recurses(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(validate.Invalid, match="nested deeper than 64 levels"):
        validate.read_json(deep)
    # brackets inside strings do not count
    assert validate.nesting_depth_exceeds(json.dumps({"a": "[" * 1000}).encode()) is False
    assert validate.nesting_depth_exceeds(b"[" * 64 + b"]" * 64) is False
    assert validate.nesting_depth_exceeds(b"[" * 65 + b"]" * 65) is True


def test_size_and_kind_are_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(validate.MAX_FILE_BYTES + 1)  # sparse: no disk spent
    with pytest.raises(validate.Invalid, match=r"33554433 bytes, more than the 33554432"):
        validate.read_json(big)
    with pytest.raises(validate.Invalid, match="not a regular file"):
        validate.read_json(Path("/dev/zero"))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(validate.Invalid, match="not a regular file"):  # not opened, so it cannot block
        validate.read_json(fifo)


def crafted_history(tmp_path: Path) -> Path:
    """One sound session, one with a sound record beside six crafted ones, and a deeply nested file."""
    folder = tmp_path / "history"
    write(folder, "a.json", history(1, [test_record(fraction=0.5)]))
    write(folder, "b.json", json.dumps(history(2, [
        test_record(fraction=0.45), test_record("t.py::nan", float("nan")),
        test_record("t.py::inf", float("inf")), test_record("t.py::huge", 1e308),
        test_record("t.py::five", 5.0), test_record("t.py::params", params="batch=8"),
        test_record("t.py::rounds", regions=[{"t_min_s": 1e-3, "timing": {"rounds": "x"}}])])))
    write(folder, "deep.json", "[" * 100_000)
    return folder


def test_the_gate_reader_skips_records_naming_file_and_field(tmp_path: Path) -> None:
    folder = crafted_history(tmp_path)
    loaded = load(folder)
    assert [s.id for s in loaded.sessions] == ["s1", "s2"]
    assert list(loaded.sessions[1].tests) == ["t.py::test_a"]  # the sound record of b.json is kept
    b, deep = str(folder / KEY / "b.json"), str(folder / KEY / "deep.json")
    assert loaded.skipped == [
        (f"{b}: skipped 6 test record(s) that cannot be trusted: tests[1] ('t.py::nan'): fraction: nan is not a "
        "finite number in (0, 1.2]; tests[2] ('t.py::inf'): fraction: inf is not a finite number in (0, 1.2]; "
        "tests[3] ('t.py::huge'): fraction: 1e+308 is not a finite number in (0, 1.2]; and 3 more"),
        f"{deep}: nested deeper than 64 levels"]


def test_thresholds_prints_one_line_per_file_and_no_huge_median(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = crafted_history(tmp_path)
    assert main(["thresholds", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert err.count("thresholds: skipped ") == 2 and "b.json: skipped 6 test record(s)" in err
    assert "deep.json: nested deeper than 64 levels" in err and "Traceback" not in err
    assert "t.py::test_a" in out and "t.py::huge" not in out and "1e+308" not in out


def test_the_site_reader_warns_once_per_file(tmp_path: Path) -> None:
    folder = crafted_history(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sessions = read_history(folder)
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, HistoryFileWarning))
    assert len(messages) == 2
    assert messages[0].startswith(f"{folder / KEY / 'b.json'}: skipped 6 test record(s) that cannot be trusted: "
                                  "tests[1] ('t.py::nan'): fraction: nan")
    assert messages[1] == f"skipped history file {folder / KEY / 'deep.json'}: nested deeper than 64 levels"
    assert [[t.nodeid for t in s.tests.values()] for s in sessions[KEY]] == [["t.py::test_a"], ["t.py::test_a"]]


def test_report_builds_the_site_from_the_sound_records(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    pytest.importorskip("ruptures")
    folder = crafted_history(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HistoryFileWarning)
        assert main(["report", str(folder), "--out", str(tmp_path / "site")]) == 0
    pages = sorted(p.name for p in (tmp_path / "site").rglob("*.html"))
    assert len([p for p in pages if p.startswith("test_a-")]) == 1 and not any("nan-" in p for p in pages)


def test_a_header_that_cannot_be_trusted_skips_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    bad = history(1, [test_record()])
    bad["machine"]["peak_flops"] = {"fp32": "fast"}
    write(folder, "roofs.json", bad)
    loaded = load(folder)
    assert loaded.sessions == []
    assert loaded.skipped == [(f"{folder / KEY / 'roofs.json'}: machine.peak_flops.fp32: 'fast' is not a finite "
                              "number in [1000, 1e+20]")]


def test_check_reference_accepts_histories_and_results_only(tmp_path: Path) -> None:
    folder = crafted_history(tmp_path)
    check_reference(folder)  # a directory: its files are checked one by one when read
    check_reference(folder / KEY / "a.json")
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"schema": 1, "machine": None, "tests": [test_record()]}))
    check_reference(results)
    conftest = tmp_path / "conftest.py"
    conftest.write_text("import pytest\n")
    with pytest.raises(ValueError, match="Expecting value: line 1 column 1"):
        check_reference(conftest)
    other = tmp_path / "other.json"
    other.write_text('{"name": "not a history"}')
    with pytest.raises(ValueError, match=r"format: None, not 'pytest-roofline-history' \(nor a results.json\)"):
        check_reference(other)
    with pytest.raises(validate.Invalid, match="not a regular file"):
        check_reference(Path("/dev/zero"))
    with pytest.raises(FileNotFoundError):
        check_reference(tmp_path / "nowhere")


def test_thresholds_escapes_control_characters_of_test_ids(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "history"
    write(folder, "a.json", history(1, [test_record("t.py::test_\x1b[2Jwipe")]))
    assert main(["thresholds", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "t.py::test_\\x1b[2Jwipe" in out
