"""Consistency checks for a machine's roofs, whatever their source (fresh measurement, cache, pinned file).

A roof that is too low makes every gate pass; one that is too high fails everything. Before a record is
cached or used it is held to checks that need no second measurement:

- absolute plausibility: every roof between ``FLOPS_RANGE`` / ``BANDWIDTH_RANGE`` (1e-3 FLOP/s, 1e300 B/s);
- each precision's peak at least the best GEMM of that precision in the same record (``info.gemm_flops``):
  a GEMM cannot beat the FMA units it runs on; a small excess is taken over from the GEMM (source recorded,
  :func:`reconcile`), a large one means the FMA sweep was disturbed. On a GPU the GEMM runs on Tensor Cores,
  a unit of its own: it is held to the ``<precision>_tensor`` roof, never to the CUDA-core ``fp16``/``fp64``
  roof, which is far below it on every GPU with Tensor Cores (:func:`gemm_roof_name`);
- bandwidth does not increase from L1 to main memory beyond ``BANDWIDTH_NOISE``;
- on a CPU, every value under a physical bound from cores x clock x vector width (:class:`PhysicalBounds`);
- ``info.capacities`` is ``{level: bytes}`` with positive numbers.

:func:`reconcile` also gives each reduced precision at least the roof of a precision that computes it
exactly on other units (bf16/fp16 on the fp32 FMA units) and records it as emulated when the measured rate
is far below that.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sized
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.characterize.fingerprint import count_field, isa_flags
from pytest_roofline.errors import RoofError  # noqa: F401 (re-exported under its old name)
from pytest_roofline.model import TENSOR_SUFFIX, Machine
from pytest_roofline.record.machine_key import Fingerprint

FLOPS_RANGE = (1e7, 1e17)        # FLOP/s: a slow core's scalar rate .. far above any accelerator today
BANDWIDTH_RANGE = (1e7, 1e16)    # bytes/s: 10 MB/s .. far above any GPU's aggregate L1
BANDWIDTH_NOISE = 0.25           # a farther level may read this much above a nearer one (plateau noise)
GEMM_EXCESS_TAKEN = 1.5          # GEMM up to this x the FMA peak: the peak is taken from the GEMM
EMULATED_SHARE = 0.5             # measured below this share of the exact-path roof: emulated
MIN_CAPACITY = 1024              # bytes; no cache level is smaller

LEVEL_ORDER = ("L1", "L2", "L3", "L4", "DRAM", "HBM")
# Precisions another precision's units compute exactly (a bf16/fp16 product is exact in fp32).
EXACT_ON = {"bf16": ("fp32",), "fp16": ("fp32",), "tf32": ("fp32",), "fp8": ("fp16", "bf16", "fp32")}
LEVEL_PATTERN = re.compile(r"^(L[1-4]|DRAM|HBM)$")

_SIZE = re.compile(r"^\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]i?)?\s*([bB]|bytes)?\s*$")
_SIZE_PREFIX = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2**10, "mi": 2**20, "gi": 2**30,
                "ti": 2**40}


@dataclass(frozen=True)
class Problem:
    """One inconsistency: the key it is about (``peak_flops.fp32``, ``info.capacities.L2``) and why."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


# --- capacities --------------------------------------------------------------------------------------------

def parse_capacities(raw: object, key: str = "info.capacities") -> tuple[dict[str, float], list[Problem]]:
    """``{level: bytes}`` from numbers or strings like ``"4 MiB"`` / ``"48K"``; problems name the key."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [Problem(key, f"must be a table mapping levels (L1..L4) to bytes, got {raw!r}")]
    out: dict[str, float] = {}
    problems: list[Problem] = []
    for level, value in raw.items():
        where = f"{key}.{level}"
        if not LEVEL_PATTERN.match(str(level)):
            problems.append(Problem(where, "unknown level; accepted: L1, L2, L3, L4, DRAM, HBM"))
            continue
        number = _size(value)
        if number is None:
            problems.append(Problem(where, f"cannot read {value!r}; give bytes as a number (4194304) or a "
                                           "string like '4 MiB'"))
        elif not MIN_CAPACITY <= number < 1e15:
            problems.append(Problem(where, f"{value!r} bytes is not a plausible cache capacity "
                                           f"({MIN_CAPACITY} B .. 1 PB)"))
        else:
            out[str(level)] = number
    return out, problems


def _size(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match:
            number, prefix, _ = match.groups()
            try:
                return float(number) * _SIZE_PREFIX[(prefix or "").lower()]
            except ValueError:
                return None
    return None


# --- physical bounds ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PhysicalBounds:
    """Upper bounds of a CPU: cores x clock x (FLOPs, bytes) per cycle at the widest vector, with margins."""

    cores: int
    clock_hz: float
    vector_bits: int
    matrix_units: bool  # AMX / SME: reduced precisions may run far above the vector roof
    clock_source: str

    @property
    def fp64(self) -> float:
        return self.cores * self.clock_hz * (self.vector_bits / 64) * 2 * 2  # 2 FMA pipes, 2 FLOPs per FMA

    def flops(self, precision: str) -> float:
        base = precision.removesuffix(TENSOR_SUFFIX)
        if base == "fp64":
            return self.fp64
        if base in ("fp32", "tf32"):
            return 2 * self.fp64
        return 2 * self.fp64 * (64 if self.matrix_units else 4)

    @property
    def bandwidth(self) -> float:
        return self.cores * self.clock_hz * 4 * self.vector_bits / 8  # 4 vectors per cycle: loads + stores


CLOCK_MARGIN = 2.0      # turbo above the nominal / reported clock
UNKNOWN_CLOCK_HZ = 6e9  # no clock reported anywhere


def cpu_clock_hz(cpuinfo_text: str | None = None, cpufreq_max_khz: str | None = None) -> tuple[float, str]:
    """Highest clock this CPU reports (cpufreq max, else /proc/cpuinfo 'cpu MHz' / BogoMIPS-free 'GHz' in
    the model name), times ``CLOCK_MARGIN``; ``UNKNOWN_CLOCK_HZ`` when nothing says."""
    if cpufreq_max_khz is None:
        try:
            cpufreq_max_khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        except OSError:
            cpufreq_max_khz = ""
    if cpuinfo_text is None:
        try:
            cpuinfo_text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo_text = ""
    candidates: list[tuple[float, str]] = []
    if cpufreq_max_khz.strip().isdigit():
        candidates.append((int(cpufreq_max_khz.strip()) * 1e3, "cpufreq cpuinfo_max_freq"))
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo_text, re.MULTILINE)]
    if mhz:
        candidates.append((max(mhz) * 1e6, "/proc/cpuinfo cpu MHz"))
    ghz = re.findall(r"@\s*([0-9.]+)\s*GHz", cpuinfo_text)
    if ghz:
        candidates.append((max(float(g) for g in ghz) * 1e9, "model name GHz"))
    if not candidates:
        return UNKNOWN_CLOCK_HZ, f"unknown, assumed {UNKNOWN_CLOCK_HZ / 1e9:.0f} GHz"
    clock, source = max(candidates)
    return clock * CLOCK_MARGIN, f"{source} {clock / 1e9:.2f} GHz x {CLOCK_MARGIN:g}"


def physical_bounds(fields: Fingerprint, clock: tuple[float, str] | None = None) -> PhysicalBounds | None:
    """Bounds for a CPU fingerprint (``cores``/``core_count``, ``isa``, ``machine``); None for GPUs."""
    if fields.get("device") not in (None, "cpu"):
        return None
    listed = fields.get("cores") or ()
    cores = count_field(fields, "core_count") or (len(listed) if isinstance(listed, Sized) else 0)
    if cores <= 0:
        return None
    isa = set(isa_flags(fields))
    machine = str(fields.get("machine") or "")
    if "avx512f" in isa:
        bits = 512
    elif "avx" in isa or "avx2" in isa:
        bits = 256
    elif "sve" in isa and machine in ("aarch64", "arm64"):
        bits = 2048  # the SVE architectural maximum: the length is not in the fingerprint
    else:
        bits = 128
    # AMX/SME, and the AVX512-BF16/FP16 generation that ships with AMX (some hypervisors hide its flags).
    matrix = bool(isa & {"amx_bf16", "amx_fp16", "amx_tile", "sme", "sme2", "avx512_bf16", "avx512_fp16"})
    hz, source = clock or cpu_clock_hz()
    return PhysicalBounds(cores, hz, bits, matrix, source)


# --- the checks ----------------------------------------------------------------------------------------------

def check_machine(machine: Machine, bounds: PhysicalBounds | None = None) -> list[Problem]:
    """Every inconsistency of ``machine`` (empty list: usable)."""
    problems = check_ranges(machine)
    problems += check_gemm(machine)
    problems += check_order(machine)
    if bounds is not None:
        problems += check_physical(machine, bounds)
    problems += parse_capacities(machine.info.get("capacities"))[1]
    return problems


def check_ranges(machine: Machine) -> list[Problem]:
    problems = []
    for key, table, (low, high), unit in (("peak_flops", machine.peak_flops, FLOPS_RANGE, "FLOP/s"),
                                          ("bandwidth", machine.bandwidth, BANDWIDTH_RANGE, "B/s")):
        for name, value in table.items():
            if not low <= value <= high:
                problems.append(Problem(f"{key}.{name}", f"{value:.4g} {unit} is outside the plausible range "
                                                         f"{low:.0e}..{high:.0e} {unit}"))
    return problems


def is_gpu_record(machine: Machine) -> bool:
    """A record of a GPU: its device or method says so, or it holds Tensor Core (``*_tensor``) roofs."""
    info = machine.info
    return (str(info.get("device") or "").startswith(("cuda", "gpu"))
            or str(info.get("method") or "").endswith("cuda")
            or any(name.endswith(TENSOR_SUFFIX) for name in machine.peak_flops))


def gemm_roof_name(machine: Machine, precision: str) -> str:
    """The roof a GEMM of ``precision`` is held to: the precision itself on a CPU (GEMM runs on the FMA
    units the peak was measured on), ``<precision>_tensor`` on a GPU (Tensor Cores, apart from the CUDA cores
    that set ``fp16``/``fp64``)."""
    if precision.endswith(TENSOR_SUFFIX) or not is_gpu_record(machine):
        return precision
    return precision + TENSOR_SUFFIX


def check_gemm(machine: Machine) -> list[Problem]:
    """A peak far below the best GEMM of the same precision on the same units cannot be a ceiling."""
    problems = []
    for precision, gemm in _gemm_flops(machine).items():
        roof = gemm_roof_name(machine, precision)
        peak = machine.peak_flops.get(roof)
        if peak is not None and gemm > GEMM_EXCESS_TAKEN * peak:
            problems.append(Problem(f"peak_flops.{roof}",
                                    f"{peak / 1e9:.4g} GFLOP/s is below the {gemm / 1e9:.4g} GFLOP/s a "
                                    f"{precision} GEMM reached in the same characterization"))
    return problems


def check_order(machine: Machine) -> list[Problem]:
    """Bandwidth must not grow from a cache level to a farther one (beyond noise)."""
    levels = [(level, machine.bandwidth[level]) for level in LEVEL_ORDER if level in machine.bandwidth]
    problems = []
    for (near, near_bw), (far, far_bw) in itertools.pairwise(levels):
        if far_bw > (1 + BANDWIDTH_NOISE) * near_bw:
            problems.append(Problem(f"bandwidth.{near}",
                                    f"{near_bw / 1e9:.4g} GB/s is below {far} ({far_bw / 1e9:.4g} GB/s), "
                                    "which is farther from the cores"))
    return problems


def check_physical(machine: Machine, bounds: PhysicalBounds) -> list[Problem]:
    problems = []
    why = (f"{bounds.cores} cores x {bounds.clock_hz / 1e9:.2f} GHz ({bounds.clock_source}) x "
           f"{bounds.vector_bits}-bit vectors")
    for precision, value in machine.peak_flops.items():
        if value > bounds.flops(precision):
            problems.append(Problem(f"peak_flops.{precision}", f"{value / 1e9:.4g} GFLOP/s exceeds the "
                                    f"physical bound {bounds.flops(precision) / 1e9:.4g} GFLOP/s ({why})"))
    for level, value in machine.bandwidth.items():
        if value > bounds.bandwidth:
            problems.append(Problem(f"bandwidth.{level}", f"{value / 1e9:.4g} GB/s exceeds the physical bound "
                                    f"{bounds.bandwidth / 1e9:.4g} GB/s ({why})"))
    return problems


def missing_levels(machine: Machine) -> list[str]:
    """Cache levels the OS reports (``info.capacities``) that got no bandwidth roof, plus DRAM."""
    if machine.info.get("device", "cpu") != "cpu" and not str(machine.info.get("device", "")).startswith("cpu"):
        return []
    wanted = [str(level) for level in (machine.info.get("capacities") or {})]
    if str(machine.info.get("method", "")).startswith("ert"):
        wanted.append("DRAM")
    return [level for level in wanted if level not in machine.bandwidth]


def degraded_reason(machine: Machine) -> str | None:
    """Why a characterization is incomplete for a transient reason (a failed build, a missing level);
    None when it is complete or its limits are permanent (no compiler at all)."""
    info = machine.info
    reason = str(info.get("fallback_reason") or "")
    if info.get("method") == "blas-fallback" and reason.startswith("kernel build failed"):
        return reason.splitlines()[0][:300]
    missing = missing_levels(machine)
    if missing:
        return f"no bandwidth roof for {', '.join(missing)}"
    return None


def _gemm_flops(machine: Machine) -> dict[str, float]:
    raw = machine.info.get("gemm_flops") or {}
    if not isinstance(raw, Mapping):
        return {}
    out = {}
    for precision, value in raw.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            out[str(precision)] = float(value)
    return out


# --- reconcile: what the checks can fix without measuring again --------------------------------------------

def reconcile(machine: Machine, native: Iterable[str] = ()) -> Machine:
    """Peaks raised to the GEMM of their precision when it is faster (source recorded; a large gap is a
    :func:`check_gemm` problem of the unreconciled record), and reduced precisions raised
    to the roof of the precision that computes them exactly. A precision far below that roof which the hardware
    has no native path for (``native``: see :func:`pytest_roofline.characterize.precision.native_precisions`)
    is recorded as emulated in ``info["emulated"]``."""
    native = set(native)
    peaks = dict(machine.peak_flops)
    info = dict(machine.info)
    sources = dict(info.get("sources") or {})
    for precision, gemm in _gemm_flops(machine).items():
        roof = gemm_roof_name(machine, precision)
        peak = peaks.get(roof)
        if peak is not None and peak < gemm:
            was = sources.get(f"peak_flops.{roof}", "?")
            peaks[roof] = gemm
            sources[f"peak_flops.{roof}"] = (f"{info.get('gemm', {}).get(precision, {}).get('source', 'gemm')}"
                                             f" (above {was} {peak / 1e9:.4g} GFLOP/s)")
    emulated = dict(info.get("emulated") or {})
    for precision, exact_on in EXACT_ON.items():
        if precision not in peaks:
            continue
        floor = max(((peaks[p], p) for p in exact_on if p in peaks), default=None)
        if floor is None or peaks[precision] >= floor[0]:
            continue
        measured = peaks[precision]
        if measured < EMULATED_SHARE * floor[0] and precision not in native:
            emulated[precision] = {"measured_flops": measured, "roof_from": floor[1],
                                   "measured_source": sources.get(f"peak_flops.{precision}", "?")}
        peaks[precision] = floor[0]
        sources[f"peak_flops.{precision}"] = (f"{floor[1]} roof ({sources.get(f'peak_flops.{floor[1]}', '?')}; "
                                              f"{precision} measured {measured / 1e9:.4g} GFLOP/s"
                                              f"{', emulated' if precision in emulated else ''})")
    if emulated:
        info["emulated"] = emulated
    info["sources"] = sources
    return Machine(name=machine.name, peak_flops=peaks, bandwidth=machine.bandwidth, info=info)
