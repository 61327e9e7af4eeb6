"""From an ncu report (CSV or ``.ncu-rep``) to per-kernel roofline samples.

Launches of the same kernel name are summed into one kernel (FLOPs, bytes, time, launch count), as the NERSC
scripts do; the time of a kernel is the sum of its launches' durations.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.counters.ncu.metrics import (
    HALF_LANES_PER_INST,
    PASSES_METRIC,
    LaunchWork,
    format_cc,
    launch_work,
    parse_cc,
)
from pytest_roofline.counters.ncu.parse import LaunchRecord, ParsedLaunches, parse_csv_text
from pytest_roofline.counters.ncu.rep import read_ncu_rep
from pytest_roofline.errors import NoKernelsError
from pytest_roofline.model import KernelSample, arithmetic_intensity

# Below this share of the device's maximum clock, the SM clock during profiling looks locked (ncu's default
# --clock-control base); a boosting GPU runs near its maximum.
LOCKED_CLOCK_RATIO = 0.9


@dataclass
class NcuKernel:
    """All launches of one kernel name, summed."""

    name: str
    launches: int
    time_s: float | None
    flops: dict[str, float]
    bytes: dict[str, float]
    tensor_flops: float | None
    tensor_instructions: float | None
    sm_clock_hz: float | None
    cc: str | None
    device: str | None
    replay_passes: int | None
    definitions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    @property
    def ai(self) -> dict[str, float]:
        """FLOPs per byte per level; empty when no FLOP counter was collected (AI unknown, not zero)."""
        return arithmetic_intensity(self.total_flops, self.bytes) if self.flops else {}

    def to_sample(self) -> KernelSample:
        time_s = self.time_s if self.time_s is not None and self.time_s > 0 else None
        return KernelSample(self.name, dict(self.flops), dict(self.bytes), time_s, self.launches)

    def to_dict(self) -> dict[str, object]:
        return {
            **self.to_sample().to_dict(),
            "time_s": self.time_s,  # as ncu reported it (to_sample drops a zero)
            "ai": self.ai,
            "tensor_flops": self.tensor_flops,
            "tensor_instructions": self.tensor_instructions,
            "sm_clock_hz": self.sm_clock_hz,
            "compute_capability": self.cc,
            "device": self.device,
            "replay_passes": self.replay_passes,
            "definitions": dict(self.definitions),
            "warnings": list(self.warnings),
        }


@dataclass
class NcuReport:
    source: str
    format: str
    kernels: list[NcuKernel]
    launch_count: int
    messages: list[str]
    warnings: list[str]
    definitions: dict[str, str]
    devices: list[str]
    compute_capabilities: list[str]
    sm_clock_hz: float | None
    device_max_clock_hz: float | None
    clock_control: str | None = None  # the policy ncu ran with, when the caller knows it (the ncu backend)
    skipped_lines: int = 0
    problems: list[str] = field(default_factory=list)  # malformed rows and cells (ParsedLaunches.problems)

    def samples(self) -> list[KernelSample]:
        return [kernel.to_sample() for kernel in self.kernels]

    @property
    def total_time_s(self) -> float | None:
        times = [k.time_s for k in self.kernels]
        return None if not times or any(t is None for t in times) else float(sum(t for t in times if t))

    @property
    def clock_note(self) -> str | None:
        if self.sm_clock_hz is None or self.device_max_clock_hz is None:
            return None
        ratio = self.sm_clock_hz / self.device_max_clock_hz
        if ratio >= LOCKED_CLOCK_RATIO:
            return None
        return (f"SM clock while profiling averaged {self.sm_clock_hz / 1e9:.3f} GHz, {ratio:.0%} of the device's "
                f"{self.device_max_clock_hz / 1e9:.3f} GHz maximum: clocks were probably locked "
                "(ncu's default --clock-control base), so times are longer than at normal clocks")

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "format": self.format,
            "devices": list(self.devices),
            "compute_capabilities": list(self.compute_capabilities),
            "launches": self.launch_count,
            "definitions": dict(self.definitions),
            "clock": {
                "policy": self.clock_control,
                "sm_clock_hz_mean": self.sm_clock_hz,
                "device_max_clock_hz": self.device_max_clock_hz,
                "note": self.clock_note,
            },
            "warnings": list(self.warnings),
            "kernels": [kernel.to_dict() for kernel in self.kernels],
        }


def _sum_into(total: dict[str, float], values: Mapping[str, float]) -> None:
    for key, value in values.items():
        total[key] = total.get(key, 0.0) + value


def _merge_definitions(target: dict[str, str], source: Mapping[str, str]) -> None:
    for key, value in source.items():
        current = target.get(key)
        if current is None:
            target[key] = value
        elif value not in current.split(" | "):
            target[key] = f"{current} | {value}"


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _aggregate(name: str, records: list[LaunchRecord], works: list[LaunchWork]) -> NcuKernel:
    flops: dict[str, float] = {}
    bytes_moved: dict[str, float] = {}
    definitions: dict[str, str] = {}
    warning_counts: dict[str, int] = {}
    for work in works:
        _sum_into(flops, work.flops)
        _sum_into(bytes_moved, work.bytes)
        _merge_definitions(definitions, work.definitions)
        for warning in work.warnings:
            warning_counts[warning] = warning_counts.get(warning, 0) + 1
    times = [w.time_s for w in works]
    time_s = float(sum(t for t in times if t is not None)) if all(t is not None for t in times) else None
    warnings = [w if n == 1 else f"{w} ({n} launches)" for w, n in warning_counts.items()]
    if time_s is None and any(t is not None for t in times):
        warnings.append("some launches have no duration, so the kernel has no time")
    tensor = [w.tensor_flops for w in works]
    instructions = [w.tensor_instructions for w in works]
    passes = [r.metrics.get(PASSES_METRIC) for r in records]
    ccs = sorted({c for r in records if (c := format_cc(r.cc))})
    devices = sorted({r.device for r in records if r.device})
    return NcuKernel(
        name=name,
        launches=len(records),
        time_s=time_s,
        flops=flops,
        bytes=bytes_moved,
        tensor_flops=float(sum(t for t in tensor if t is not None)) if all(t is not None for t in tensor) else None,
        tensor_instructions=(float(sum(i for i in instructions if i is not None))
                             if all(i is not None for i in instructions) else None),
        sm_clock_hz=_mean(w.sm_clock_hz for w in works),
        cc=", ".join(ccs) or None,
        device=", ".join(devices) or None,
        replay_passes=int(max(p for p in passes if p is not None)) if any(p is not None for p in passes) else None,
        definitions=definitions,
        warnings=warnings,
    )


def build_report(
    parsed: ParsedLaunches,
    source: str = "<text>",
    cc: str | float | tuple[int, int] | None = None,
    half_lanes: int = HALF_LANES_PER_INST,
    clock_control: str | None = None,
) -> NcuReport:
    """Per-kernel results from parsed launches. ``cc`` fills in where the report does not say."""
    override = parse_cc(cc)
    warnings: list[str] = []
    groups: dict[str, tuple[list[LaunchRecord], list[LaunchWork]]] = {}
    for record in parsed.launches:
        if record.cc is None and override is not None:
            record.cc = override
        elif override is not None and record.cc != override:
            message = (f"the report says compute capability {format_cc(record.cc)}, not {format_cc(override)} as "
                       "given; the report's value is used")
            if message not in warnings:
                warnings.append(message)
        records, works = groups.setdefault(record.kernel, ([], []))
        records.append(record)
        works.append(launch_work(record.metrics, record.cc, record.labels, half_lanes))
    kernels = [_aggregate(name, records, works) for name, (records, works) in groups.items()]
    definitions: dict[str, str] = {}
    for kernel in kernels:
        _merge_definitions(definitions, kernel.definitions)
    if half_lanes != HALF_LANES_PER_INST:
        definitions["fp16_lanes"] = str(half_lanes)
    max_clocks = [r.metrics.get("device__attribute_clock_rate") for r in parsed.launches]
    device_max_khz = _mean(max_clocks)  # the CUDA device attribute is in kHz
    return NcuReport(
        source=source,
        format=parsed.format,
        kernels=kernels,
        launch_count=len(parsed.launches),
        messages=list(parsed.messages),
        warnings=warnings,
        definitions=definitions,
        devices=sorted({r.device for r in parsed.launches if r.device}),
        compute_capabilities=sorted({c for r in parsed.launches if (c := format_cc(r.cc))}),
        sm_clock_hz=_mean(k.sm_clock_hz for k in kernels for _ in range(k.launches)),
        device_max_clock_hz=None if device_max_khz is None else device_max_khz * 1e3,
        clock_control=clock_control,
        skipped_lines=parsed.skipped_lines,
        problems=list(parsed.problems),
    )


def parse_report_text(text: str, source: str = "<text>", *, cc: str | float | tuple[int, int] | None = None,
                      half_lanes: int = HALF_LANES_PER_INST, clock_control: str | None = None) -> NcuReport:
    """A report from ncu CSV text (details or raw page)."""
    return build_report(parse_csv_text(text), source, cc=cc, half_lanes=half_lanes, clock_control=clock_control)


def load_report(
    path: str | os.PathLike[str],
    *,
    cc: str | float | tuple[int, int] | None = None,
    half_lanes: int = HALF_LANES_PER_INST,
    clock_control: str | None = None,
    ncu: str | None = None,
    require_kernels: bool = False,
) -> NcuReport:
    """Read a ``.ncu-rep`` or an ncu CSV file (anything else is read as CSV text)."""
    file = Path(path)
    if file.suffix == ".ncu-rep":
        parsed = read_ncu_rep(file, ncu=ncu)
    else:
        parsed = parse_csv_text(file.read_text(encoding="utf-8", errors="replace"))
    report = build_report(parsed, str(file), cc=cc, half_lanes=half_lanes, clock_control=clock_control)
    if require_kernels and not report.kernels:
        told = "; ".join(report.messages[-5:]) or "ncu printed nothing"
        raise NoKernelsError(f"{file}: no kernel launch was profiled ({told})")
    return report


def samples_from_report(
    path: str | os.PathLike[str],
    *,
    cc: str | float | tuple[int, int] | None = None,
    half_lanes: int = HALF_LANES_PER_INST,
    clock_control: str | None = None,
    ncu: str | None = None,
    require_kernels: bool = False,
) -> list[KernelSample]:
    """Per-kernel :class:`KernelSample` s (SI units, launches of one name summed) from an ncu report."""
    return load_report(path, cc=cc, half_lanes=half_lanes, clock_control=clock_control, ncu=ncu,
                       require_kernels=require_kernels).samples()
