"""Helpers of the example suite: the device, work sized per device, AMP on/off, and step functions.

The same tests run on a CPU (fp32, and bf16 autocast for AMP) and on a CUDA machine (fp16 autocast). On a GPU
the work is larger (batch 32 and more, DeepCAM blocks at the benchmark's resolution: :func:`per_device`), so
that kernels, not Python and launches, take most of each step; each threshold is a number per device
(``min_fraction={"cpu": ..., "cuda": ...}``): see docs/writing-tests.md for where the CUDA ones come from.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
AMP_DTYPE = torch.float16 if DEVICE.type == "cuda" else torch.bfloat16
Threshold = float | dict[str, float]  # one min_fraction, or one per device: {"cpu": 0.2, "cuda": 0.05}


def per_device(*, cpu: Any, cuda: Any) -> Any:
    """The value for the device this suite runs on: work sizes differ between a CPU and a GPU."""
    return cuda if DEVICE.type == "cuda" else cpu


def amp_variants(*, fp32: Threshold, amp: Threshold) -> pytest.MarkDecorator:
    """Run a test with AMP off and on, each with its own threshold (AMP is judged against the faster
    bf16/fp16 roof, so it reaches a smaller fraction of it); a threshold may be one number per device."""
    return pytest.mark.parametrize("amp", [
        pytest.param(False, id="fp32", marks=pytest.mark.roofline(min_fraction=fp32)),
        pytest.param(True, id="amp", marks=pytest.mark.roofline(min_fraction=amp)),
    ])


def require_native_amp() -> None:
    """Skip an AMP variant where the device has no native reduced-precision path: there PyTorch emulates
    bf16 in software (~1 GFLOP/s on a Zen 3 core that does ~100 in fp32), so one step takes minutes and says
    nothing about the model. CUDA devices always run it (fp16 autocast)."""
    if DEVICE.type == "cuda":
        return
    from pytest_roofline.characterize.precision import missing_path_reason

    reason = missing_path_reason("bf16")
    if reason is not None:
        pytest.skip(f"bf16 autocast: {reason}{_measured_rates()}")


def _measured_rates() -> str:
    """'; measured bf16 GEMM 1.0 GFLOP/s vs fp32 roof 203 GFLOP/s' from this machine's cached characterization."""
    try:
        from pytest_roofline.characterize.ceiling_cache import read_cached
        from pytest_roofline.characterize.machine import cache_file_for, fingerprint

        machine = read_cached(cache_file_for("cpu"), fingerprint("cpu"))
        if machine is None:
            return "; bf16 rate not measured yet (run with --roofline)"
        bf16 = float(dict(machine.info.get("gemm_flops") or {})["bf16"])
        return (f"; measured bf16 GEMM {bf16 / 1e9:.3g} GFLOP/s vs the fp32 roof "
                f"{machine.peak_flops['fp32'] / 1e9:.3g} GFLOP/s")
    except Exception:  # noqa: BLE001 - the rate is a detail of the reason; never fail the skip over it
        return ""


def autocast(enabled: bool) -> contextlib.AbstractContextManager[Any]:
    return torch.autocast(DEVICE.type, dtype=AMP_DTYPE) if enabled else contextlib.nullcontext()


def forward_step(module: torch.nn.Module, *inputs: torch.Tensor, amp: bool) -> Callable[[], Any]:
    """Inference: eval mode, no autograd graph."""
    if amp:
        require_native_amp()
    module.eval()

    @torch.no_grad()
    def step() -> Any:
        with autocast(amp):
            return module(*inputs)

    return step


def train_step(module: torch.nn.Module, *inputs: torch.Tensor, amp: bool) -> Callable[[], Any]:
    """Forward + backward in training mode; gradients are reset so every call does the same work."""
    if amp:
        require_native_amp()
    module.train()
    for tensor in inputs:
        tensor.requires_grad_(True)

    def step() -> torch.Tensor:
        module.zero_grad(set_to_none=True)
        for tensor in inputs:
            tensor.grad = None
        with autocast(amp):
            out = module(*inputs)
        loss = (out[0] if isinstance(out, tuple) else out).float().sum()
        loss.backward()
        return loss

    return step
