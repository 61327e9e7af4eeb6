"""Per-CC metric lists checked name by name against NVIDIA's stock roofline section, and packed FP32.

``STOCK`` below was transcribed by hand from a public copy of the stock
``SpeedOfLight_HierarchicalTensorRooflineChart.section`` of a 2025-era ncu (github.com/xingxerx/Qallow, sections/,
commit e3efc6fc8582f38e81d9b207717e72a213faa5e1): for each ``Items`` block filtered to one CC, the
``sm__ops_path_tensor_*`` aggregates (``src_*``) it charts, the per-instruction FP8 names it charts (CC 10.3 only),
and whether it has a DRAM roofline. It is kept apart from ``metrics.py`` on purpose: a slip in one is caught by the
other. The packed-FP32 CCs come from the stock SOLFPRoofline rule (``cc_major == 10 and cc_minor in (0, 3)``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.counters.ncu import metric_set
from pytest_roofline.counters.ncu.kernel_report import parse_report_text
from pytest_roofline.counters.ncu.metrics import CHECKED_CC, cc_sources, format_cc, launch_work, parse_cc

_AMPERE = {
    "src_bf16_dst_fp32_sparsity_off", "src_bf16_dst_fp32_sparsity_on", "src_fp16_dst_fp16_sparsity_off",
    "src_fp16_dst_fp16_sparsity_on", "src_fp16_dst_fp32_sparsity_off", "src_fp16_dst_fp32_sparsity_on",
    "src_fp64", "src_int1", "src_int4_sparsity_off", "src_int4_sparsity_on", "src_int8_sparsity_off",
    "src_int8_sparsity_on", "src_tf32_dst_fp32_sparsity_off", "src_tf32_dst_fp32_sparsity_on",
}
_B200 = {"src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp4_dst_fp32",
         "src_fp4_fp6_fp8_dst_fp16", "src_fp4_fp6_fp8_dst_fp32", "src_fp64", "src_int8", "src_tf32_dst_fp32"}
_RTX50 = {"src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp4_dst_fp32_sparsity_off",
          "src_fp4_dst_fp32_sparsity_on", "src_fp4_fp6_dst_fp16_sparsity_off", "src_fp4_fp6_dst_fp16_sparsity_on",
          "src_fp4_fp6_dst_fp32_sparsity_off", "src_fp4_fp6_dst_fp32_sparsity_on", "src_fp64",
          "src_fp8_dst_fp16_sparsity_off", "src_fp8_dst_fp16_sparsity_on", "src_fp8_dst_fp32_sparsity_off",
          "src_fp8_dst_fp32_sparsity_on", "src_int8", "src_tf32_dst_fp32"}
# CC: (aggregates, per-instruction FP8 names, DRAM roofline present)
STOCK: dict[str, tuple[set[str], set[str], bool]] = {
    "7.5": ({"src_fp16_bf16_tf32_dst_fp32", "src_fp16_dst_fp16", "src_int1", "src_int4", "src_int8"}, set(), True),
    "8.0": (_AMPERE, set(), True),
    "8.6": (_AMPERE, set(), True),
    "8.7": (_AMPERE, set(), False),
    "8.9": (_AMPERE | {"src_fp8_sparsity_off", "src_fp8_sparsity_on"}, set(), True),
    "9.0": ({"src_bf16_dst_fp32", "src_fp16", "src_fp64", "src_fp8_sparsity_off", "src_fp8_sparsity_on",
             "src_int1", "src_int8", "src_tf32_dst_fp32"}, set(), True),
    "10.0": (_B200, set(), True),
    "10.3": ({"src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp4_dst_fp32",
              "src_fp4_fp6_dst_fp16", "src_fp4_fp6_dst_fp32", "src_fp64", "src_int8", "src_tf32_dst_fp32"},
             {"op_utcqmma_src_fp8_dst_fp16_sparsity_off", "op_utcqmma_src_fp8_dst_fp16_sparsity_on",
              "op_utcqmma_src_fp8_dst_fp32_sparsity_off"}, True),
    "11.0": (_B200, set(), False),
    "12.0": (_RTX50, set(), True),
    "12.1": (_RTX50, set(), False),
}
PACKED = {"sm__sass_thread_inst_executed_op_fadd2_pred_on.sum", "sm__sass_thread_inst_executed_op_fmul2_pred_on.sum",
          "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum"}
OPS_PREFIX = "sm__ops_path_tensor_"


@pytest.mark.parametrize("cc", sorted(STOCK, key=parse_cc))
def test_tensor_names_match_the_stock_section(cc: str) -> None:
    aggregates, fp8_ops, has_dram = STOCK[cc]
    chosen = metric_set(cc)
    asked = {name[len(OPS_PREFIX):-len(".sum")] for name in chosen.tensor}
    assert asked == aggregates | fp8_ops
    assert chosen.checked and chosen.names_from == parse_cc(cc)
    assert ("dram__bytes.sum" in chosen.names) is has_dram
    assert ("dram__bytes_read.sum" in chosen.names) is has_dram
    assert (PACKED <= set(chosen.names)) is (cc in ("10.0", "10.3"))
    assert not (PACKED & set(chosen.names)) or cc in ("10.0", "10.3")


def test_every_checked_cc_is_in_the_table() -> None:
    assert [format_cc(cc) for cc in CHECKED_CC] == sorted([*STOCK, "7.0", "7.2"], key=parse_cc)
    assert metric_set("7.0").tensor == ("sm__inst_executed_pipe_tensor.sum",)
    assert "dram__bytes.sum" not in metric_set("7.2").names  # Xavier: unified memory, like Orin


def test_b300_does_not_ask_for_b200_names() -> None:
    names = metric_set("10.3").names
    assert not [n for n in names if "fp4_fp6_fp8" in n]
    assert "sm__ops_path_tensor_src_fp4_fp6_dst_fp32.sum" in names


def test_unlisted_cc_borrows_the_nearest_checked_list_without_packed_fp32() -> None:
    thor_old_name = metric_set("10.1")  # Thor reported 10.1 before CUDA 13 renamed it 11.0
    assert not thor_old_name.checked and thor_old_name.names_from == (11, 0)
    assert thor_old_name.names == metric_set("11.0").names  # no packed FP32, no DRAM (unified memory)
    unknown = metric_set("12.2")
    assert not unknown.checked and unknown.names_from == (12, 1)
    assert unknown.tensor == metric_set("12.1").tensor and "dram__bytes.sum" in unknown.names  # not a known SoC
    assert metric_set("8.8").names_from == (8, 7)


def test_sources_per_name() -> None:
    sources = cc_sources("10.3")
    assert "Qallow" in sources["sm__ops_path_tensor_src_fp4_fp6_dst_fp16.sum"]
    assert "SOLFPRoofline" in sources["sm__sass_thread_inst_executed_op_ffma2_pred_on.sum"]
    assert "NERSC" in sources["l1tex__t_bytes.sum"]


# -- packed FP32 and B300 Tensor counters, counted from hand-written launches ---------------------------------

BASE = {
    "gpu__time_duration.sum": 1e-3,
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 1e8,
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": 1e8,
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": 1e9,
}
PACKED_COUNTS = {
    "sm__sass_thread_inst_executed_op_fadd2_pred_on.sum": 1e8,
    "sm__sass_thread_inst_executed_op_fmul2_pred_on.sum": 1e8,
    "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum": 1e9,
}


@pytest.mark.parametrize(("cc", "expected"), [
    # fadd + fmul + 2 ffma = 1e8 + 1e8 + 2e9 = 2.2e9, then 2 fadd2 + 2 fmul2 + 4 ffma2 = 2e8 + 2e8 + 4e9 = 4.4e9
    ((10, 0), 6.6e9),
    ((10, 3), 6.6e9),
])
def test_packed_fp32_counts(cc: tuple[int, int], expected: float) -> None:
    work = launch_work({**BASE, **PACKED_COUNTS}, cc)
    assert work.flops["fp32"] == pytest.approx(expected)
    assert work.definitions["flops_packed_fp32"] == "2*fadd2 + 2*fmul2 + 4*ffma2"
    assert not work.warnings


@pytest.mark.parametrize("cc", [(9, 0), (12, 0)])
def test_no_packed_fp32_elsewhere(cc: tuple[int, int]) -> None:
    work = launch_work(BASE, cc)
    assert work.flops["fp32"] == pytest.approx(2.2e9)
    assert not work.warnings  # Hopper and RTX 50 have no packed FP32 counters: nothing is missing


def test_missing_packed_counters_on_blackwell_warn() -> None:
    work = launch_work(BASE, (10, 0))
    assert work.flops["fp32"] == pytest.approx(2.2e9)
    assert any("lower bound" in w and "FFMA2" in w for w in work.warnings)


def test_packed_counters_from_stock_section_rates() -> None:
    # Stock sections keep smsp__...per_cycle_elapsed; 5e7 per cycle x 2e9 Hz x 1e-3 s = 1e8 instructions
    rates = {"gpu__time_duration.sum": 1e-3, "smsp__cycles_elapsed.avg.per_second": 2e9,
             "smsp__sass_thread_inst_executed_op_ffma2_pred_on.sum.per_cycle_elapsed": 5e4}
    work = launch_work(rates, (10, 3))
    assert work.flops["fp32"] == pytest.approx(4 * 5e4 * 2e9 * 1e-3)  # 4e8


def _raw_page(cc: str, metrics: dict[str, float]) -> str:
    """A ``--page raw`` CSV (header, units row, one launch) with the given metric values in base units."""
    major, minor = cc.split(".")
    names = ["device__attribute_compute_capability_major", "device__attribute_compute_capability_minor",
             *metrics]
    header = ['"ID"', '"Process ID"', '"Process Name"', '"Host Name"', '"Kernel Name"', '"Context"', '"Stream"',
              *(f'"{n}"' for n in names)]
    units = ['""'] * 7 + ['""', '""'] + [f'"{"ns" if n == "gpu__time_duration.sum" else ""}"' for n in metrics]
    row = ['"0"', '"4242"', '"python3"', '"runner"', '"gemm_kernel"', '"1"', '"7"', f'"{major}"', f'"{minor}"',
           *(f'"{v:.0f}"' for v in metrics.values())]
    return "\n".join(",".join(line) for line in (header, units, row)) + "\n"


def test_import_a_hand_written_b200_report() -> None:
    counts = {"gpu__time_duration.sum": 1e6, **{k: v for k, v in BASE.items() if k != "gpu__time_duration.sum"},
              **PACKED_COUNTS,
              "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32.sum": 3e12,
              "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 1e12}
    report = parse_report_text(_raw_page("10.0", counts), "b200.csv")
    (kernel,) = report.kernels
    assert kernel.flops == {"fp32": pytest.approx(6.6e9), "fp8_tensor": 3e12, "bf16_tensor": 1e12}
    assert kernel.time_s == pytest.approx(1e-3) and kernel.cc == "10.0"


def test_import_a_hand_written_b300_report() -> None:
    counts = {"gpu__time_duration.sum": 2e6, **PACKED_COUNTS,
              **{k: v for k, v in BASE.items() if k != "gpu__time_duration.sum"},
              "sm__ops_path_tensor_src_fp4_fp6_dst_fp16.sum": 1e12,
              "sm__ops_path_tensor_src_fp4_fp6_dst_fp32.sum": 2e12,
              "sm__ops_path_tensor_src_fp4_dst_fp32.sum": 4e12,
              "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32_sparsity_off.sum": 5e12,
              "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp16_sparsity_on.sum": 6e11,
              # a per-instruction name that an aggregate already holds is never added
              "sm__ops_path_tensor_op_utcomma_src_fp4_dst_fp32_sparsity_off.sum": 4e12}
    report = parse_report_text(_raw_page("10.3", counts), "b300.csv")
    (kernel,) = report.kernels
    # fp4_fp6 = 1e12 + 2e12; fp4 = 4e12; fp8 = 5e12 + 6e11 (no FP8 aggregate on CC 10.3)
    assert kernel.flops == {"fp32": pytest.approx(6.6e9), "fp4_fp6_tensor": 3e12, "fp4_tensor": 4e12,
                            "fp8_tensor": 5.6e12}
    assert kernel.tensor_flops == pytest.approx(1.26e13)
    assert kernel.definitions["tensor"] == ("sm__ops_path_tensor_src_*.sum + sm__ops_path_tensor_op_utcqmma_src_fp8_*"
                                            ".sum (no FP8 aggregate on CC 10.3)")
    assert not kernel.warnings


def test_fp8_op_counters_are_ignored_when_an_fp8_aggregate_is_there() -> None:
    work = launch_work({"sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32.sum": 7.0,
                        "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32_sparsity_off.sum": 7.0}, (10, 0))
    assert work.flops == {"fp8_tensor": 7.0}


def test_import_ncu_cli_on_a_b200_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from pytest_roofline.commands import main

    counts = {"gpu__time_duration.sum": 1e6, **{k: v for k, v in BASE.items() if k != "gpu__time_duration.sum"},
              **PACKED_COUNTS}
    path = tmp_path / "b200.csv"
    path.write_text(_raw_page("10.0", counts))
    assert main(["import-ncu", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["totals"]["flops"] == {"fp32": pytest.approx(6.6e9)}


def test_b300_tensor_work_from_stock_section_rates() -> None:
    # The stock Tensor section keeps sm__ops_path_tensor_*.sum.per_cycle_elapsed; total = rate x SM clock x time:
    # 1000 per cycle x 1.5e9 Hz x 2e-3 s = 3e9 and 500 x 1.5e9 x 2e-3 = 1.5e9
    rates = {"gpu__time_duration.sum": 2e-3, "sm__cycles_elapsed.avg.per_second": 1.5e9,
             "sm__ops_path_tensor_src_fp4_fp6_dst_fp32.sum.per_cycle_elapsed": 1000.0,
             "sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32_sparsity_off.sum.per_cycle_elapsed": 500.0,
             "sm__ops_path_tensor_op_utcqmma_src_fp4_fp6_dst_fp32_sparsity_off.sum.per_cycle_elapsed": 1000.0}
    work = launch_work(rates, (10, 3))
    assert work.flops == {"fp4_fp6_tensor": pytest.approx(3e9), "fp8_tensor": pytest.approx(1.5e9)}
    assert "sm__ops_path_tensor_src_fp4_fp6_dst_fp32.sum" in work.definitions["derived_from_rate"]
