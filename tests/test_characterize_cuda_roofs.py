"""The CUDA roof kernels offline: NVRTC compiles roof_kernels.cu for every target the installed NVRTC builds,
the PTX holds the loads and FMAs the host counts; the counts, the stable best-of and the roof merge by hand.

No GPU is needed; the compile tests skip, with the reason, without NVRTC or for a target it cannot build.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest

from pytest_roofline.characterize import cuda, cuda_ert, cuda_roofs
from pytest_roofline.characterize.cuda_roofs import RoofReading


def _buildable(arch: int) -> None:
    reason = cuda_ert.unbuildable_reason(arch)
    if reason is not None:
        pytest.skip(reason)


@functools.cache
def _entries(arch: int) -> dict[str, str]:
    return cuda_ert.ptx_entries(str(cuda_roofs.compile_roof_kernels(arch)))


def _count(pattern: str, body: str) -> int:
    return len(re.findall(pattern, body))


@pytest.mark.usefixtures("nvrtc")
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_every_roof_kernel_is_in_the_ptx(arch: int) -> None:
    _buildable(arch)
    expected = {cuda_roofs.l1_kernel(v) for v in cuda_roofs.L1_VECTORS} | {"hbm_triad"}
    expected |= set(cuda_roofs.peak_kernels(arch))
    assert set(_entries(arch)) == expected
    assert ("peak_bf16x2" in expected) == (arch >= 80)


@pytest.mark.usefixtures("nvrtc")
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_l1_kernels_read_n_vectors_through_the_read_only_path_per_pass(arch: int) -> None:
    _buildable(arch)
    for vectors in cuda_roofs.L1_VECTORS:
        body = _entries(arch)[cuda_roofs.l1_kernel(vectors)]
        assert _count(r"\bld\.global\.nc\.v4\.u32\b", body) == vectors  # 16 bytes each, what l1_bytes counts
        assert _count(r"\bld\.global\b", body) == vectors                 # no other load
        assert _count(r"\bst\.global\b", body) == 1                       # the result, once per thread


def _loop_body(body: str) -> list[str]:
    """The lines of the kernel's one ``nounroll`` loop: from its label to the branch back to it."""
    lines = [line.strip() for line in body.splitlines()]
    start = next(i for i, line in enumerate(lines) if line == '.pragma "nounroll";')
    label = lines[start - 1].rstrip(":")
    end = next(i for i in range(start, len(lines)) if re.search(rf"\bbra(\.uni)?\s+{re.escape(label)};", lines[i]))
    return lines[start:end + 1]


@pytest.mark.usefixtures("nvrtc")
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_l1_loads_move_with_the_iteration_so_none_can_leave_the_loop(arch: int) -> None:
    """On the H100 the loads at fixed addresses read 118 TB/s (the SMs' L1 peak is ~33): read-only loads of
    loop-invariant addresses may be hoisted by ptxas, leaving only the XORs in the loop. Every load's address
    must be computed inside the loop from the iteration."""
    _buildable(arch)
    for vectors in cuda_roofs.L1_VECTORS:
        loop = _loop_body(_entries(arch)[cuda_roofs.l1_kernel(vectors)])
        defined = {m.group(1) for line in loop if (m := re.match(r"[a-z][\w.]*\s+(%\w+),", line))}
        addresses = re.findall(r"ld\.global\.nc\.v4\.u32\s+\{[^}]*\},\s*\[(%\w+)\]", "\n".join(loop))
        assert len(addresses) == vectors
        assert set(addresses) <= defined, f"l1_read_v{vectors}: addresses fixed before the loop"


@pytest.mark.usefixtures("nvrtc")
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_the_triad_reads_two_float4_and_writes_one_per_element(arch: int) -> None:
    _buildable(arch)
    body = _entries(arch)["hbm_triad"]
    stores = _count(r"\bst\.global\.v4\.f32\b", body)
    assert stores >= 1 and _count(r"\bst\.global\b", body) == stores
    # The compiler may unroll the grid-stride loop; per element it stays 2 loads, 4 FMAs (x + s*y per lane), 1 store
    assert _count(r"\bld\.global\.nc\.v4\.f32\b", body) == 2 * stores == _count(r"\bld\.global\b", body)
    assert _count(r"\bfma\.rn\.f32\b", body) == 4 * stores


@pytest.mark.usefixtures("nvrtc")
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_peak_kernels_hold_chains_x_unroll_fmas_of_their_unit_and_touch_no_memory_in_the_loop(arch: int) -> None:
    _buildable(arch)
    for kernel in cuda_roofs.peak_kernels(arch):
        body = _entries(arch)[kernel]
        _, _, opcode, _ = cuda_roofs.PEAKS[kernel.removeprefix("peak_")]
        assert _count(rf"\b{re.escape(opcode)}\b", body) == cuda_roofs.PEAK_CHAINS * cuda_roofs.PEAK_UNROLL == 64
        assert _count(r"\bld\.global\b", body) == 0 and _count(r"\bst\.global\b", body) == 1


@pytest.mark.usefixtures("nvrtc")
@pytest.mark.parametrize("arch", cuda_ert.ARCHITECTURES)
def test_ptxas_assembles_the_roof_kernels(arch: int) -> None:
    _buildable(arch)
    cubin = cuda_roofs.compile_roof_kernels(arch, cubin=True)
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"


@pytest.mark.usefixtures("nvrtc")
def test_supported_archs_decide_what_is_skipped() -> None:
    archs = cuda_ert.supported_archs()
    if archs is None:
        pytest.skip("this CuPy/NVRTC cannot list its targets")
    assert 80 in archs and 90 in archs  # every NVRTC from 11.8 to 13 builds Ampere and Hopper
    assert cuda_ert.unbuildable_reason(90) is None
    assert cuda_ert.unbuildable_reason(1) == (f"NVRTC {'.'.join(map(str, cuda_ert.nvrtc_version()))} cannot build "
                                              f"sm_1 (nvrtcGetSupportedArchs: {', '.join(f'sm_{a}' for a in archs)})")


# --- by hand ----------------------------------------------------------------------------------------------

def test_counts_by_hand() -> None:
    # H100: 132 SMs x 4 blocks, 16 KiB per block (4 vectors x 256 threads x 16 B), 1000 passes
    assert cuda_roofs.l1_bytes(528, 4, 1000) == 528 * 1000 * 16 * 1024
    # 264 blocks x 256 threads x 10 iterations x 64 packed FMAs x 4 FLOPs
    assert cuda_roofs.peak_flops_done("peak_fp16x2", 264, 10) == 264 * 256 * 10 * 64 * 4
    assert cuda_roofs.peak_flops_done("peak_fp64", 1, 1) == 256 * 64 * 2
    assert cuda_roofs.triad_bytes(2**26) == 3 * 2**30  # 2^26 float4 per array: 1 GiB each


def test_best_until_stable_stops_once_the_best_settles() -> None:
    times = iter([1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.1])
    best, runs = cuda_roofs.best_until_stable(lambda: next(times), min_runs=4, patience=8, budget_s=100.0)
    assert (best, runs) == (0.7, 12)  # run 4 set the best, runs 5..12 did not beat it by 0.5 %


def test_best_until_stable_keeps_going_while_it_improves() -> None:
    seconds = [1.0 * 0.99**i for i in range(40)]  # 1 % better every run: never settles
    feed = iter(seconds)
    best, runs = cuda_roofs.best_until_stable(lambda: next(feed), min_runs=4, max_runs=40, budget_s=100.0)
    assert runs == 40 and best == pytest.approx(seconds[-1])


def test_best_until_stable_stops_at_the_budget() -> None:
    best, runs = cuda_roofs.best_until_stable(lambda: 0.5, min_runs=3, patience=100, budget_s=2.0)
    assert (best, runs) == (0.5, 4)


class _FakeRoofs:
    def __init__(self, index: int) -> None:
        self.index = index

    def l1(self) -> RoofReading:
        return RoofReading("l1_read_v4", 31.9e12, 528, 1000, 0.002, "16 KiB per block, 4 blocks per SM")

    def triad(self, total_bytes: int) -> RoofReading:
        return RoofReading("hbm_triad", 3.03e12, 264, 1, 0.001, f"{total_bytes} bytes")

    def peaks(self) -> dict[str, RoofReading]:
        return {"fp16": RoofReading("peak_fp16x2", 66e12, 264, 100, 0.002),
                "fp32": RoofReading("peak_fp32", 55e12, 264, 100, 0.002)}


def test_roof_kernels_set_l1_and_raise_hbm_and_cuda_core_peaks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_roofs, "GpuRoofs", _FakeRoofs)
    swept = {"L1": 7.54e12, "L2": 7.61e12, "HBM": 2.817e12}  # the H100 sweep's plateaus
    bandwidth = {"L2": swept["L2"], "HBM": swept["HBM"]}
    peaks = {"fp16": 63.46e12, "fp32": 62.18e12}
    sources = {"peak_flops.fp16": "ert-fma", "peak_flops.fp32": "ert-fma", "bandwidth.HBM": "ert-update-fp64"}
    lines: list[str] = []
    rows = cuda._roof_kernels(0, 2**30, swept, bandwidth, peaks, sources, lines.append)
    assert bandwidth == {"L1": 31.9e12, "L2": 7.61e12, "HBM": 3.03e12}
    assert peaks == {"fp16": 66e12, "fp32": 62.18e12}  # the ERT fp32 stays: it read higher than the kernel
    assert sources["peak_flops.fp16"] == "peak_fp16x2" and sources["peak_flops.fp32"] == "ert-fma"
    assert sources["bandwidth.L1"] == "l1_read_v4 (16 KiB per block, 4 blocks per SM)"
    assert rows["L1"]["value"] == 31.9e12 and rows["peak_fp16"]["kernel"] == "peak_fp16x2"


def test_an_l1_reading_far_above_l2_is_refused_and_the_sweep_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    class Hoisted(_FakeRoofs):
        def l1(self) -> RoofReading:  # what the H100 read when ptxas hoisted the loads out of the loop
            return RoofReading("l1_read_v8", 118.26e12, 528, 1000, 0.002, "32 KiB per block, 4 blocks per SM")

    monkeypatch.setattr(cuda_roofs, "GpuRoofs", Hoisted)
    bandwidth = {"L2": 7.576e12, "HBM": 2.82e12}
    sources: dict[str, str] = {}
    lines: list[str] = []
    rows = cuda._roof_kernels(0, 2**30, {"L1": 7.40e12, **bandwidth}, bandwidth, {}, sources, lines.append)
    assert bandwidth["L1"] == 7.40e12 and sources["bandwidth.L1"] == "ert-update-fp64 (launch-bound)"
    assert rows["L1"]["value"] == 118.26e12 and "above 8x L2 (7.58 TB/s)" in rows["L1"]["rejected"]
    assert any("not a cache read" in line for line in lines)
    # 31.9 TB/s, 4.2x this L2, is a real L1 read (the fake's default) and is kept
    monkeypatch.setattr(cuda_roofs, "GpuRoofs", _FakeRoofs)
    cuda._roof_kernels(0, 2**30, {"L1": 7.40e12, **bandwidth}, bandwidth, {}, sources, lines.append)
    assert bandwidth["L1"] == 31.9e12


def test_a_failing_roof_kernel_leaves_the_sweep_roofs_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(index: int) -> Any:
        raise RuntimeError("NVRTC failed")

    monkeypatch.setattr(cuda_roofs, "GpuRoofs", broken)
    bandwidth = {"L2": 7.61e12, "HBM": 2.817e12}
    sources: dict[str, str] = {}
    rows = cuda._roof_kernels(0, 2**30, {"L1": 7.54e12, **bandwidth}, bandwidth, {}, sources, lambda _: None)
    assert rows == {"error": "RuntimeError: NVRTC failed"}
    assert bandwidth["L1"] == 7.54e12 and sources["bandwidth.L1"] == "ert-update-fp64 (launch-bound)"
