"""The paper's reading of a model step, kernel by kernel (Yang et al., arXiv 2009.05257): which kernels take
the time, which run on Tensor Cores, how much of the time goes to kernels that do no floating-point work
(layout changes, type conversions), and how much of the work runs on Tensor Cores. Plain Python over
``model.KernelSample``; the chart and the kernel table draw from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_roofline.model import TENSOR_SUFFIX, KernelSample, Machine, lower_bound

TENSOR_ONLY = ("tf32", "fp8")  # precisions that exist only on matrix units


def is_tensor_precision(precision: str) -> bool:
    """A Tensor Core (matrix unit) precision: ``*_tensor``, or tf32/fp8, which no CUDA core computes."""
    return precision.endswith(TENSOR_SUFFIX) or precision in TENSOR_ONLY


def tensor_flops(kernel: KernelSample) -> float:
    return float(sum(v for p, v in kernel.flops.items() if is_tensor_precision(p)))


def is_tensor_kernel(kernel: KernelSample) -> bool:
    """Most of the kernel's FLOPs ran on Tensor Cores."""
    return kernel.total_flops > 0 and tensor_flops(kernel) > 0.5 * kernel.total_flops


def kernel_seconds(kernel: KernelSample, machine: Machine) -> float:
    """The kernel's measured time, or for an untimed one (the analytic counter) its least time on the roofs."""
    if kernel.time_s is not None:
        return kernel.time_s
    return lower_bound(kernel.flops, kernel.bytes, machine).t_min


def by_time(kernels: Sequence[KernelSample], machine: Machine) -> list[KernelSample]:
    """Longest first (ties in the order given)."""
    return sorted(kernels, key=lambda k: -kernel_seconds(k, machine))


@dataclass(frozen=True)
class KernelShares:
    seconds: float  # all kernels' time (measured, or least time where untimed)
    no_flop_time: float  # share of that time in kernels with no FLOPs
    tensor_flops: float  # share of the FLOPs on Tensor Cores
    tensor_kernels: int
    kernels: int

    def describe(self) -> str:
        return (f"{self.no_flop_time:.0%} of kernel time in kernels with no FLOPs; {self.tensor_flops:.0%} of "
                f"FLOPs on Tensor Cores ({self.tensor_kernels} of {self.kernels} kernels)")


def shares(kernels: Sequence[KernelSample], machine: Machine) -> KernelShares:
    seconds = sum(kernel_seconds(k, machine) for k in kernels)
    idle = sum(kernel_seconds(k, machine) for k in kernels if k.total_flops <= 0)
    flops = sum(k.total_flops for k in kernels)
    on_tensor = sum(tensor_flops(k) for k in kernels)
    return KernelShares(seconds, idle / seconds if seconds > 0 else 0.0, on_tensor / flops if flops > 0 else 0.0,
                        sum(is_tensor_kernel(k) for k in kernels), len(kernels))
