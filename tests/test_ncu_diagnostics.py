"""Diagnostics for failing-test messages: untapped Tensor Cores, time without FLOPs, top kernels, reuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.counters.ncu.diagnostics import (
    format_diagnostics,
    reuse_factors,
    time_without_flops,
    top_kernels_by_time,
    untapped_tensor_cores,
)
from pytest_roofline.counters.ncu.kernel_report import NcuKernel
from pytest_roofline.model import KernelSample, Machine

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "ncu-samples"
V100ISH = Machine("gpu", {"fp16": 30e12, "fp32": 15e12, "fp16_tensor": 120e12}, {"L2": 3e12, "HBM": 0.9e12})


def ncu_kernel(name: str, flops: dict[str, float], moved: dict[str, float], time_s: float | None,
               tensor_flops: float | None, cc: str | None = "7.0", launches: int = 1) -> NcuKernel:
    return NcuKernel(name, launches, time_s, flops, moved, tensor_flops, None, None, cc, None, None)


SGEMM_HALF = ncu_kernel("void implicit_convolve_sgemm<__half, 1024, 5, 5>(int, int)", {"fp16": 1e12, "fp32": 0.0},
                        {"HBM": 1e9, "L2": 4e9}, 0.2, tensor_flops=0.0)
TC_GEMM = ncu_kernel("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", {"fp16_tensor": 5e12}, {"HBM": 1e9}, 0.1,
                     tensor_flops=5e12)
COPY = ncu_kernel("void copy_kernel<float>(float const*, float*)", {"fp32": 0.0}, {"HBM": 4e9}, 0.05,
                  tensor_flops=0.0)
UNKNOWN_TC = ncu_kernel("void relu<float>(float*)", {"fp32": 2e11}, {"HBM": 1e9}, 0.02, tensor_flops=None)


def test_untapped_tensor_cores_by_ai_without_a_machine() -> None:
    findings = untapped_tensor_cores([SGEMM_HALF, TC_GEMM, COPY, UNKNOWN_TC])
    assert [f.kernel for f in findings] == [SGEMM_HALF.name]
    finding = findings[0]
    assert finding.precision == "fp16" and finding.ai["HBM"] == pytest.approx(1000.0)
    assert "lowest 250 at L2" in finding.reason  # 1e12 FLOPs / 4e9 L2 bytes
    message = finding.message()
    assert "fp16/bf16 on CUDA cores" in message and "5 TFLOP/s" in message and "0 Tensor Core FLOPs" in message


def test_untapped_tensor_cores_uses_the_machine_bound() -> None:
    # fp16: 1e12 / 30e12 = 33 ms of compute vs 1e9 / 0.9e12 = 1.1 ms at HBM: compute-bound.
    findings = untapped_tensor_cores([SGEMM_HALF], V100ISH)
    assert len(findings) == 1 and findings[0].reason.startswith("compute:fp16")
    # A memory-bound kernel at AI 12.5 is left alone even though 12.5 >= the default min_ai.
    streaming = ncu_kernel("stream", {"fp32": 1e9}, {"HBM": 8e7}, 0.01, tensor_flops=0.0)
    assert untapped_tensor_cores([streaming], Machine("m", {"fp32": 15e12}, {"HBM": 0.9e12})) == []
    assert len(untapped_tensor_cores([streaming])) == 1  # without a machine the AI rule fires


def test_untapped_tensor_cores_respects_missing_tensor_cores_and_low_ai() -> None:
    assert untapped_tensor_cores([SGEMM_HALF], has_tensor_cores=False) == []
    low = ncu_kernel("low", {"fp32": 1e6}, {"HBM": 1e6}, 0.01, tensor_flops=0.0)
    assert untapped_tensor_cores([low]) == []
    pascal = ncu_kernel("old", {"fp32": 1e12}, {"HBM": 1e6}, 0.01, tensor_flops=0.0, cc="6.1")
    assert untapped_tensor_cores([pascal]) == []
    # High AI at HBM but low at L2 (an L2-resident working set) is not compute-bound.
    l2_bound = ncu_kernel("rng", {"fp32": 1e6}, {"HBM": 100.0, "L2": 1e6}, 0.01, tensor_flops=0.0)
    assert untapped_tensor_cores([l2_bound]) == []


def test_plain_kernel_samples_work_too() -> None:
    sample = KernelSample("k", {"fp32": 1e12, "fp16_tensor": 0.0}, {"HBM": 1e8}, 0.1)
    assert len(untapped_tensor_cores([sample])) == 1
    no_tensor_counter = KernelSample("k", {"fp32": 1e12}, {"HBM": 1e8}, 0.1)
    assert untapped_tensor_cores([no_tensor_counter]) == []  # Tensor Core use unknown: no claim


def test_time_without_flops() -> None:
    unknown = ncu_kernel("no counters", {}, {"HBM": 1.0}, 10.0, tensor_flops=None)
    share = time_without_flops([SGEMM_HALF, TC_GEMM, COPY, unknown])
    # COPY's 0.05 s of 0.2 + 0.1 + 0.05 s; the kernel without FLOP counters is left out.
    assert share is not None
    assert share.share == pytest.approx(0.05 / 0.35) and share.kernels == (COPY.name,)
    assert time_without_flops([unknown]) is None


def test_top_kernels_and_reuse() -> None:
    top = top_kernels_by_time([COPY, SGEMM_HALF, TC_GEMM, UNKNOWN_TC], n=2)
    assert [(k.name, round(k.share, 4)) for k in top] == [(SGEMM_HALF.name, round(0.2 / 0.37, 4)),
                                                          (TC_GEMM.name, round(0.1 / 0.37, 4))]
    assert reuse_factors({"L1": 300.0, "L2": 100.0, "HBM": 25.0}) == {"L1/L2": 3.0, "L2/HBM": 4.0}
    assert reuse_factors({"L2": 100.0, "DRAM": 50.0}) == {"L2/HBM": 2.0}
    assert reuse_factors({"L1": 1.0, "L2": 0.0}) == {}


def test_format_diagnostics_text() -> None:
    text = format_diagnostics([SGEMM_HALF, TC_GEMM, COPY], V100ISH)
    assert text.splitlines()[0] == "top kernels by time:"
    assert "implicit_convolve_sgemm<__half" in text.splitlines()[1] and "200 ms" in text.splitlines()[1]
    assert "time in kernels with no floating-point work: 14.3% (1 of 3 kernels)" in text
    assert "compute-bound without Tensor Cores:" in text


@pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"shared ncu samples not found at {SAMPLES}")
def test_reuse_factors_of_sample_04() -> None:
    from pytest_roofline.counters.ncu import load_report

    path = next(SAMPLES.glob("04_*.csv"))
    gpp = load_report(path).kernels[0]
    # l1tex__t_bytes.sum 1,288,549,677,760 / lts__t_bytes.sum 640,889,913,632 = 2.01056;
    # lts__t_bytes.sum 640,889,913,632 / dram__bytes.sum 516,327,794,816 = 1.24125.
    assert reuse_factors(gpp.bytes) == {"L1/L2": pytest.approx(1_288_549_677_760 / 640_889_913_632, rel=1e-12),
                                        "L2/HBM": pytest.approx(640_889_913_632 / 516_327_794_816, rel=1e-12)}
    assert reuse_factors(gpp.bytes)["L2/HBM"] == pytest.approx(1.24125, rel=1e-5)
    assert untapped_tensor_cores([gpp]) == []  # FP64 work: not a Tensor Core candidate here
