"""Roofline chart labels: every distinct roof drawn and named once, labels placed apart, top ops named.

The H100 roofs are those of the first real H100 characterization (``../shared/gpu-h100/characterize.json``,
NVIDIA H100 80GB HBM3, 2026-11-26, the record written before CUDA-core and Tensor Core roofs were told
apart: ``fp16`` there is the Tensor Core GEMM), copied here as numbers so the test runs without the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from pytest_roofline.model import KernelSample, Machine, evaluate_region
from pytest_roofline.output import chart
from pytest_roofline.output.label_place import overlapping_pairs

H100_OLD = Machine(
    "NVIDIA H100 80GB HBM3",
    {"fp64": 64564128002189.79, "fp32": 62176848393457.17, "fp16": 749427189244205.6, "bf16": 783485079076710.5,
     "fp64_tensor": 64564128002189.79, "tf32_tensor": 411021328167652.1, "tf32": 411021328167652.1,
     "fp16_tensor": 749427189244205.6, "bf16_tensor": 783485079076710.5, "fp8_tensor": 1421762702971989.5,
     "fp8": 1421762702971989.5},
    {"L1": 7539750006397.196, "L2": 7609345749153.414, "HBM": 2817383055114.39},
)
# The names after CUDA-core and Tensor Core roofs are told apart (issue 32): the CUDA-core half-precision
# values are the packed-FMA rates the issue quotes (63.46 / 63.57 TFLOP/s), fp64 FMA 31.97.
H100_NEW = Machine(
    "NVIDIA H100 80GB HBM3",
    {"fp64": 31.97e12, "fp32": 62.18e12, "fp16": 63.46e12, "bf16": 63.57e12, "fp64_tensor": 64.56e12,
     "tf32_tensor": 411.0e12, "fp16_tensor": 749.4e12, "bf16_tensor": 783.5e12, "fp8_tensor": 1421.8e12},
    {"L1": 31.9e12, "L2": 7.61e12, "HBM": 2.99e12},
)
# A 2-core CPU as the issue saw it: fp16 emulated on the fp32 FMA units, so its roof is fp32's value.
CPU = Machine(
    "AMD EPYC (2 cores)", {"fp64": 59e9, "fp32": 118e9, "fp16": 118e9, "bf16": 236e9},
    {"L1": 560e9, "L2": 260e9, "L3": 120e9, "DRAM": 19e9},
    info={"emulated": {"fp16": {"measured_flops": 3e9, "roof_from": "fp32"}},
          "isa_peaks": {"fp64": {"512": 59e9, "256": 29.5e9}, "fp32": {"512": 118e9, "256": 59e9, "128": 29.5e9}}},
)


def _texts(fig: object) -> tuple[list[object], list[str]]:
    """Place the queued labels; the placed label artists and every label/legend string of the figure."""
    placed = chart.place_pending(fig)
    ax = fig.axes[0]  # type: ignore[attr-defined]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    return placed, [t.get_text() for t in placed] + legend


def _count(name: str, strings: list[str]) -> int:
    # a roof name as a whole word: "fp16" is not counted inside "fp16_tensor", nor in an ISA ceiling's
    # "fp16 256-bit" (a narrower vector width of that precision, not its roof)
    pattern = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w]| \d+-bit)")
    return sum(len(pattern.findall(s)) for s in strings)


@pytest.mark.parametrize("machine", [H100_OLD, H100_NEW, CPU], ids=["h100-record", "h100-new-names", "cpu"])
def test_no_two_roof_labels_overlap(machine: Machine) -> None:
    placed, _ = _texts(chart.machine_figure(machine))
    assert len(placed) >= 4
    assert overlapping_pairs(placed) == []


@pytest.mark.parametrize("machine", [H100_OLD, H100_NEW, CPU], ids=["h100-record", "h100-new-names", "cpu"])
def test_each_roof_is_named_once(machine: Machine) -> None:
    _, strings = _texts(chart.machine_figure(machine))
    for name in [*machine.peak_flops, *machine.bandwidth]:
        assert _count(name, strings) == 1, (name, strings)


def test_equal_roofs_share_one_line_and_label() -> None:
    # The H100 record: 11 names, 6 distinct values (fp64 = fp64_tensor, fp16 = fp16_tensor, tf32 =
    # tf32_tensor, bf16 = bf16_tensor, fp8 = fp8_tensor; fp32 alone).
    roofs = chart.compute_ceilings(H100_OLD)
    assert [r.names for r in roofs] == [("fp8", "fp8_tensor"), ("bf16", "bf16_tensor"), ("fp16", "fp16_tensor"),
                                        ("tf32", "tf32_tensor"), ("fp64", "fp64_tensor"), ("fp32",)]
    assert roofs[2].label == "fp16 / fp16_tensor 749 TFLOP/s"
    fig = chart.machine_figure(H100_OLD)
    flat = [line for line in fig.axes[0].get_lines() if len(line.get_ydata()) == 2
            and line.get_ydata()[0] == line.get_ydata()[1]]
    assert len(flat) == 6
    # the CPU: the emulated fp16 roof is the fp32 roof: one label naming both, the real one first
    labels = [r.label for r in chart.compute_ceilings(CPU)]
    assert "fp32 / fp16 (emulated) 118 GFLOP/s" in labels and len(labels) == 3


def test_cuda_core_and_tensor_core_roofs_are_told_apart() -> None:
    roofs = {r.names: r.tensor for r in chart.compute_ceilings(H100_NEW)}
    assert roofs[("fp16",)] is False and roofs[("fp16_tensor",)] is True and roofs[("tf32_tensor",)] is True
    assert roofs[("fp32",)] is False and roofs[("fp64",)] is False
    fig = chart.machine_figure(H100_NEW)
    styles = {line.get_label(): line.get_linestyle() for line in fig.axes[0].get_lines()}
    assert styles["CUDA-core roofs (FMA)"] == "-" and styles["Tensor Core roofs (GEMM)"] == "--"
    # a CPU has no Tensor Core roofs, so no such legend entries
    _, strings = _texts(chart.machine_figure(CPU))
    assert not any("Tensor Core" in s for s in strings)


def test_op_label_reads_as_launches_of_a_shape() -> None:
    assert chart.op_label("aten.mm.default[1x64,64x64]", 1024) == "1024 launches of a 1×64 @ 64×64 matmul"
    assert chart.op_label("aten.convolution.default[8x64x56x56,64x64x3x3]") == "8×64×56×56 conv"
    # ncu's kernel names (H100 conv, ../shared/gpu-h100/conv2d_forward_fp32_ncu.kernels.csv): the function alone
    assert chart.op_label("void cudnn::nchwToNhwcKernel<float, float, float, 0, 1, 2>(cudnn::nchw2nhwc_params_t"
                          "<T3>, const T1 *, T2 *)", 2) == "2 launches of nchwToNhwcKernel"
    assert chart.op_label("void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::CUDAFunctor_"
                          "add<float>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
                          ) == "elementwise_kernel"
    long = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x64x32_stage5"
    assert len(chart.op_label(long)) == 48 and "…" in chart.op_label(long)
    assert chart.op_label("k$x$\x1b[31m") == r"k\$x\$\x1b[31m"  # no math mode, no escape sequence


def test_failure_chart_names_the_top_ops_and_carries_the_diagnosis(tmp_path: Path) -> None:
    kernels = [
        KernelSample("aten.mm.default[1x64,64x64]", {"fp32": 8388608}, {"DRAM": 17563648}, None, 1024),
        KernelSample("aten.relu.default[1024x64]", {"fp32": 65536}, {"DRAM": 524288}, None, 1),
        KernelSample("aten.stack.default[64,64,64,64,+1020]", {}, {"DRAM": 786432}, None, 1),
    ]
    verdict = evaluate_region(kernels, CPU, 0.0052)
    caption = ["roofline: attained fraction 0.186 is below min_fraction 0.5", "bound: memory:DRAM"]
    fig = chart.roofline_figure(CPU, kernels, verdict, title="row by row", min_fraction=0.5, caption=caption)
    placed, strings = _texts(fig)
    assert "1024 launches of a 1×64 @ 64×64 matmul" in strings
    assert "relu [1024×64]" in strings
    assert overlapping_pairs(placed) == []
    assert any(caption[0] in t.get_text() for t in fig.texts)
    assert chart.save(fig, tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_the_greedy_step_takes_the_first_free_candidate_and_tries_no_further() -> None:
    from pytest_roofline.output.label_place import least_costly

    tried: list[str] = []
    discarded: list[str] = []

    def cost(name: str) -> tuple[float, ...]:
        tried.append(name)
        return {"a": (2.0, 0.0), "b": (1.0, 5.0), "c": (0.0, 0.0), "d": (0.0, 0.0)}[name]

    assert least_costly("abcd", cost, discarded.append) == "c"
    assert tried == ["a", "b", "c"]  # "d" is never made
    assert discarded == ["a", "b"]
    # none free: the least costly (lexicographic: the first term first), every other one discarded
    discarded.clear()
    assert least_costly("ab", cost, discarded.append) == "b"
    assert discarded == ["a"]
    # the caller says what is free: here a first term of 1, so "b" ends the search
    assert least_costly("bd", cost, free=lambda price: price[0] == 1.0) == "b"
    assert least_costly("", cost) is None
