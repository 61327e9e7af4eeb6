"""Artifact names, kernel tables, results documents and the failure message."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pytest_roofline._atomic import write_json_atomic
from pytest_roofline.model import KernelSample, Machine, evaluate_region
from pytest_roofline.output.artifacts import artifact_path, safe_stem, write_kernels_csv
from pytest_roofline.output.text import failure_message

MACHINE = Machine("hand", {"fp32": 100e9}, {"DRAM": 20e9})


@pytest.mark.parametrize(
    "nodeid",
    [
        "tests/test_x.py::test_a",
        "../../etc/passwd",
        "a/../../b::c[../../x]",
        "test_p[/abs/path]",
        "tést_ünïcode[λ→∞]",
        "x" * 5000,
        "..",
        "::",
        "t[a\\b\x00c]",
    ],
)
def test_artifact_paths_never_escape_the_directory(tmp_path: Path, nodeid: str) -> None:
    path = artifact_path(tmp_path, nodeid, ".png")
    assert path.parent == tmp_path
    assert len(path.name) <= 100
    assert path.name.isascii() and "/" not in path.name and not path.name.startswith(".")
    path.write_bytes(b"ok")  # the name is valid on this file system


def test_distinct_ids_get_distinct_names() -> None:
    assert safe_stem("t[a/b]") != safe_stem("t[a_b]")
    assert safe_stem("x" * 300 + "1") != safe_stem("x" * 300 + "2")


def test_kernels_csv_has_hand_computed_columns(tmp_path: Path) -> None:
    kernels = [
        KernelSample("gemm", {"fp32": 2e9}, {"DRAM": 12e6}, time_s=0.04),
        KernelSample("copy", {}, {"DRAM": 80e6}),
    ]
    path = write_kernels_csv(tmp_path / "k.csv", kernels, MACHINE)
    rows = list(csv.DictReader(path.open()))
    assert [r["name"] for r in rows] == ["gemm", "copy"]
    assert float(rows[0]["t_min_s"]) == pytest.approx(0.02)
    assert float(rows[0]["fraction"]) == pytest.approx(0.5)
    assert rows[0]["bound"] == "compute:fp32"
    assert float(rows[0]["ai_DRAM"]) == pytest.approx(2e9 / 12e6)
    assert rows[1]["bound"] == "memory:DRAM" and rows[1]["fraction"] == ""
    assert float(rows[1]["t_min_s"]) == pytest.approx(0.004)


def test_results_are_written_atomically_and_keep_the_old_file_on_error(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    write_json_atomic(target, {"schema": 1, "tests": []})
    with pytest.raises(ValueError):
        write_json_atomic(target, {"schema": 1, "tests": [float("nan")]})  # NaN is not JSON
    assert json.loads(target.read_text()) == {"schema": 1, "tests": []}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp file left behind


def test_failure_message_states_the_numbers() -> None:
    verdict = evaluate_region([KernelSample("gemm", {"fp32": 2e9}, {"DRAM": 12e6})], MACHINE, 0.08)
    text = failure_message(verdict, 0.6, [Path("/tmp/a.png")])
    assert "attained fraction 0.250 is below min_fraction 0.6" in text
    assert "bound:      compute:fp32" in text
    assert "AI:         DRAM 167 FLOP/byte" in text
    assert "25 GFLOP/s achieved of a 100 GFLOP/s roof" in text
    assert "0.15 GB/s achieved of a 0.6 GB/s roof at DRAM" in text
    assert "headroom 4.00x" in text
    assert "artifact:   /tmp/a.png" in text


def test_isa_ceilings_are_the_narrower_widths_below_the_roof(tmp_path: Path) -> None:
    from pytest_roofline.output.chart import isa_ceilings, plot_machine

    machine = Machine(
        "isa", {"fp64": 128e9, "fp32": 256e9}, {"DRAM": 20e9},
        info={"isa_peaks": {"fp64": {"512": 128e9, "256": 64e9, "128": 32e9}, "fp32": {"512": 256e9}}},
    )
    assert sorted(isa_ceilings(machine)) == [("fp64 128-bit", 32e9), ("fp64 256-bit", 64e9)]
    assert plot_machine(machine, tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"


def test_chart_points_timed_ops_solid_no_flop_ops_at_the_edge(tmp_path: Path) -> None:
    from pytest_roofline.output.chart import chart_points, draw_roofline

    kernels = [
        KernelSample("gemm", {"fp32": 2e9}, {"DRAM": 12e6}, time_s=0.04),  # AI 166.7, 50 GFLOP/s
        KernelSample("cat", {}, {"DRAM": 80e6}, time_s=0.008),  # 10 GB/s
        KernelSample("relu", {"fp32": 1e6}, {"DRAM": 8e6}),  # untimed: on its roof, 0.4 ms at 20 GB/s
        KernelSample("copy", {}, {"DRAM": 4e6}),  # untimed, no FLOPs: not drawn, 0.2 ms at its roof
    ]
    points, edge, hidden = chart_points(kernels, MACHINE)
    assert points[0][:2] == ("gemm", "DRAM") and points[0][5] is True
    assert points[0][2] == pytest.approx(2e9 / 12e6) and points[0][3] == pytest.approx(50e9)
    assert points[1][0] == "relu" and points[1][5] is False and points[1][4] == pytest.approx(4e-4)
    assert edge == [("DRAM", pytest.approx(10e9), 0.008)]
    assert hidden == pytest.approx(2e-4)
    verdict = evaluate_region(kernels, MACHINE, 0.06)
    assert draw_roofline(tmp_path / "c.png", MACHINE, kernels, verdict).read_bytes()[:4] == b"\x89PNG"


def test_kernels_csv_lost_time_is_time_minus_t_min(tmp_path: Path) -> None:
    path = write_kernels_csv(tmp_path / "k.csv", [KernelSample("gemm", {"fp32": 2e9}, {"DRAM": 12e6}, time_s=0.04),
                                                  KernelSample("copy", {}, {"DRAM": 80e6})], MACHINE)
    rows = list(csv.DictReader(path.open()))
    assert float(rows[0]["lost_s"]) == pytest.approx(0.02)  # 40 ms measured, 20 ms at the fp32 roof
    assert rows[1]["lost_s"] == ""
