"""The one-glance summary table: ids shortened from the middle, a time column, markers explained once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_roofline.model.units import time_text
from pytest_roofline.output.summary import marked_table
from pytest_roofline.output.table import Row, fraction_text, render, shorten_id
from pytest_roofline.record.tests import TestRecord

LONG = "tests/integration/models/vision/test_mobilenet_variants.py::test_depthwise_separable_block[fp32-224-batch8]"


def test_an_id_is_shortened_from_the_middle_keeping_file_and_parameters() -> None:
    short = shorten_id(LONG, 60)
    assert len(short) <= 60
    assert short.startswith(".../test_mobilenet_variants.py::") and short.endswith("[fp32-224-batch8]")
    assert shorten_id(LONG, 200) == LONG
    assert len(shorten_id(LONG, 76)) <= 76 and "test_mobilenet_variants.py::" in shorten_id(LONG, 76)
    assert shorten_id("tests/test_a.py::test_b", 24) == "tests/test_a.py::test_b"


def test_numbers_read_with_significant_digits() -> None:
    assert fraction_text(9.6e-05) == "9.6e-05" and fraction_text(0.5) == "0.500" and fraction_text(None) == "-"
    assert time_text(0.0021) == "2.1 ms" and time_text(850e-6) == "850 us" and time_text(1.234) == "1.23 s"
    assert time_text(1.2346e-3, 4) == "1.235 ms" and time_text(4e-10) == "0.4 ns" and time_text(0.0) == "-"


def _record(nodeid: str, contended: bool) -> TestRecord:
    return TestRecord.from_dict({"nodeid": nodeid, "fraction": 0.25, "min_fraction": 0.2, "bound": "compute:fp32",
            "time_s": 0.004, "flops": 1e8, "bytes": {}, "outcome": "passed",
            "regions": [{"cores": {"used": [1], "of": [0, 1], "contended": contended, "load": {"1": 0.97},
                                   "setting": "auto"}}]})


def test_one_line_per_test_markers_explained_once_within_120_columns() -> None:
    """One line per test; a node id too long to sit whole beside its figures gets a line of its own above them."""
    records = [_record(LONG, True), _record("tests/test_b.py::test_b", True), _record("tests/test_c.py::c", False)]
    lines = marked_table(records, 120)
    assert all(len(line) <= 120 for line in lines)
    assert lines[0].split() == ["test", "fraction", "min", "bound", "time/call", "GFLOP/s", "GB/s", "verdict"]
    assert lines[1] == ".../test_mobilenet_variants.py::" + LONG.split("::")[1]  # the test's name whole
    assert lines[2].startswith(" ") and lines[2].rstrip().endswith("passed [c]")
    assert lines[3].startswith("tests/test_b.py::test_b ") and lines[3].rstrip().endswith("passed [c]")
    assert lines[4].rstrip().endswith("passed") and "4 ms" in lines[4] and "25" in lines[4]  # 1e8 / 4 ms
    explained = [line for line in lines if line.startswith("[c]")]
    assert explained == [("[c] contended (core 1 of 2 97% busy): no free core, measured again at the end of the "
                         "session")]
    assert lines[-1].startswith("fraction = time at the roof / time measured")


def test_gpu_neighbours_mark_only_the_work_that_ran_on_the_gpu() -> None:
    """The H100 run: in a CUDA session every call site is placed with NVML's list of the GPU's other processes
    (an xdist neighbour's), and CPU tests read ``[g]``; only a call site whose work ran on the GPU is marked."""
    from pytest_roofline.output.summary import marks_of

    def record(device: str, others: list[dict]) -> TestRecord:
        cores = {"used": [0, 1], "of": [0, 1], "contended": False, "setting": "auto", "gpu_processes": others}
        return replace(_record("t.py::t", False), regions=({"cores": cores, "device": device},))

    neighbour = [{"pid": 7, "kind": "compute", "memory_bytes": 2**30}]
    assert marks_of(record("cuda", neighbour))[0] == "g"
    assert marks_of(record("cpu", neighbour))[0] == ""
    assert marks_of(record("cuda", []))[0] == ""
    lines = marked_table([record("cuda", neighbour), record("cpu", neighbour)], 120)
    assert lines[1].rstrip().endswith("passed [g]") and lines[2].rstrip().endswith("passed")
    assert [line for line in lines if line.startswith("[g]")] == ["[g] GPU shared: other processes ran on its GPU"]


def test_a_fraction_above_one_names_the_roof_it_beat() -> None:
    """A 1-core copy at 1.072 of a 45.8 GB/s DRAM roof: the line under the table names that roof and says the
    roof is what is wrong."""
    roofs = {"name": "m", "peak_flops": {"fp32": 200e9}, "bandwidth": {"L2": 260e9, "DRAM": 45.8e9}}
    copy = replace(_record("tests/test_copy.py::test_copy", False), fraction=1.072, bound="memory:DRAM",
                   judged_roofs=roofs)
    gemm = replace(_record("tests/test_gemm.py::test_mm", False), fraction=1.2, bound="compute:fp32",
                   judged_roofs=roofs)
    fine = replace(_record("tests/test_add.py::test_add", False), fraction=1.05, bound="memory:DRAM",
                   judged_roofs=roofs)
    lines = marked_table([copy, gemm, fine], 120)
    assert [line for line in lines if "test_" in line and line.rstrip().endswith("[!]")] == lines[1:3]
    said = " ".join(line for line in lines[4:] if not line.startswith("fraction ="))
    assert said.startswith("[!] above 1 (DRAM 45.8 GB/s x1.072; fp32 200 GFLOP/s x1.200): the call beat the roof")
    assert "--roofline-recharacterize" in said


def test_render_keeps_numbers_aligned() -> None:
    rows = [Row("a.py::t", 0.5, None, "memory:DRAM", 0.001, None, 8.0, "passed"),
            Row("b.py::t", None, 0.3, "-", None, None, None, "failed (not measured)")]
    header, first, second = render(rows, 100)
    assert first.index("0.500") + len("0.500") == header.index("fraction") + len("fraction")
    assert second.split()[1:3] == ["-", "0.3"]


def test_a_ratio_that_is_not_one_never_reads_one() -> None:
    from pytest_roofline.gates.comparison import ratio_text

    assert ratio_text(2.0) == "2.00" and ratio_text(1.0) == "1.00"
    assert ratio_text(1.0004) == "1.0004" and ratio_text(0.998) == "0.998"


def test_work_the_same_where_it_binds_is_not_written_as_times_one() -> None:
    from pytest_roofline.gates.baseline_stats import Change
    from pytest_roofline.gates.comparison import explain
    from pytest_roofline.measure.work import WorkChange

    time = Change("time", 2e-3, 1e-3, 2.0, (1.9, 2.1), None, "worse")
    fraction = Change("fraction", 0.04, 0.08, 0.5, (0.45, 0.55), None, "worse")
    work = WorkChange.__new__(WorkChange)
    object.__setattr__(work, "verdict", "more")
    object.__setattr__(work, "ratio", 1.0)
    text = explain("origin/main (abc)", time, fraction, work)
    assert text == ("time ×2.00 against origin/main (abc) at the same work where it binds (other counts moved): "
                    "fraction 0.08 → 0.04")


def test_a_log_gets_at_least_120_columns_a_terminal_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """In CI (no terminal, no COLUMNS) pytest assumes 80 columns; the table takes 120, so ids keep their names."""
    from types import SimpleNamespace

    from pytest_roofline.plugin.modes import summary_width

    def reporter(width: int, tty: bool) -> object:
        return SimpleNamespace(_tw=SimpleNamespace(fullwidth=width), isatty=tty)

    monkeypatch.delenv("COLUMNS", raising=False)
    assert summary_width(reporter(80, tty=False)) == 120
    assert summary_width(reporter(200, tty=False)) == 200
    assert summary_width(reporter(80, tty=True)) == 80
    monkeypatch.setenv("COLUMNS", "80")
    assert summary_width(reporter(80, tty=False)) == 80


def test_a_long_file_name_is_cut_before_the_tests_name() -> None:
    """pytester-style ids: the file is named after the test; the test's own name must survive."""
    short = shorten_id("test_passing_test_fills_results_and_summary.py::test_ok", 51)
    assert short == "test_passing_test_f...sults_and_summary.py::test_ok" and len(short) == 51


def test_rows_whose_names_differ_only_in_the_middle_are_told_apart_in_a_log() -> None:
    """The README's main job in a CI log (120 columns): the DeepCAM block tests differ in the middle of their
    names; each keeps its whole name, on a line of its own where it does not fit beside its figures."""
    from pytest_roofline.output.table import whole_name_id

    ids = ["example_suite/test_deepcam.py::test_block_forward[aspp-fp32]",
           "example_suite/test_deepcam.py::test_block_forward_backward[aspp-fp32]",
           "example_suite/test_conv2d.py::test_conv2d_forward[fp32]"]
    rows = [Row(i, 0.512, 0.2, "compute:fp32", 2e-3, 10.0, 1.0, "passed (steady)") for i in ids]
    lines = render(rows, 120)
    assert all(len(line) <= 120 for line in lines)
    figures = " " * 53 + "0.512  0.2  compute:fp32       2 ms       10     1  passed (steady)"
    assert lines[1:] == [".../test_deepcam.py::test_block_forward[aspp-fp32]", figures,
                         ".../test_deepcam.py::test_block_forward_backward[aspp-fp32]", figures,
                         ".../test_conv2d.py::test_conv2d_forward[fp32]" + figures[45:]]
    assert lines[0].index("fraction") + len("fraction") == figures.index("0.512") + len("0.512")
    assert whole_name_id("a/b/test_x.py::test_y[p]", 24) == "a/b/test_x.py::test_y[p]"
    assert whole_name_id("a/b/test_x.py::test_y[p]", 23) is None  # the file name cannot lose 12 characters
    assert whole_name_id("test_passing_test_fills_results_and_summary.py::test_ok", 51) == \
        "test_passing_test_f...sults_and_summary.py::test_ok"
