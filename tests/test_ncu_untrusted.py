"""Issue 26: an ncu report or a kernel name is untrusted input. ``import-ncu`` refuses unknown units and
malformed rows naming the line and column (exit 2, no traceback); no CSV the project writes carries a formula;
no control character reaches the terminal."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pytest_roofline._safe_text import csv_cell, printable
from pytest_roofline.commands import main
from pytest_roofline.counters.ncu.ncu_units import is_known_unit
from pytest_roofline.counters.ncu.parse import parse_csv_text
from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.output.artifacts import write_kernels_csv

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
          '"Metric Name","Metric Unit","Metric Value"\n')
FORMULA = "=cmd|' /C calc'!A0"


def row(metric: str, unit: str, value: str, name: str = "k") -> str:
    return f'"0","1","p","h","{name}","1","7","S","{metric}","{unit}","{value}"\n'


def report(tmp_path: Path, text: str) -> str:
    path = tmp_path / "report.csv"
    path.write_text(HEADER + text)
    return str(path)


@pytest.mark.parametrize(("body", "problem"), [
    (row("gpu__time_duration.sum", "fortnight", "220"),
     "line 3, column 'Metric Unit': unknown unit 'fortnight' (metric gpu__time_duration.sum)"),
    (row("gpu__time_duration.sum", "usecond", "1e400"),
     "line 3, column 'Metric Value': '1e400' is not a finite number (metric gpu__time_duration.sum)"),
    ('"0","1","p"\n', "line 3: 3 fields, no column 'Metric Value' (field 11)"),
    ('"0","1","p","h","k,"1","7"\n', "line 3: unbalanced quotes"),
    (row("gpu__time_duration.sum", "usecond", "1").rstrip("\n") + ',"extra"\n', "line 3: 12 fields, the header has 11"),
    ('"x","1","p","h","k","1","7","S","gpu__time_duration.sum","usecond","1"\n',
     "line 3, column 'ID': 'x' is not a launch id"),
])
def test_import_ncu_refuses_malformed_rows_naming_line_and_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, problem: str) -> None:
    path = report(tmp_path, row("dram__bytes_read.sum", "byte", "1000") + body)
    assert main(["import-ncu", path]) == 2
    out, err = capsys.readouterr()
    assert err == f"import-ncu: {path}: 1 malformed row(s) or cell(s); nothing imported:\n  {problem}\n"
    assert out == ""


def test_an_empty_table_is_said_not_shown_as_zero_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = report(tmp_path, "")
    assert main(["import-ncu", path]) == 2
    assert capsys.readouterr().err == f"import-ncu: {path}: the table holds no kernel launch\n"


def test_known_units_pass_and_seconds_are_not_guessed() -> None:
    for unit in ("", "%", "byte", "Mbyte", "Gbyte/s", "usecond", "msecond", "Ghz", "cycle/second", "inst",
                 "Kinst", "register/thread", "Kbyte/block", "sector/request", "warp", "SM", "(!)"):
        assert is_known_unit(unit), unit
    for unit in ("fortnight", "Gfurlong/s", "byte/fortnight", "parsec"):
        assert not is_known_unit(unit), unit
    parsed = parse_csv_text(HEADER + row("gpu__time_duration.sum", "fortnight", "220"))
    assert "gpu__time_duration.sum" not in parsed.launches[0].metrics  # never 220 s


def test_kernel_names_reach_the_terminal_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = "\x1b[2J\x1b[31mred\x1b[0m\x07\u202egnp.exe"
    path = report(tmp_path, row("gpu__time_duration.sum", "usecond", "220", name) +
                  row("dram__bytes_read.sum", "byte", "1000", name))
    assert main(["import-ncu", path]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b[2J\\x1b[31mred\\x1b[0m\\x07\\u202egnp.exe" in out


def test_printable_keeps_lines_and_tabs() -> None:
    assert printable("a\tb\nc\x07\x9b") == "a\tb\nc\\x07\\x9b"
    assert printable("t.py::test[λ→∞]") == "t.py::test[λ→∞]"


def test_kernel_tables_neutralise_formulas_but_keep_negative_numbers(tmp_path: Path) -> None:
    machine = Machine("m", {"fp32": 100e9}, {"DRAM": 20e9})
    kernels = [KernelSample(FORMULA, {"fp32": 1e9}, {"DRAM": 1e6}, 1e-3),  # 10 ms lower bound in 1 ms:
               KernelSample("+x", {}, {"DRAM": 1e6}, 1e-3),                 # lost_s is negative, a number
               KernelSample("@sum", {}, {"DRAM": 1e6}, None),
               KernelSample("-2+3", {}, {"DRAM": 1e6}, None),
               KernelSample("gemm", {}, {"DRAM": 1e6}, None)]
    path = write_kernels_csv(tmp_path / "k.csv", kernels, machine)
    rows = list(csv.DictReader(path.open()))
    assert [r["name"] for r in rows] == ["'" + FORMULA, "'+x", "'@sum", "'-2+3", "gemm"]
    assert float(rows[0]["lost_s"]) == pytest.approx(1e-3 - 1e-2) and rows[0]["lost_s"].startswith("-")
    assert csv_cell(-1.5) == -1.5 and csv_cell("1.5") == "1.5" and csv_cell("\tx") == "'\tx"
