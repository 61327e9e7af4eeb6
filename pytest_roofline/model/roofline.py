"""The roofline model: machine ceilings, kernel samples and verdicts.

Plain Python with no dependency on pytest, torch or numpy, so that the CLI, the report writers and the
tests all share one definition of the numbers.

Definitions (Yang et al., hierarchical roofline):
- arithmetic intensity at level L: AI_L = total FLOPs / bytes moved at L;
- lower-bound time: t_min = max(sum_p F_p / peak_p, max_L B_L / BW_L);
- attained fraction = t_min / t (for one precision: achieved FLOP/s / min(peak, AI_L * BW_L));
- bound = the term that gives t_min, spelled ``compute:<precision>`` or ``memory:<level>``;
- a region of many kernels has fraction sum(t_min) / sum(t); headroom = 1 / fraction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pytest_roofline.errors import MissingCeilingError

# Main memory is "DRAM" on CPUs and "HBM" on most data-centre GPUs; either name finds the other's roof.
DEVICES = ("cpu", "cuda")  # where a call site's work runs; each has its own roofs
MAIN_MEMORY = {"cpu": "DRAM", "cuda": "HBM"}  # each device's main memory level, by its record's name
# A GPU's Tensor Core precisions are "fp16_tensor", "bf16_tensor", "tf32_tensor", ...: the ncu counter, the
# analytic counter's CUDA rules and the characterization's GEMM roofs name them alike, so a Tensor Core roof
# never hides the CUDA-core roof of the same type
TENSOR_SUFFIX = "_tensor"
_LEVEL_ALIASES: dict[str, tuple[str, ...]] = {"DRAM": ("HBM",), "HBM": ("DRAM",)}
# TF32 and FP8 exist only on Tensor Cores: either name finds the other's roof. A Tensor Core precision of a
# record without Tensor Core roofs (a GPU without them, an older record) is judged on its plain roof.
_PRECISION_ALIASES: dict[str, tuple[str, ...]] = {
    "tf32": ("tf32_tensor",), "tf32_tensor": ("tf32",), "fp8": ("fp8_tensor",), "fp8_tensor": ("fp8",),
    "fp16_tensor": ("fp16",), "bf16_tensor": ("bf16",), "fp64_tensor": ("fp64",),
}

BOUND_NONE = "none"


def _positive_finite(value: float, what: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} must be a positive finite number, got {value!r}")
    return number


def _non_negative_map(values: Mapping[str, float], what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in values.items():
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"{what}[{key!r}] must be a non-negative finite number, got {value!r}")
        out[str(key)] = number
    return out


class MachineDict(TypedDict):
    """A machine as JSON holds it (a cache file, results.json's ``machine`` and ``judged_roofs``)."""

    name: str
    peak_flops: dict[str, float]
    bandwidth: dict[str, float]
    info: dict[str, Any]


class KernelDict(TypedDict):
    name: str
    launches: int
    time_s: float | None
    flops: dict[str, float]
    bytes: dict[str, float]


class VerdictDict(TypedDict):
    time_s: float
    t_min_s: float
    fraction: float
    headroom: float | None  # None: no counted work (no roof binds)
    bound: str
    bound_shares: dict[str, float]
    flops: float
    flops_by_precision: dict[str, float]
    bytes: dict[str, float]
    ai: dict[str, float]


@dataclass(frozen=True)
class Machine:
    """A machine as a set of ceilings: peak FLOP/s per precision and bytes/s per memory level."""

    name: str
    peak_flops: Mapping[str, float]
    bandwidth: Mapping[str, float]
    # where each roof came from (sources, fingerprint, capacities ...): free-form JSON, left untyped because
    # characterize/, measure/ and commands/ read it by key
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in self.peak_flops.items():
            _positive_finite(value, f"peak_flops[{key!r}]")
        for key, value in self.bandwidth.items():
            _positive_finite(value, f"bandwidth[{key!r}]")
        if not self.peak_flops and not self.bandwidth:
            raise ValueError("a machine needs at least one ceiling (peak_flops or bandwidth)")

    def peak_for(self, precision: str) -> float:
        for name in (precision, *_PRECISION_ALIASES.get(precision, ())):
            if name in self.peak_flops:
                return float(self.peak_flops[name])
        raise MissingCeilingError(
            f"machine {self.name!r} has no compute ceiling for precision {precision!r} "
            f"(it has: {', '.join(sorted(self.peak_flops)) or 'none'})"
        )

    def bandwidth_for(self, level: str) -> float:
        for name in (level, *_LEVEL_ALIASES.get(level, ())):
            if name in self.bandwidth:
                return float(self.bandwidth[name])
        raise MissingCeilingError(
            f"machine {self.name!r} has no bandwidth ceiling for memory level {level!r} "
            f"(it has: {', '.join(sorted(self.bandwidth)) or 'none'})"
        )

    def to_dict(self) -> MachineDict:
        return {
            "name": self.name,
            "peak_flops": dict(self.peak_flops),
            "bandwidth": dict(self.bandwidth),
            "info": dict(self.info),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Machine:  # JSON as read: dict() takes each block as it is
        return cls(
            name=str(data.get("name", "machine")),
            peak_flops={str(k): float(v) for k, v in dict(data.get("peak_flops", {})).items()},
            bandwidth={str(k): float(v) for k, v in dict(data.get("bandwidth", {})).items()},
            info=dict(data.get("info", {})),
        )


@dataclass(frozen=True)
class KernelSample:
    """What one kernel (or one op, or one declared region) did: FLOPs per precision, bytes per level."""

    name: str
    flops: Mapping[str, float]
    bytes: Mapping[str, float]
    time_s: float | None = None  # None when the backend cannot time kernels one by one (analytic counter)
    launches: int = 1

    def __post_init__(self) -> None:
        _non_negative_map(self.flops, "flops")
        _non_negative_map(self.bytes, "bytes")
        if self.time_s is not None:
            _positive_finite(self.time_s, "time_s")
        if self.launches < 1:
            raise ValueError(f"launches must be >= 1, got {self.launches}")

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    def to_dict(self) -> KernelDict:
        return {
            "name": self.name,
            "launches": self.launches,
            "time_s": self.time_s,
            "flops": dict(self.flops),
            "bytes": dict(self.bytes),
        }


@dataclass(frozen=True)
class LowerBound:
    """The lower-bound time of some work on a machine and which ceiling sets it."""

    t_min: float
    bound: str
    terms: Mapping[str, float]  # every ceiling's time, keyed like ``bound``


def lower_bound(flops: Mapping[str, float], bytes_moved: Mapping[str, float], machine: Machine) -> LowerBound:
    """t_min = max(sum_p F_p / peak_p, max_L B_L / BW_L), with the term that gives it."""
    terms: dict[str, float] = {}
    compute_time = 0.0
    for precision, count in flops.items():
        if count > 0:
            seconds = count / machine.peak_for(precision)
            terms[f"compute:{precision}"] = seconds
            compute_time += seconds
    for level, count in bytes_moved.items():
        if count > 0:
            terms[f"memory:{level}"] = count / machine.bandwidth_for(level)
    if not terms:
        return LowerBound(0.0, BOUND_NONE, terms)
    memory_terms = {k: v for k, v in terms.items() if k.startswith("memory:")}
    slowest_memory = max(memory_terms.items(), key=lambda kv: kv[1], default=(BOUND_NONE, 0.0))
    if compute_time >= slowest_memory[1] and compute_time > 0:
        # Mixed precisions add up; the bound names the precision that costs the most time.
        compute_terms = {k: v for k, v in terms.items() if k.startswith("compute:")}
        bound = max(compute_terms.items(), key=lambda kv: kv[1])[0]
        return LowerBound(compute_time, bound, terms)
    return LowerBound(slowest_memory[1], slowest_memory[0], terms)


def arithmetic_intensity(total_flops: float, bytes_moved: Mapping[str, float]) -> dict[str, float]:
    """FLOPs per byte at every level that moved bytes (levels with zero bytes have no defined AI)."""
    return {level: total_flops / count for level, count in bytes_moved.items() if count > 0}


def sum_maps(maps: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Key-wise sums of several maps (FLOPs per precision, bytes per level)."""
    total: dict[str, float] = {}
    for values in maps:
        for key, value in values.items():
            total[key] = total.get(key, 0.0) + float(value)
    return total


@dataclass(frozen=True)
class Verdict:
    """How close measured work came to the roofline."""

    time_s: float
    t_min: float
    fraction: float
    bound: str
    flops: Mapping[str, float]
    bytes: Mapping[str, float]
    bound_shares: Mapping[str, float]  # share of t_min per bound, for regions

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    @property
    def ai(self) -> dict[str, float]:
        return arithmetic_intensity(self.total_flops, self.bytes)

    @property
    def headroom(self) -> float:
        return math.inf if self.fraction <= 0 else 1.0 / self.fraction

    @property
    def achieved_flops_per_s(self) -> float:
        return self.total_flops / self.time_s

    @property
    def roof_flops_per_s(self) -> float:
        """The FLOP rate the work would reach if it ran at its lower-bound time."""
        return self.total_flops / self.t_min if self.t_min > 0 else 0.0

    def achieved_bytes_per_s(self, level: str) -> float:
        return self.bytes.get(level, 0.0) / self.time_s

    def roof_bytes_per_s(self, level: str) -> float:
        return self.bytes.get(level, 0.0) / self.t_min if self.t_min > 0 else 0.0

    @property
    def bound_level(self) -> str | None:
        """The memory level to quote bandwidth for: the bound's level, else the level moving most bytes."""
        if self.bound.startswith("memory:"):
            return self.bound.split(":", 1)[1]
        moved = {k: v for k, v in self.bytes.items() if v > 0}
        return max(moved, key=lambda k: moved[k]) if moved else None

    def to_dict(self) -> VerdictDict:
        return {
            "time_s": self.time_s,
            "t_min_s": self.t_min,
            "fraction": self.fraction,
            "headroom": None if math.isinf(self.headroom) else self.headroom,
            "bound": self.bound,
            "bound_shares": dict(self.bound_shares),
            "flops": self.total_flops,
            "flops_by_precision": dict(self.flops),
            "bytes": dict(self.bytes),
            "ai": self.ai,
        }


def evaluate(sample: KernelSample, machine: Machine, time_s: float | None = None) -> Verdict:
    """Verdict for one kernel; ``time_s`` overrides the sample's own time."""
    seconds = _positive_finite(time_s if time_s is not None else _require_time(sample), "time_s")
    bound = lower_bound(sample.flops, sample.bytes, machine)
    shares = {bound.bound: 1.0} if bound.t_min > 0 else {}
    return Verdict(seconds, bound.t_min, bound.t_min / seconds, bound.bound, dict(sample.flops),
                   dict(sample.bytes), shares)


def evaluate_region(kernels: Iterable[KernelSample], machine: Machine, time_s: float) -> Verdict:
    """Verdict for a region: its kernels' lower bounds add up (they run one after another).

    ``time_s`` is the region's measured time; with per-kernel times (ncu) pass their sum.
    """
    seconds = _positive_finite(time_s, "time_s")
    kernels = list(kernels)
    per_bound: dict[str, float] = {}
    for kernel in kernels:
        bound = lower_bound(kernel.flops, kernel.bytes, machine)
        if bound.t_min > 0:
            per_bound[bound.bound] = per_bound.get(bound.bound, 0.0) + bound.t_min
    t_min = sum(per_bound.values())
    dominant = max(per_bound.items(), key=lambda kv: kv[1])[0] if per_bound else BOUND_NONE
    shares = {k: v / t_min for k, v in per_bound.items()} if t_min > 0 else {}
    return Verdict(seconds, t_min, t_min / seconds, dominant, sum_maps(k.flops for k in kernels),
                   sum_maps(k.bytes for k in kernels), shares)


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Several measured regions of one test: fraction = sum(t_min) / sum(t)."""
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("combine() needs at least one verdict")
    time_s = sum(v.time_s for v in verdicts)
    t_min = sum(v.t_min for v in verdicts)
    per_bound: dict[str, float] = {}
    for verdict in verdicts:
        for bound, share in verdict.bound_shares.items():
            per_bound[bound] = per_bound.get(bound, 0.0) + share * verdict.t_min
    dominant = max(per_bound.items(), key=lambda kv: kv[1])[0] if per_bound else BOUND_NONE
    shares = {k: v / t_min for k, v in per_bound.items()} if t_min > 0 else {}
    return Verdict(time_s, t_min, t_min / time_s, dominant, sum_maps(v.flops for v in verdicts),
                   sum_maps(v.bytes for v in verdicts), shares)


def _require_time(sample: KernelSample) -> float:
    if sample.time_s is None:
        raise ValueError(f"kernel {sample.name!r} has no time; pass time_s")
    return sample.time_s
