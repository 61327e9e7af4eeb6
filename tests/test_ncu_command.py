"""The ncu command line per compute capability, asserted argument by argument, and the metric formulas."""

from __future__ import annotations

import pytest

from pytest_roofline.counters.ncu import build_ncu_command, metric_set, nvtx_include_expression
from pytest_roofline.counters.ncu.metrics import (
    UnsupportedComputeCapability,
    launch_work,
    parse_cc,
    tensor_precision,
)

CHILD = ["/venv/bin/python", "-m", "pytest", "tests/test_model.py::test_gemm[fp16]", "-p", "no:cacheprovider"]
TIME = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second"]
FLOPS = [
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
]
PACKED_FP32 = [
    "sm__sass_thread_inst_executed_op_fadd2_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul2_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum",
]
BYTES = ["l1tex__t_bytes.sum", "lts__t_bytes.sum", "dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]
BYTES_NO_DRAM = ["l1tex__t_bytes.sum", "lts__t_bytes.sum"]


def ops(*suffixes: str) -> list[str]:
    return [f"sm__ops_path_tensor_{s}.sum" for s in suffixes]


AMPERE_TENSOR = ops(
    "src_bf16_dst_fp32_sparsity_off", "src_bf16_dst_fp32_sparsity_on",
    "src_fp16_dst_fp16_sparsity_off", "src_fp16_dst_fp16_sparsity_on",
    "src_fp16_dst_fp32_sparsity_off", "src_fp16_dst_fp32_sparsity_on",
    "src_tf32_dst_fp32_sparsity_off", "src_tf32_dst_fp32_sparsity_on",
    "src_int4_sparsity_off", "src_int4_sparsity_on",
    "src_int8_sparsity_off", "src_int8_sparsity_on",
    "src_fp64", "src_int1",
)
ADA_TENSOR = ops(
    "src_bf16_dst_fp32_sparsity_off", "src_bf16_dst_fp32_sparsity_on",
    "src_fp16_dst_fp16_sparsity_off", "src_fp16_dst_fp16_sparsity_on",
    "src_fp16_dst_fp32_sparsity_off", "src_fp16_dst_fp32_sparsity_on",
    "src_tf32_dst_fp32_sparsity_off", "src_tf32_dst_fp32_sparsity_on",
    "src_int4_sparsity_off", "src_int4_sparsity_on",
    "src_int8_sparsity_off", "src_int8_sparsity_on",
    "src_fp8_sparsity_off", "src_fp8_sparsity_on",
    "src_fp64", "src_int1",
)
HOPPER_TENSOR = ops("src_bf16_dst_fp32", "src_fp16", "src_fp64", "src_int1", "src_int8", "src_tf32_dst_fp32",
                    "src_fp8_sparsity_off", "src_fp8_sparsity_on")
BLACKWELL_TENSOR = ops("src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp4_dst_fp32",
                       "src_fp4_fp6_fp8_dst_fp16", "src_fp4_fp6_fp8_dst_fp32", "src_fp64", "src_int8",
                       "src_tf32_dst_fp32")
B300_TENSOR = ops("src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp4_dst_fp32",
                  "src_fp4_fp6_dst_fp16", "src_fp4_fp6_dst_fp32", "src_fp64", "src_int8", "src_tf32_dst_fp32",
                  "op_utcqmma_src_fp8_dst_fp16_sparsity_off", "op_utcqmma_src_fp8_dst_fp16_sparsity_on",
                  "op_utcqmma_src_fp8_dst_fp32_sparsity_off")
RTX50_TENSOR = ops(
    "src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp64", "src_int8", "src_tf32_dst_fp32",
    "src_fp4_dst_fp32_sparsity_off", "src_fp4_dst_fp32_sparsity_on",
    "src_fp4_fp6_dst_fp16_sparsity_off", "src_fp4_fp6_dst_fp16_sparsity_on",
    "src_fp4_fp6_dst_fp32_sparsity_off", "src_fp4_fp6_dst_fp32_sparsity_on",
    "src_fp8_dst_fp16_sparsity_off", "src_fp8_dst_fp16_sparsity_on",
    "src_fp8_dst_fp32_sparsity_off", "src_fp8_dst_fp32_sparsity_on",
)
EXPECTED_METRICS = {
    "7.0": TIME + FLOPS + ["sm__inst_executed_pipe_tensor.sum"] + BYTES,
    "7.2": TIME + FLOPS + ["sm__inst_executed_pipe_tensor.sum"] + BYTES_NO_DRAM,
    "7.5": TIME + FLOPS + ops("src_fp16_bf16_tf32_dst_fp32", "src_fp16_dst_fp16", "src_int1", "src_int4",
                              "src_int8") + BYTES,
    "8.0": TIME + FLOPS + AMPERE_TENSOR + BYTES,
    "8.6": TIME + FLOPS + AMPERE_TENSOR + BYTES,
    "8.7": TIME + FLOPS + AMPERE_TENSOR + BYTES_NO_DRAM,
    "8.9": TIME + FLOPS + ADA_TENSOR + BYTES,
    "9.0": TIME + FLOPS + HOPPER_TENSOR + BYTES,
    "10.0": TIME + FLOPS + PACKED_FP32 + BLACKWELL_TENSOR + BYTES,
    "10.3": TIME + FLOPS + PACKED_FP32 + B300_TENSOR + BYTES,
    "11.0": TIME + FLOPS + BLACKWELL_TENSOR + BYTES_NO_DRAM,
    "12.0": TIME + FLOPS + RTX50_TENSOR + BYTES,
    "12.1": TIME + FLOPS + RTX50_TENSOR + BYTES_NO_DRAM,
}


@pytest.mark.parametrize("cc", sorted(EXPECTED_METRICS, key=lambda c: parse_cc(c)))
def test_command_line_per_compute_capability(cc: str) -> None:
    argv = build_ncu_command(cc, CHILD, "/tmp/run/test_gemm.ncu-rep")
    assert argv == [
        "ncu",
        "--target-processes", "all",
        "--nvtx",
        "--nvtx-include", "regex:pytest_roofline@.+",
        "--metrics", ",".join(EXPECTED_METRICS[cc]),
        "--clock-control", "none",
        "--cache-control", "all",
        "--replay-mode", "kernel",
        "--export", "/tmp/run/test_gemm.ncu-rep",
        "--force-overwrite",
        *CHILD,
    ]


def test_command_line_options() -> None:
    argv = build_ncu_command(
        (9, 0), ["python", "-c", "pass"], "/r/out", ncu="/opt/nsight/ncu", nvtx_range="measure-3",
        clock_control="base", cache_control="none", replay_mode="application", log_file="/r/ncu.log",
        extra_metrics=["sm__warps_active.avg", "gpu__time_duration.sum"],
    )
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert metrics == TIME + FLOPS + HOPPER_TENSOR + BYTES + ["sm__warps_active.avg"]
    assert argv[:5] == ["/opt/nsight/ncu", "--target-processes", "all", "--nvtx", "--nvtx-include"]
    assert argv[5] == "pytest_roofline@measure-3"
    assert argv[8:] == ["--clock-control", "base", "--cache-control", "none", "--replay-mode", "application",
                        "--export", "/r/out.ncu-rep", "--force-overwrite", "--log-file", "/r/ncu.log",
                        "python", "-c", "pass"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clock_control": "boost"}, "clock_control"),
        ({"cache_control": "some"}, "cache_control"),
        ({"replay_mode": "range"}, "range replay"),
        ({"nvtx_range": "a,b"}, "NVTX range name"),
        ({"nvtx_range": "dom@r"}, "NVTX range name"),
    ],
)
def test_command_line_refuses_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_ncu_command("8.0", ["python"], "x.ncu-rep", **kwargs)


@pytest.mark.parametrize("cc", ["6.1", "5.2", "13.0"])
def test_unsupported_compute_capability(cc: str) -> None:
    with pytest.raises(UnsupportedComputeCapability):
        metric_set(cc)


def test_empty_child_is_refused() -> None:
    with pytest.raises(ValueError, match="child_argv"):
        build_ncu_command("8.0", [], "x")


def test_nvtx_expressions() -> None:
    assert nvtx_include_expression() == "regex:pytest_roofline@.+"
    assert nvtx_include_expression("step") == "pytest_roofline@step"


def test_metric_set_records_definitions() -> None:
    assert metric_set("7.0").tensor_definition.startswith("512 x sm__inst_executed_pipe_tensor.sum")
    assert metric_set("8.0").tensor_definition.startswith("sm__ops_path_tensor_src_")
    assert metric_set(8.9).byte_definition == "t_bytes"
    assert parse_cc("12.0") == (12, 0) and parse_cc(8.6) == (8, 6) and parse_cc((9, 0)) == (9, 0)


@pytest.mark.parametrize(
    ("suffix", "precision"),
    [
        ("src_bf16_dst_fp32", "bf16_tensor"),
        ("src_bf16_dst_fp32_sparsity_on", "bf16_tensor"),
        ("src_fp16", "fp16_tensor"),
        ("src_fp16_dst_fp16_sparsity_off", "fp16_tensor"),
        ("src_fp16_bf16_tf32_dst_fp32", "fp16_tensor"),
        ("src_tf32_dst_fp32", "tf32_tensor"),
        ("src_fp64", "fp64_tensor"),
        ("src_fp8_sparsity_off", "fp8_tensor"),
        ("src_fp8_dst_fp16_sparsity_on", "fp8_tensor"),
        ("src_fp4_fp6_fp8_dst_fp32", "fp8_tensor"),
        ("src_fp4_dst_fp32", "fp4_tensor"),
        ("src_fp4_fp6_dst_fp16_sparsity_off", "fp4_fp6_tensor"),
        ("src_int8_sparsity_on", "int8_tensor"),
        ("src_int1", "int1_tensor"),
    ],
)
def test_tensor_precision_names(suffix: str, precision: str) -> None:
    assert tensor_precision(suffix) == precision


def test_launch_work_formulas() -> None:
    metrics = {
        "gpu__time_duration.sum": 1e-3,
        "sm__sass_thread_inst_executed_op_dadd_pred_on.sum": 1.0,
        "sm__sass_thread_inst_executed_op_dmul_pred_on.sum": 2.0,
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum": 4.0,
        "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": 1.0,
        "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": 1.0,
        "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": 1.0,
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 5.0,  # fmul/ffma absent: partial, with a warning
        "sm__inst_executed_pipe_tensor.sum": 3.0,
        "l1tex__t_bytes.sum": 100.0,
        "lts__lts2xbar_cycles_active.sum": 2.0,
        "dram__bytes.sum": None,  # n/a
    }
    work = launch_work(metrics, (7, 0))
    assert work.time_s == 1e-3
    assert work.flops == {"fp64": 1 + 2 + 2 * 4, "fp32": 5.0, "fp16": 2 + 2 + 4, "fp16_tensor": 3 * 512}
    assert work.bytes == {"L1": 100.0, "L2": 64.0}  # the xbar definition (x 32); HBM n/a -> absent
    assert work.definitions["cache_bytes"] == "mixed"
    assert any("fp32 FLOPs are partial" in w for w in work.warnings)
    assert launch_work(metrics, (7, 0), half_lanes=1).flops["fp16"] == 1 + 1 + 2


def test_pipe_tensor_on_newer_chips_is_never_guessed() -> None:
    busy = launch_work({"sm__inst_executed_pipe_tensor.sum": 10.0}, (8, 0))
    assert busy.tensor_flops is None and busy.flops == {} and busy.tensor_instructions == 10.0
    idle = launch_work({"sm__inst_executed_pipe_tensor.sum": 0.0}, (9, 0))
    assert idle.tensor_flops == 0.0 and idle.flops == {}


@pytest.mark.parametrize("name", ["a,b", "dom@r", "outer/inner", "[bottom", "top]", "a+b", "a*b", r"a\,b",
                                  "regex:step.*", " step", "step ", ""])
def test_nvtx_names_with_filter_syntax_are_refused(name: str) -> None:
    # every character the ncu CLI manual's NVTX filtering tables reserve, the regex: prefix, the escape character
    with pytest.raises(ValueError, match="ncu's NVTX filter syntax"):
        nvtx_include_expression(name)


def test_nvtx_ordinary_names_pass() -> None:
    assert nvtx_include_expression("fwd.step-3 (bf16)") == "pytest_roofline@fwd.step-3 (bf16)"


def test_clock_control_is_always_explicit() -> None:
    # ncu's own default is base (locked clocks); our runs never depend on it
    from pytest_roofline.counters.ncu.command import DEFAULT_CLOCK_CONTROL, NCU_DEFAULT_CLOCK_CONTROL

    assert (DEFAULT_CLOCK_CONTROL, NCU_DEFAULT_CLOCK_CONTROL) == ("none", "base")
    for policy in ("none", "base"):
        argv = build_ncu_command("9.0", ["python"], "x", clock_control=policy)
        assert argv[argv.index("--clock-control") + 1] == policy
