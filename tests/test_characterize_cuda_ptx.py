"""Offline proof of the CUDA ERT kernels: NVRTC compiles every variant, and the PTX holds the FLOPs we count.

No GPU is needed; these skip when cupy or its NVRTC library is missing.
"""

from __future__ import annotations

import functools

import pytest

from pytest_roofline.characterize import cuda_ert

pytestmark = pytest.mark.usefixtures("nvrtc")  # skips, with the reason, without NVRTC


def _buildable(arch: int) -> None:
    """Skip, with the reason, a target the installed NVRTC cannot build (CUDA 13 dropped sm_70)."""
    reason = cuda_ert.unbuildable_reason(arch)
    if reason is not None:
        pytest.skip(reason)


@functools.cache
def _ptx(precision: str, arch: int) -> dict[str, str]:
    return cuda_ert.ptx_entries(str(cuda_ert.compile_kernels(precision, arch)))


CASES = [(precision, arch) for precision in cuda_ert.PRECISIONS for arch in cuda_ert.ARCHITECTURES
         if cuda_ert.supported(precision, arch)]


@pytest.mark.parametrize(("precision", "arch"), CASES)
def test_ptx_has_the_counted_fmas_for_every_ert_flops(precision: str, arch: int) -> None:
    _buildable(arch)
    entries = _ptx(precision, arch)
    spec = cuda_ert.PRECISIONS[precision]
    assert sorted(entries) == sorted(cuda_ert.kernel_name(precision, f) for f in spec.flops_values)
    for flops in spec.flops_values:
        found = cuda_ert.count_instructions(entries[cuda_ert.kernel_name(precision, flops)], precision)
        expected = cuda_ert.expected_instructions(precision, flops)
        # One element per loop iteration: exactly one load and one store, and the FLOPs the host assumes.
        assert found == {**expected, "loads": 1, "stores": 1}, (precision, arch, flops)
        assert expected["fma"] * spec.flops_per_fma + expected["mul"] == flops


@pytest.mark.parametrize(("precision", "arch"), CASES)
def test_ptxas_assembles_every_variant(precision: str, arch: int) -> None:
    _buildable(arch)
    cubin = cuda_ert.compile_kernels(precision, arch, cubin=True)
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"


def test_bf16_needs_ampere() -> None:
    older = [arch for arch in cuda_ert.ARCHITECTURES if arch < 80 and cuda_ert.unbuildable_reason(arch) is None]
    if not older:
        pytest.skip(f"the installed NVRTC builds none of {[a for a in cuda_ert.ARCHITECTURES if a < 80]}")
    assert not cuda_ert.supported("bf16", older[-1])
    with pytest.raises(RuntimeError, match="bf16x2"):
        cuda_ert.compile_kernels("bf16", older[-1], cubin=True)


def test_expected_instructions_by_hand() -> None:
    assert cuda_ert.expected_instructions("fp64", 1) == {"fma": 0, "mul": 1}
    assert cuda_ert.expected_instructions("fp32", 7 + 1) == {"fma": 4, "mul": 0}
    assert cuda_ert.expected_instructions("fp64", 1024) == {"fma": 512, "mul": 0}
    assert cuda_ert.expected_instructions("fp16", 4) == {"fma": 1, "mul": 0}  # one half2 FMA = 2 lanes x 2
    assert cuda_ert.expected_instructions("bf16", 1024) == {"fma": 256, "mul": 0}
    with pytest.raises(ValueError, match="no ERT_FLOPS=2"):
        cuda_ert.expected_instructions("fp16", 2)
