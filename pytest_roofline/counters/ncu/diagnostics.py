"""Findings for a failing test's message, after the hierarchical-roofline study of DeepCAM (Yang et al.):

* kernels that are compute-bound at high AI in fp16/bf16/fp32 on CUDA cores while doing zero Tensor Core FLOPs on
  a GPU that has Tensor Cores (e.g. ``implicit_convolve_sgemm<half>`` at HBM AI ~1000 with no Tensor Cores);
* the share of time spent in kernels with no floating-point work (copies, layout changes);
* the top kernels by time;
* reuse factors between memory levels (bytes at L1 / bytes at L2, bytes at L2 / bytes at HBM).

The functions take :class:`~pytest_roofline.counters.ncu.kernel_report.NcuKernel` or plain
:class:`~pytest_roofline.model.KernelSample` objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from pytest_roofline._safe_text import printable
from pytest_roofline.counters.ncu.metrics import LEVEL_HBM, LEVEL_L1, LEVEL_L2, parse_cc
from pytest_roofline.model import TENSOR_SUFFIX, KernelSample, Machine, MissingCeilingError, lower_bound
from pytest_roofline.record.json_values import JsonObject

if TYPE_CHECKING:
    from pytest_roofline.counters.ncu.kernel_report import NcuKernel

    Kernel = NcuKernel | KernelSample  # what the functions here read: ncu's kernels or plain samples

# Without a machine, "high AI" means at least this many FLOPs per byte at every level measured: below the
# CUDA-core fp32 ridge of every data-centre GPU since V100 (V100 ~17, A100 ~12.5, H100 ~20 FLOP/byte at HBM).
DEFAULT_MIN_AI = 10.0
_CUDA_CORE_TYPES = ("fp16", "fp32")  # bf16 CUDA-core work is counted with fp16 by ncu's h* counters
_REUSE_PAIRS = ((LEVEL_L1, LEVEL_L2), (LEVEL_L2, LEVEL_HBM))


def format_seconds(seconds: float | None) -> str:
    """``0.00123`` -> ``"1.23 ms"``."""
    if seconds is None:
        return "-"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def short_name(name: str, width: int = 70) -> str:
    """A kernel name for the terminal: no control characters (a report's names are untrusted), bounded."""
    text = printable(name.removeprefix("void "))
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def kernel_name(name: str) -> str:
    """A C++ kernel's name without ``void``, namespaces, template arguments and parameters:
    ``void cudnn::nchwToNhwcKernel<float, ...>(...)`` -> ``nchwToNhwcKernel``; other names unchanged."""
    text = name.removeprefix("void ")
    if "<" not in text and "(" not in text:
        return text
    depth, kept = 0, []
    for char in text:
        if char == "(" and depth == 0:
            break
        depth += char == "<"
        if depth == 0:
            kept.append(char)
        depth -= char == ">" and depth > 0
    return "".join(kept).rsplit("::", 1)[-1].strip() or text


def tensor_flops_of(kernel: Kernel) -> float | None:
    """Tensor Core FLOPs: the kernel's own record, else the ``*_tensor`` entries; ``None`` when unknown."""
    recorded = getattr(kernel, "tensor_flops", None)
    if recorded is not None:
        return float(recorded)
    entries = [v for k, v in kernel.flops.items() if k.endswith(TENSOR_SUFFIX)]
    return float(sum(entries)) if entries else None


@dataclass(frozen=True)
class TensorCoreFinding:
    kernel: str
    precision: str
    flops: float
    ai: Mapping[str, float]
    time_s: float | None
    reason: str

    def message(self) -> str:
        rate = f", {self.flops / self.time_s / 1e12:.3g} TFLOP/s" if self.time_s else ""
        label = "fp16/bf16" if self.precision == "fp16" else self.precision
        return (f"{short_name(self.kernel)}: {label} on CUDA cores{rate}, {self.reason}, "
                "0 Tensor Core FLOPs on a GPU that has Tensor Cores")


def _lowest_ai(ai: Mapping[str, float]) -> tuple[str, float] | None:
    """The level with the lowest AI: a kernel is compute-bound only if it is so against every level."""
    return min(ai.items(), key=lambda kv: kv[1]) if ai else None


def _gpu_has_tensor_cores(kernels: Sequence[Kernel], machine: Machine | None) -> bool:
    if machine is not None and any(p.endswith(TENSOR_SUFFIX) for p in machine.peak_flops):
        return True
    for kernel in kernels:
        for cc in str(getattr(kernel, "cc", None) or "").split(", "):
            parsed = parse_cc(cc) if cc else None
            if parsed is not None:
                return parsed >= (7, 0)
    return True  # ncu supports CC >= 7.0 only, and nearly all of those have Tensor Cores


def untapped_tensor_cores(
    kernels: Sequence[Kernel],
    machine: Machine | None = None,
    *,
    min_ai: float = DEFAULT_MIN_AI,
    has_tensor_cores: bool | None = None,
) -> list[TensorCoreFinding]:
    """Kernels doing mostly fp16/bf16/fp32 CUDA-core work at high AI (compute-bound) with zero Tensor Core FLOPs.

    With a machine, "compute-bound" is the roofline's bound; without one (or when the machine lacks a ceiling)
    it is an AI of at least ``min_ai`` at every memory level measured. GeForce GTX 16xx (Turing without
    Tensor Cores) need ``has_tensor_cores=False``.
    """
    if has_tensor_cores is None:
        has_tensor_cores = _gpu_has_tensor_cores(kernels, machine)
    if not has_tensor_cores:
        return []
    findings: list[TensorCoreFinding] = []
    for kernel in kernels:
        if tensor_flops_of(kernel) != 0.0:
            continue  # Tensor Cores used, or unknown
        total = float(sum(kernel.flops.values()))
        candidates = {p: kernel.flops.get(p, 0.0) for p in _CUDA_CORE_TYPES}
        precision, flops = max(candidates.items(), key=lambda kv: kv[1])
        if flops <= 0 or sum(candidates.values()) < 0.5 * total:
            continue
        ai = {level: total / moved for level, moved in kernel.bytes.items() if moved > 0}
        reason = None
        if machine is not None:
            try:
                bound = lower_bound(kernel.flops, kernel.bytes, machine).bound
            except MissingCeilingError:
                bound = None
            if bound is not None:
                if not bound.startswith("compute:"):
                    continue
                lowest = _lowest_ai(ai)
                reason = f"{bound}" + (f", lowest AI {lowest[1]:.3g} at {lowest[0]}" if lowest else "")
        if reason is None:
            lowest = _lowest_ai(ai)
            if lowest is None or lowest[1] < min_ai:
                continue
            reason = f"AI >= {min_ai:g} FLOP/byte at every level (lowest {lowest[1]:.3g} at {lowest[0]})"
        findings.append(TensorCoreFinding(kernel.name, precision, flops, ai, kernel.time_s, reason))
    return findings


@dataclass(frozen=True)
class NoFlopTime:
    share: float
    time_s: float
    total_time_s: float
    kernels: tuple[str, ...]


def time_without_flops(kernels: Sequence[Kernel]) -> NoFlopTime | None:
    """Share of the timed kernels' time spent in kernels whose FLOPs were measured and are zero.

    ``None`` when no kernel has both a time and measured FLOPs (a report without FLOP counters says nothing).
    """
    timed = [(k, k.time_s) for k in kernels if k.time_s and k.flops]
    if not timed:
        return None
    total = float(sum(t for _, t in timed))
    idle = [(k, t) for k, t in timed if sum(k.flops.values()) == 0]
    idle_time = float(sum(t for _, t in idle))
    return NoFlopTime(idle_time / total if total > 0 else 0.0, idle_time, total, tuple(k.name for k, _ in idle))


@dataclass(frozen=True)
class KernelTime:
    name: str
    time_s: float
    share: float
    launches: int


def top_kernels_by_time(kernels: Sequence[Kernel], n: int = 5) -> list[KernelTime]:
    timed = [(k, k.time_s) for k in kernels if k.time_s]
    total = float(sum(t for _, t in timed))
    ranked = sorted(timed, key=lambda kt: kt[1], reverse=True)[:n]
    return [KernelTime(k.name, float(t), t / total if total else 0.0, k.launches) for k, t in ranked]


def reuse_factors(bytes_moved: Mapping[str, float]) -> dict[str, float]:
    """``{"L1/L2": B_L1 / B_L2, "L2/HBM": B_L2 / B_HBM}`` where both levels were measured and moved bytes."""
    levels = dict(bytes_moved)
    if LEVEL_HBM not in levels and "DRAM" in levels:
        levels[LEVEL_HBM] = levels["DRAM"]
    factors: dict[str, float] = {}
    for upper, lower in _REUSE_PAIRS:
        if levels.get(upper) is not None and levels.get(lower):
            factors[f"{upper}/{lower}"] = levels[upper] / levels[lower]
    return factors


def total_bytes(kernels: Sequence[Kernel]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for kernel in kernels:
        for level, moved in kernel.bytes.items():
            totals[level] = totals.get(level, 0.0) + moved
    return totals


class NoFlopRecord(TypedDict):
    share: float
    time_s: float
    kernels: list[str]


class UntappedTensorCores(TypedDict):
    kernel: str
    precision: str
    flops: float
    ai: dict[str, float]
    reason: str


class Diagnostics(TypedDict):
    """results.json's ``ncu.diagnostics`` (docs/results.md)."""

    top_kernels: list[JsonObject]  # each a TopKernel's fields
    no_flop_time: NoFlopRecord | None
    reuse_factors: dict[str, float]
    untapped_tensor_cores: list[UntappedTensorCores]


def diagnostics_dict(kernels: Sequence[Kernel], machine: Machine | None = None, top: int = 5) -> Diagnostics:
    no_flops = time_without_flops(kernels)
    return {
        "top_kernels": [vars(k) for k in top_kernels_by_time(kernels, top)],
        "no_flop_time": None if no_flops is None else {
            "share": no_flops.share, "time_s": no_flops.time_s, "kernels": list(no_flops.kernels)},
        "reuse_factors": reuse_factors(total_bytes(kernels)),
        "untapped_tensor_cores": [
            {"kernel": f.kernel, "precision": f.precision, "flops": f.flops, "ai": dict(f.ai), "reason": f.reason}
            for f in untapped_tensor_cores(kernels, machine)
        ],
    }


def format_diagnostics(kernels: Sequence[Kernel], machine: Machine | None = None, top: int = 5) -> str:
    """Lines for a failing test's message."""
    lines: list[str] = []
    ranked = top_kernels_by_time(kernels, top)
    if ranked:
        lines.append("top kernels by time:")
        lines += [f"  {k.share:6.1%}  {format_seconds(k.time_s):>9}  x{k.launches:<4d} {short_name(k.name)}"
                  for k in ranked]
    no_flops = time_without_flops(kernels)
    if no_flops is not None:
        lines.append(f"time in kernels with no floating-point work: {no_flops.share:.1%} "
                     f"({len(no_flops.kernels)} of {len(kernels)} kernels)")
    factors = reuse_factors(total_bytes(kernels))
    if factors:
        lines.append("reuse factors (bytes at upper / lower level): "
                     + ", ".join(f"{pair} {value:.3g}x" for pair, value in factors.items()))
    findings = untapped_tensor_cores(kernels, machine)
    if findings:
        lines.append("compute-bound without Tensor Cores:")
        lines += [f"  {finding.message()}" for finding in findings]
    return "\n".join(lines)
