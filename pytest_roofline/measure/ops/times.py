"""Per-op times of a region (``--roofline-ops``): profile the call, join, judge every op on its own.

The verdict stays the bare timed loop's; this adds, per op (kernel sample), a time, its own fraction
(``t_min / time``), its bound and its lost time (``time - t_min``), and per region the coverage (sum of the
op times / the bare region time), the profiler's overhead and the CPU diagnostics
(:mod:`pytest_roofline.measure.ops.findings`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_roofline.measure.ops import profile as op_profile
from pytest_roofline.measure.ops.findings import OpRow, diagnose, gpu_idle
from pytest_roofline.measure.ops.join import KernelTimes, kernel_times
from pytest_roofline.model import KernelSample, Machine, lower_bound
from pytest_roofline.model.op_trace import TracedOp
from pytest_roofline.record.region_record import OpFields

if TYPE_CHECKING:
    from pytest_roofline.measure.ops.kineto import KinetoCall

TOP_LOST = 3


@dataclass(frozen=True)
class GpuShare:
    """Per profiled call on CUDA (medians): the kernels' summed time, the call's wall time, the share of it
    with no kernel running (1 - union of kernel intervals / wall), kernels launched, host time per launch."""

    kernel_s: float
    wall_s: float
    idle_share: float
    launches: float
    launch_s: float

    @classmethod
    def of(cls, calls: Sequence[KinetoCall]) -> GpuShare | None:
        if not calls:
            return None
        return cls(statistics.median(c.kernel_s for c in calls), statistics.median(c.wall_s for c in calls),
                   statistics.median(c.idle_share for c in calls), statistics.median(c.launches for c in calls),
                   statistics.median(c.launch_s / c.launches if c.launches else 0.0 for c in calls))

    def to_dict(self, reference_s: float) -> dict[str, object]:
        return {"kernel_s": self.kernel_s, "call_wall_s": self.wall_s, "idle_share": self.idle_share,
                "kernels_per_call": self.launches, "launch_s_per_kernel": self.launch_s,
                "kernel_coverage": self.kernel_s / reference_s if reference_s > 0 else None}


@dataclass(frozen=True)
class OpReport:
    """The per-op timing pass of one region."""

    rows: list[OpRow]
    coverage: float  # sum of the op times / the bare call time (median of the bare calls beside the profiled)
    overhead: float  # profiled call's wall time / bare call time - 1 (medians over the pairs)
    calls: int  # profiled calls
    device: str
    matched: int
    total: int
    unmatched: dict[str, int] = field(default_factory=dict)
    partial: dict[str, tuple[int, int]] = field(default_factory=dict)
    other_s: float = 0.0
    dispatch_s: float = 0.0
    diagnostics: list[str] = field(default_factory=list)
    bare_s: float = 0.0  # median of the bare calls beside the profiled ones
    region_s: float = 0.0  # the timed loop's median (the verdict's time)
    gpu: GpuShare | None = None  # CUDA: kernels' time, GPU idle share, launch cost (medians over the calls)

    def gpu_rows(self) -> list[str]:
        """The GPU's own rows of a failure message (CUDA only): idle share first, then launch/dispatch."""
        gpu = self.gpu
        if gpu is None:
            return []
        reference = self.bare_s or self.region_s
        coverage = f" = {gpu.kernel_s / reference:.2f} of the region time" if reference > 0 else ""
        joined = sum(r.time_s or 0.0 for r in self.rows)
        ops = f"; the timed ops hold {joined / gpu.kernel_s:.2f} of the kernels' time" if gpu.kernel_s > 0 else ""
        return [(f"GPU idle {gpu.idle_share:.0%} of the step: kernels ran {gpu.kernel_s * 1e6:.3g} us of "
                f"{gpu.wall_s * 1e6:.3g} us per call{coverage}{ops}"),
                (f"launch/dispatch: {gpu.launches:g} kernels per call, {gpu.launch_s * 1e6:.3g} us host time per "
                f"launch; {self.dispatch_s * 1e6:.3g} us to dispatch an op")]

    def top_lost(self, count: int = TOP_LOST) -> list[OpRow]:
        timed = [r for r in self.rows if r.time_s]
        return sorted(timed, key=lambda r: -(r.lost_s or 0.0))[:count]

    def row(self, name: str) -> OpRow | None:
        return next((r for r in self.rows if r.name == name), None)

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "profiled_calls": self.calls,
            "coverage": self.coverage,
            "profiler_overhead": self.overhead,
            "bare_call_s": self.bare_s,
            "coverage_of_timed_median": (sum(r.time_s or 0.0 for r in self.rows) / self.region_s
                                         if self.region_s > 0 else None),
            "ops_timed": sum(1 for r in self.rows if r.time_s),
            "ops": len(self.rows),
            "counted_calls_matched": self.matched,
            "counted_calls": self.total,
            "unmatched": dict(self.unmatched),
            "extrapolated": {name: {"matched": m, "launches": n} for name, (m, n) in self.partial.items()},
            "other_ops_s": self.other_s,
            "dispatch_cost_s": self.dispatch_s,
            "diagnostics": list(self.diagnostics),
            "gpu": ({**self.gpu.to_dict(self.bare_s or self.region_s),
                     "ops_share_of_kernel_time": (sum(r.time_s or 0.0 for r in self.rows) / self.gpu.kernel_s
                                                  if self.gpu.kernel_s > 0 else None)}
                    if self.gpu is not None else None),
        }


def op_fields(row: OpRow) -> OpFields:
    """What results.json adds to each kernel entry."""
    return {"t_min_s": row.t_min_s, "bound": row.bound, "fraction": row.fraction, "lost_s": row.lost_s}


def build_report(kernels: Sequence[KernelSample], joined: KernelTimes, machine: Machine, region_s: float,
                 walls: Sequence[float], device: str, dispatch_s: float,
                 bare: Sequence[float] = (), gpu_calls: Sequence[KinetoCall] = (),
                 ) -> tuple[list[KernelSample], OpReport]:
    """Kernels with their times set, and the region's report. Coverage and overhead are taken against the
    bare calls made beside the profiled ones (``bare``), else against the timed loop's median."""
    timed: list[KernelSample] = []
    rows: list[OpRow] = []
    for kernel in kernels:
        seconds = joined.per_kernel.get(kernel.name)
        seconds = seconds if seconds and seconds > 0 else None
        timed.append(replace(kernel, time_s=seconds))
        bound = lower_bound(kernel.flops, kernel.bytes, machine)
        rows.append(OpRow(kernel.name, kernel.launches, seconds, bound.t_min, bound.bound, dict(kernel.flops),
                          dict(kernel.bytes)))
    total = sum(r.time_s or 0.0 for r in rows)
    reference = statistics.median(bare) if bare else region_s
    overhead = statistics.median(walls) / reference - 1.0 if walls and reference > 0 else 0.0
    coverage = total / reference if reference > 0 else 0.0
    gpu = GpuShare.of(gpu_calls)
    findings = diagnose(rows, machine, dispatch_s, coverage, overhead)
    if gpu is not None:  # on a GPU, launch-bound steps are the first thing to say
        findings = [*gpu_idle(gpu.idle_share, gpu.launches, gpu.launch_s, dispatch_s), *findings]
    report = OpReport(rows, coverage, overhead, len(walls), device, joined.matched, joined.total,
                      dict(joined.unmatched), dict(joined.partial), joined.other_s, dispatch_s,
                      findings, reference, region_s, gpu)
    return timed, report


_DISPATCH: dict[str, float] = {}


def time_ops(kernels: Sequence[KernelSample], trace: Sequence[TracedOp], machine: Machine, region_s: float,
             fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object], *,
             prepare: Callable[[], tuple[tuple[object, ...], dict[str, object]]], synchronize: Callable[[], None],
             budget_s: float, device: str = "cpu", before_call: Callable[[float], object] | None = None,
             ) -> tuple[list[KernelSample], OpReport]:
    """Profile ``fn`` a few times and join its ops to ``trace``; torch is imported here. ``before_call``: the
    DRAM probe schedule when the bare loop had one (see ``op_profile.profile_calls``)."""
    if device not in _DISPATCH:  # once per process and device: a property of the host, not of the test
        _DISPATCH[device] = op_profile.dispatch_cost_s(device)
    profiled = op_profile.profile_calls(fn, args, kwargs, calls=op_profile.calls_for(region_s, budget_s),
                                        prepare=prepare, synchronize=synchronize, device=device,
                                        before_call=before_call)
    joined = kernel_times(trace, profiled.calls)
    return build_report(kernels, joined, machine, region_s, profiled.wall_s, device, _DISPATCH[device],
                        profiled.bare_s, profiled.gpu)
