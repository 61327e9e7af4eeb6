"""Findings from per-op times on the analytic path: the CPU analogues of the ncu diagnostics.

Plain Python. Each function takes the timed ops of one region (:class:`OpRow`) and returns lines for the
failure message (empty when there is nothing to say):

- :func:`outside_ops`: the ops account for less than 0.7 of the region's time (Python between ops, views,
  dispatch), when the profiler did not inflate the op times by more than half;
- :func:`no_flop_share`: the share of time in ops with no floating-point work (copies, ``cat``, layout
  changes, upsampling by nearest neighbour): the study of DeepCAM found about half of its GPU time there;
- :func:`too_small`: ops whose time at their roof is, per call, below the dispatch cost (the profiler's time
  of a 1-element add, measured in the same process): dispatch alone keeps them under half of their roof, so
  only batching or fusing helps (said from 5 % of the op time on);
- :func:`fp32_fallback`: GEMM-like ops (matrix products, convolutions, RNN layers, attention) that did
  their math in fp32 in a region that computes in bf16/fp16 elsewhere: autocast left them out (or their
  inputs were cast back), so they run on the fp32 roof;
- :func:`would_fit_faster_level`: memory-bound ops below half their roof that lose at least 2 % of the
  region's lost time (and are not too small), judged at a level whose own per-call bytes would fit a faster
  one (the three that lose the most time): the region's working set is too large for it, the op's is not, so fusing
  it with its neighbours (or tiling) would let it stream from the faster level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_roofline.model import Machine
from pytest_roofline.model.op_trace import profiler_op_name
from pytest_roofline.model.placement import FIT_FRACTION
from pytest_roofline.model.units import si

SMALL_MIN_SHARE = 0.05  # too-small ops are said from a twentieth of the op time on
MIN_LOST_SHARE = 0.02  # level findings only for ops losing at least this share of the region's lost time
NO_FLOP_MIN_SHARE = 0.10  # say it from a tenth of the time on
LOW_COVERAGE = 0.7  # ops accounting for less of the region's time than this: the rest is outside them
REDUCED = ("bf16", "fp16")
# Ops that autocast runs in reduced precision on CPU and CUDA (PyTorch's autocast op lists).
GEMM_LIKE = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
             "aten::convolution", "aten::convolution_backward", "aten::_convolution", "aten::mkldnn_rnn_layer",
             "aten::mkldnn_rnn_layer_backward", "aten::_cudnn_rnn", "aten::_scaled_dot_product",
             "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_efficient_attention", "aten::linear")


@dataclass(frozen=True)
class OpRow:
    """One op (kernel sample) of a region with its time from the profiling pass."""

    name: str
    launches: int
    time_s: float | None
    t_min_s: float
    bound: str
    flops: dict[str, float]
    bytes: dict[str, float]

    @property
    def fraction(self) -> float | None:
        return None if not self.time_s else self.t_min_s / self.time_s

    @property
    def lost_s(self) -> float | None:
        return None if self.time_s is None else self.time_s - self.t_min_s

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))


def _op_name(name: str) -> str:
    """``aten.convolution.default[1x8,...]#2`` (a kernel sample's name) -> ``aten::convolution``."""
    return profiler_op_name(name.split("[", 1)[0].split("#", 1)[0])


def _timed(rows: Sequence[OpRow]) -> list[OpRow]:
    return [r for r in rows if r.time_s]


def _names(rows: Sequence[OpRow], limit: int = 3) -> str:
    ranked = sorted(rows, key=lambda r: -(r.time_s or 0.0))
    shown = ", ".join(r.name for r in ranked[:limit])
    return shown + (f" and {len(ranked) - limit} more" if len(ranked) > limit else "")


def no_flop_share(rows: Sequence[OpRow]) -> list[str]:
    timed = _timed(rows)
    total = sum(r.time_s or 0.0 for r in timed)
    none = [r for r in timed if r.total_flops <= 0]
    share = sum(r.time_s or 0.0 for r in none) / total if total else 0.0
    if share < NO_FLOP_MIN_SHARE:
        return []
    return [f"{share:.0%} of the op time is in {len(none)} ops with no FLOPs (data movement: {_names(none)})"]


def too_small(rows: Sequence[OpRow], dispatch_s: float) -> list[str]:
    """Ops whose time at their roof is, per call, below what any op costs to dispatch: dispatch alone keeps
    them under half of their roof, whatever their kernel does."""
    if dispatch_s <= 0:
        return []
    timed = _timed(rows)
    total = sum(r.time_s or 0.0 for r in timed)
    small = [r for r in timed if r.t_min_s / r.launches < dispatch_s and (r.fraction or 0.0) < 0.5]
    if not small or not total:
        return []
    share = sum(r.time_s or 0.0 for r in small) / total
    if share < SMALL_MIN_SHARE:
        return []
    return [(f"{len(small)} ops would need less than the {dispatch_s * 1e6:.3g} us an op costs to dispatch per call "
             f"even at their roof ({share:.0%} of the op time: {_names(small)}): too small to reach it; batch or "
             "fuse them")]


def fp32_fallback(rows: Sequence[OpRow]) -> list[str]:
    reduced = sorted({p for r in rows for p, f in r.flops.items() if p in REDUCED and f > 0})
    if not reduced:
        return []
    timed = _timed(rows)
    total = sum(r.time_s or 0.0 for r in timed) or None
    fallen = [r for r in rows if _op_name(r.name) in GEMM_LIKE and r.flops.get("fp32", 0) > 0]
    lines = []
    for row in sorted(fallen, key=lambda r: -(r.time_s or 0.0))[:3]:
        share = f", {row.time_s / total:.0%} of the op time" if row.time_s and total else ""
        lines.append(f"{row.name} computed in fp32 in a region that computes in {'/'.join(reduced)}{share}: "
                     "autocast did not cover it (or its inputs were cast back), so it runs on the fp32 roof")
    return lines


def would_fit_faster_level(rows: Sequence[OpRow], machine: Machine, dispatch_s: float = 0.0) -> list[str]:
    capacities = {level: float(c) for level, c in dict(machine.info.get("capacities") or {}).items()
                  if level in machine.bandwidth}
    lines = []
    lost = sum(r.lost_s or 0.0 for r in _timed(rows))
    candidates = sorted((r for r in rows if r.bound.startswith("memory:") and r.time_s and (r.fraction or 0) < 0.5
                         and (r.lost_s or 0.0) >= MIN_LOST_SHARE * lost and r.t_min_s / r.launches >= dispatch_s),
                        key=lambda r: -(r.lost_s or 0.0))
    for row in candidates:
        level = row.bound.split(":", 1)[1]
        try:
            current = machine.bandwidth_for(level)
        except ValueError:
            continue
        per_call = row.bytes.get(level, 0.0) / row.launches
        faster = [(cap, lv) for lv, cap in capacities.items()
                  if per_call <= FIT_FRACTION * cap and machine.bandwidth[lv] > current and lv != level]
        if not faster or not per_call:
            continue
        cap, target = min(faster)
        lines.append(f"{row.name}: memory-bound at {level}, but its {si(per_call, 'B')} per call would fit {target} "
                     f"({si(cap, 'B')}): fused with its neighbours or tiled it could stream at "
                     f"{si(machine.bandwidth[target], 'B/s')} ({machine.bandwidth[target] / current:.1f}x {level})")
        if len(lines) == 3:
            break
    return lines


def outside_ops(coverage: float, overhead: float) -> list[str]:
    """Time the ops do not account for: Python between them, views, the dispatcher. Said only when the
    profiler did not slow the calls much (else the op times themselves are inflated)."""
    if coverage >= LOW_COVERAGE or overhead > 0.5:
        return []
    return [(f"the ops account for {coverage:.0%} of the region's time: the rest is outside them (Python between "
            "ops, views, dispatch); fewer, larger ops (or torch.compile) would cut it")]


IDLE_SHARE = 0.5  # a step whose GPU is idle half its time or more is launch-bound


def gpu_idle(idle_share: float, launches: float, launch_s: float, dispatch_s: float) -> list[str]:
    """On CUDA: the GPU ran nothing for most of the step, between its kernels (launch latency, Python and
    dispatch): the kernels' own roofs are not what limits it."""
    if idle_share < IDLE_SHARE:
        return []
    return [(f"the GPU is idle {idle_share:.0%} of the step between its {launches:g} kernels per call (launch "
             f"{launch_s * 1e6:.3g} us of host time each, {dispatch_s * 1e6:.3g} us to dispatch an op): the step is "
             "launch-bound; fewer, larger kernels (fusion, torch.compile, CUDA graphs) or more work per call cut it")]


def diagnose(rows: Sequence[OpRow], machine: Machine, dispatch_s: float, coverage: float = 1.0,
             overhead: float = 0.0) -> list[str]:
    return [*outside_ops(coverage, overhead), *no_flop_share(rows), *too_small(rows, dispatch_s),
            *fp32_fallback(rows), *would_fit_faster_level(rows, machine, dispatch_s)]
