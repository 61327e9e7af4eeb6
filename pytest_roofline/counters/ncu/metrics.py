"""Which Nsight Compute metrics give a roofline point, per compute capability, and how they combine.

Sources: the NERSC hierarchical roofline method, NVIDIA's Tensor Core ``sm__ops_path_tensor_*`` counters per CC
and what the stock roofline sections changed (docs/gpu.md). The per-CC Tensor
Core names, the CCs without a DRAM level and the packed-FP32 CCs were checked name by name against NVIDIA's stock
``SpeedOfLight_HierarchicalTensorRooflineChart.section`` and ``SpeedOfLight_Roofline.py`` rule of a 2025-era ncu
(``STOCK_SECTION_SOURCE``, ``STOCK_RULE_SOURCE``); ``cc_sources(cc)`` says which source each name of a CC's list
was checked against.

Formulas, per kernel launch (all values in SI units):

* time: ``gpu__time_duration.sum``; else ``sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second``
  (the NERSC formula); else the ``Duration`` row of the Speed Of Light section.
* CUDA-core FLOPs: ``add + mul + 2·fma`` of ``sm__sass_thread_inst_executed_op_{d,f}{add,mul,fma}_pred_on.sum``
  for fp64/fp32. On CC 10.0 and 10.3 (and only there: ``PACKED_FP32_CC``) the compiler also emits packed FP32
  instructions that work on two lanes, FADD2/FMUL2/FFMA2, counted by ``..._op_{fadd2,fmul2,ffma2}_pred_on.sum`` at
  2, 2 and 4 FLOPs each (``PACKED_FP32_FLOPS``). Half (``h*``) thread instructions are packed HADD2/HMUL2/HFMA2
  that work on two lanes, so fp16 counts ``2·hadd + 2·hmul + 4·hfma`` (the ncu 2025 Hierarchical Half roofline
  section; the NERSC scripts and ncu ≤ 2022.3 count half as much). bf16 CUDA-core work runs on the same counters
  and is reported as fp16.
* Tensor Core FLOPs (precisions ``<type>_tensor``, e.g. ``bf16_tensor``): the aggregate
  ``sm__ops_path_tensor_src_*.sum`` counters (they count FLOPs, 2·M·N·K, not instructions) on CC ≥ 7.5, one
  precision per source type; ``512 × sm__inst_executed_pipe_tensor.sum`` (V100 HMMA) on CC 7.0. The ×512 is only
  right for Volta's HMMA shape, so on CC ≥ 7.5 the instruction count is never turned into FLOPs. CC 10.3 has no
  FP8 aggregate: there the per-instruction ``op_utcqmma_src_fp8_*`` counters carry FP8 work
  (``SECTION_TENSOR_EXTRA``).
* Bytes: L1 ``l1tex__t_bytes.sum``, L2 ``lts__t_bytes.sum``, HBM ``dram__bytes.sum``, else
  ``dram__bytes_read.sum + dram__bytes_write.sum`` (NERSC: all tag-stage traffic). Reports made with the 2025
  stock roofline sections carry the other definition, data returned to the SM:
  ``l1tex__lsu_writeback_active_mem_lg[ds].sum × 128`` and ``lts__lts2xbar_cycles_active.sum × 32``. AI values
  from the two are not interchangeable, so every result records which one it used (``definitions``).
* A metric ncu prints as ``n/a`` is absent, never zero. A counter stored only as a rate (stock sections keep
  ``X.sum.per_second`` or ``X.sum.per_cycle_elapsed``) is turned back into a total with the launch's duration,
  the way ncu's own roofline charts compute achieved values; the definition then says so.

Replay passes: the research has no measured pass count for this metric set (it reports 37–38 passes per kernel for
``--set full``). ncu writes the count it needed into every result as ``profiler__replayer_passes``, which the
parser records (``replay_passes``): 1 pass for cycles + clock + ``dram__bytes`` on V100 (sample 09), 3 for the
Hierarchical Double roofline section + Occupancy on CC 8.9 (sample 08), 11 for sample 07's sections. The metric
lists below ask for totals only (no ``.per_second``/``.peak_sustained`` companions, no sections), which keeps the
count as low as this set allows; the plugin records the count of every run rather than assume one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_roofline.errors import UnsupportedComputeCapability
from pytest_roofline.model import TENSOR_SUFFIX

# -- names -------------------------------------------------------------------------------------------------

LEVEL_L1 = "L1"
LEVEL_L2 = "L2"
LEVEL_HBM = "HBM"  # the model treats HBM and DRAM as one level (``model._LEVEL_ALIASES``)
LEVELS: tuple[str, ...] = (LEVEL_L1, LEVEL_L2, LEVEL_HBM)

CUDA_CORE_PRECISIONS: dict[str, str] = {"fp64": "d", "fp32": "f", "fp16": "h"}

TIME_METRIC = "gpu__time_duration.sum"
CYCLES_METRIC = "sm__cycles_elapsed.avg"
CLOCK_METRIC = "sm__cycles_elapsed.avg.per_second"
PIPE_TENSOR_METRIC = "sm__inst_executed_pipe_tensor.sum"
PASSES_METRIC = "profiler__replayer_passes"
DURATION_LABEL = "Duration"  # the Speed Of Light section's display name for gpu__time_duration.sum

VOLTA_HMMA_FLOPS_PER_INST = 512
HALF_LANES_PER_INST = 2

L1_T_BYTES = "l1tex__t_bytes.sum"
L2_T_BYTES = "lts__t_bytes.sum"
DRAM_BYTES = "dram__bytes.sum"
DRAM_READ_BYTES = "dram__bytes_read.sum"
DRAM_WRITE_BYTES = "dram__bytes_write.sum"
L1_WRITEBACK = {  # LSU writeback cycles; × 128 B each (2025 stock sections), by CC range
    "lgds": "l1tex__lsu_writeback_active_mem_lgds.sum",  # CC >= 9.0
    "lg": "l1tex__lsu_writeback_active_mem_lg.sum",  # CC 7.5 .. 8.9
    "all": "l1tex__lsu_writeback_active.sum",  # CC <= 7.2
}
L2_XBAR_CYCLES = "lts__lts2xbar_cycles_active.sum"  # × 32 B each

DEFINITION_T_BYTES = "t_bytes"
DEFINITION_RETURNED = "returned_to_sm"


def sass_metric(precision_letter: str, op: str) -> str:
    """``sass_metric("d", "fma") == "sm__sass_thread_inst_executed_op_dfma_pred_on.sum"``."""
    return f"sm__sass_thread_inst_executed_op_{precision_letter}{op}_pred_on.sum"


def ops_path_metric(suffix: str) -> str:
    return f"sm__ops_path_tensor_{suffix}.sum"


# -- per compute capability ----------------------------------------------------------------------------------

# Where the per-CC names below were checked, name by name: a public copy of the stock section of a 2025-era ncu
# (the copy lists CC 10.3, 11.0 and 12.1 items, so it ships with CUDA 13.0's ncu or later; the file does not state
# its version) and, for packed FP32, a public copy of the stock SOLFPRoofline rule of the same era.
STOCK_SECTION_SOURCE = ("SpeedOfLight_HierarchicalTensorRooflineChart.section of a 2025-era ncu (public copy: "
                        "github.com/xingxerx/Qallow sections/; the commit read is in docs/gpu.md)")
STOCK_RULE_SOURCE = "SpeedOfLight_Roofline.py (rule SOLFPRoofline) of a 2025-era ncu: requested_metrics_gb10x"
NERSC_SOURCE = "NERSC roofline-on-nvidia-gpus metric set (research §1.2-1.3)"

_SPARSITY = ("sparsity_off", "sparsity_on")


def _both_sparsities(*names: str) -> tuple[str, ...]:
    return tuple(f"{name}_{mode}" for name in names for mode in _SPARSITY)


# Aggregate ops_path counters per CC, exactly as the stock section's Items filtered to that CC list them
# (MinArch == MaxArch == CC). Per-instruction ``op_*`` names are left out on purpose: they split the aggregates
# and would count the same FLOPs twice. CC 7.0 and 7.2 (Volta) have no item in the section.
_AMPERE = _both_sparsities("src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_tf32_dst_fp32",
                           "src_int4", "src_int8") + ("src_fp64", "src_int1")
_BLACKWELL_COMMON = ("src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp4_dst_fp32")
_BLACKWELL_TAIL = ("src_fp64", "src_int8", "src_tf32_dst_fp32")
_RTX_BLACKWELL = (("src_bf16_dst_fp32", "src_fp16_dst_fp16", "src_fp16_dst_fp32", "src_fp64", "src_int8",
                   "src_tf32_dst_fp32")
                  + _both_sparsities("src_fp4_dst_fp32", "src_fp4_fp6_dst_fp16", "src_fp4_fp6_dst_fp32",
                                     "src_fp8_dst_fp16", "src_fp8_dst_fp32"))
SECTION_TENSOR: dict[tuple[int, int], tuple[str, ...]] = {
    (7, 5): ("src_fp16_bf16_tf32_dst_fp32", "src_fp16_dst_fp16", "src_int1", "src_int4", "src_int8"),
    (8, 0): _AMPERE,
    (8, 6): _AMPERE,
    (8, 7): _AMPERE,
    (8, 9): _AMPERE[:12] + _both_sparsities("src_fp8") + _AMPERE[12:],
    (9, 0): ("src_bf16_dst_fp32", "src_fp16", "src_fp64", "src_int1", "src_int8", "src_tf32_dst_fp32")
    + _both_sparsities("src_fp8"),
    (10, 0): _BLACKWELL_COMMON + ("src_fp4_fp6_fp8_dst_fp16", "src_fp4_fp6_fp8_dst_fp32") + _BLACKWELL_TAIL,
    # B300 has its own names: FP4/FP6 apart from FP8 (no fp4_fp6_fp8 aggregate on this chip).
    (10, 3): _BLACKWELL_COMMON + ("src_fp4_fp6_dst_fp16", "src_fp4_fp6_dst_fp32") + _BLACKWELL_TAIL,
    (11, 0): _BLACKWELL_COMMON + ("src_fp4_fp6_fp8_dst_fp16", "src_fp4_fp6_fp8_dst_fp32") + _BLACKWELL_TAIL,
    (12, 0): _RTX_BLACKWELL,
    (12, 1): _RTX_BLACKWELL,
}
# CC 10.3's section item has no FP8 aggregate: FP8 Tensor Core work shows only in these per-instruction counters
# (the tcgen05 kind::f8f6f4 path with FP8 inputs). No aggregate of that chip covers them, so adding them counts
# nothing twice. The section lists no sparsity_on variant of fp8_dst_fp32 for this chip, so neither do we.
SECTION_TENSOR_EXTRA: dict[tuple[int, int], tuple[str, ...]] = {
    (10, 3): ("op_utcqmma_src_fp8_dst_fp16_sparsity_off", "op_utcqmma_src_fp8_dst_fp16_sparsity_on",
              "op_utcqmma_src_fp8_dst_fp32_sparsity_off"),
}
VOLTA_CC = frozenset({(7, 0), (7, 2)})
CHECKED_CC: tuple[tuple[int, int], ...] = tuple(sorted({*SECTION_TENSOR, *VOLTA_CC}))

# Unified-memory SoCs (Xavier 7.2, Orin 8.7, Thor 11.0, DGX Spark 12.1) have no DRAM level: the stock section's
# items for 8.7, 11.0 and 12.1 have no DRAM roofline; Xavier has no item there (Volta) and is listed by analogy.
_NO_DRAM_CC = frozenset({(7, 2), (8, 7), (11, 0), (12, 1)})

# Packed FP32 (FADD2/FMUL2/FFMA2): the stock SOLFPRoofline rule asks for these counters only when
# cc_major == 10 and cc_minor in (0, 3). Asking another chip for a name it lacks makes ncu fail the run
# ("==ERROR== Failed to find metric"), so they are requested there and nowhere else.
PACKED_FP32_CC = frozenset({(10, 0), (10, 3)})
# FLOPs per thread instruction: two lanes each, an FMA being two FLOPs per lane. The stock rule adds
# ``fadd2*2 + fmul2 + 2*ffma2*4`` (FMUL2 counted once, FFMA2 eight times); we follow the arithmetic, not the rule.
PACKED_FP32_FLOPS: dict[str, float] = {"fadd2": 2.0, "fmul2": 2.0, "ffma2": 4.0}


def parse_cc(cc: str | float | tuple[int, int] | None) -> tuple[int, int] | None:
    """``"8.9"``, ``8.9``, ``(8, 9)`` -> ``(8, 9)``; ``None`` stays ``None``."""
    if cc is None:
        return None
    if isinstance(cc, tuple):
        return (int(cc[0]), int(cc[1]))
    text = str(cc).strip()
    if not text:
        return None
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?", text)
    if not match:
        raise ValueError(f"not a compute capability: {cc!r} (expected e.g. '8.9')")
    return (int(match.group(1)), int(match.group(2) or 0))


def format_cc(cc: tuple[int, int] | None) -> str | None:
    return None if cc is None else f"{cc[0]}.{cc[1]}"


# CUDA 13.0 renamed Thor's sm_101 to sm_110: an older driver/ncu reports the same chip as 10.1.
_RENAMED_CC = {(10, 1): (11, 0)}


def _nearest_checked(cc: tuple[int, int]) -> tuple[int, int]:
    """A CC missing from the section borrows the names of the closest checked CC below it in the same major
    (a renamed chip borrows its new name's); an unknown minor of a new major borrows the lowest."""
    if cc in _RENAMED_CC:
        return _RENAMED_CC[cc]
    same_major = [c for c in CHECKED_CC if c[0] == cc[0]]
    below = [c for c in same_major if c <= cc]
    if below:
        return below[-1]
    if same_major:
        return same_major[0]
    return max(c for c in CHECKED_CC if c < cc)


def _check_supported(cc: tuple[int, int]) -> None:
    if cc < (7, 0) or cc[0] > 12:
        raise UnsupportedComputeCapability(
            f"compute capability {format_cc(cc)} is outside the supported range 7.0 .. 12.x "
            "(ncu 2020.1 dropped Pascal; newer chips need their metric names checked with "
            "'ncu --query-metrics --chip <chip>')"
        )


def sass_metric_packed(op: str) -> str:
    """``sass_metric_packed("ffma2") == "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum"``."""
    return f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"


@dataclass(frozen=True)
class MetricSet:
    """The counters one ncu run collects for a roofline on one compute capability."""

    cc: tuple[int, int]
    time: tuple[str, ...]
    flops: tuple[str, ...]
    tensor: tuple[str, ...]
    bytes: tuple[str, ...]
    tensor_definition: str
    byte_definition: str = DEFINITION_T_BYTES
    names_from: tuple[int, int] | None = None  # the checked CC whose names these are (== cc when checked)

    @property
    def checked(self) -> bool:
        """Whether this CC's names were checked one by one against the stock section (``CHECKED_CC``)."""
        return self.names_from == self.cc

    @property
    def names(self) -> list[str]:
        seen: dict[str, None] = {}
        for name in (*self.time, *self.flops, *self.tensor, *self.bytes):
            seen.setdefault(name, None)
        return list(seen)

    def describe(self, half_lanes: int = HALF_LANES_PER_INST) -> list[dict[str, str]]:
        """One entry per name: what it feeds (a precision, a level, the time or the clock) and how."""
        return [metric_role(name, self.cc, half_lanes) for name in self.names]


def metric_role(name: str, cc: tuple[int, int] | None = None, half_lanes: int = HALF_LANES_PER_INST
                ) -> dict[str, str]:
    """``{"name", "feeds", "formula"}`` for one metric of the lists above (``launch_work`` is the code)."""
    if name == TIME_METRIC:
        return {"name": name, "feeds": "time", "formula": "time_s = value (ns in the report)"}
    if name == CLOCK_METRIC:
        return {"name": name, "feeds": "clock", "formula": "recorded only (locked-clock check)"}
    packed = re.fullmatch(r"sm__sass_thread_inst_executed_op_(fadd2|fmul2|ffma2)_pred_on\.sum", name)
    if packed:
        return {"name": name, "feeds": "fp32", "formula": f"fp32 += {PACKED_FP32_FLOPS[packed.group(1)]:g} x value"}
    sass = re.fullmatch(r"sm__sass_thread_inst_executed_op_([dfh])(add|mul|fma)_pred_on\.sum", name)
    if sass:
        letter, op = sass.groups()
        precision = {v: k for k, v in CUDA_CORE_PRECISIONS.items()}[letter]
        factor = (2 if op == "fma" else 1) * (half_lanes if letter == "h" else 1)
        return {"name": name, "feeds": precision, "formula": f"{precision} += {factor} x value"}
    if name == PIPE_TENSOR_METRIC:
        return {"name": name, "feeds": "fp16_tensor",
                "formula": f"fp16_tensor += {VOLTA_HMMA_FLOPS_PER_INST} x value (Volta HMMA only)"}
    ops_path = re.fullmatch(r"sm__ops_path_tensor_(?:op_[a-z0-9]+_)?(src_[a-z0-9_]+)\.sum", name)
    if ops_path:
        precision = tensor_precision(ops_path.group(1))
        return {"name": name, "feeds": precision, "formula": f"{precision} += value (FLOPs counted by the hardware)"}
    levels = {L1_T_BYTES: LEVEL_L1, L2_T_BYTES: LEVEL_L2, DRAM_BYTES: LEVEL_HBM}
    if name in levels:
        return {"name": name, "feeds": levels[name], "formula": f"{levels[name]} bytes = value"}
    if name in (DRAM_READ_BYTES, DRAM_WRITE_BYTES):
        return {"name": name, "feeds": LEVEL_HBM,
                "formula": f"HBM bytes = {DRAM_READ_BYTES} + {DRAM_WRITE_BYTES} when {DRAM_BYTES} is absent"}
    return {"name": name, "feeds": "-", "formula": "not used by the roofline"}


def metric_set(cc: str | float | tuple[int, int]) -> MetricSet:
    """The roofline metric list for a compute capability (7.0 .. 12.x)."""
    parsed = parse_cc(cc)
    if parsed is None:
        raise ValueError("metric_set() needs a compute capability")
    _check_supported(parsed)
    source = parsed if parsed in CHECKED_CC else _nearest_checked(parsed)
    flops = tuple(sass_metric(letter, op) for letter in ("d", "f", "h") for op in ("add", "mul", "fma"))
    if parsed in PACKED_FP32_CC:  # exact CCs only: a borrowed list never asks for packed counters
        flops += tuple(sass_metric_packed(op) for op in PACKED_FP32_FLOPS)
    if source in VOLTA_CC:
        tensor: tuple[str, ...] = (PIPE_TENSOR_METRIC,)
        tensor_definition = f"{VOLTA_HMMA_FLOPS_PER_INST} x {PIPE_TENSOR_METRIC} (Volta HMMA)"
    else:
        suffixes = SECTION_TENSOR[source] + SECTION_TENSOR_EXTRA.get(source, ())
        tensor = tuple(ops_path_metric(suffix) for suffix in suffixes)
        tensor_definition = "sm__ops_path_tensor_src_*.sum (FLOPs counted by the hardware)"
    # DRAM goes by the CC itself (a renamed chip by its new name): a list borrowed from a SoC neighbour keeps DRAM.
    if (_RENAMED_CC.get(parsed, parsed)) in _NO_DRAM_CC:
        memory: tuple[str, ...] = (L1_T_BYTES, L2_T_BYTES)
    else:
        # read + write ride along: the HBM level survives a chip or ncu version that prints dram__bytes.sum n/a.
        memory = (L1_T_BYTES, L2_T_BYTES, DRAM_BYTES, DRAM_READ_BYTES, DRAM_WRITE_BYTES)
    # The clock rides along: one counter, and it shows whether clocks were locked during the run.
    return MetricSet(parsed, (TIME_METRIC, CLOCK_METRIC), flops, tensor, memory, tensor_definition,
                     names_from=source)


def cc_sources(cc: str | float | tuple[int, int]) -> dict[str, str]:
    """Which source each name of ``metric_set(cc)`` was checked against (the table in ``ncu/README.md``)."""
    chosen = metric_set(cc)
    sources: dict[str, str] = {}
    for name in chosen.names:
        if name.startswith("sm__ops_path_tensor_"):
            sources[name] = STOCK_SECTION_SOURCE
        elif name.endswith(("fadd2_pred_on.sum", "fmul2_pred_on.sum", "ffma2_pred_on.sum")):
            sources[name] = STOCK_RULE_SOURCE
        elif name == PIPE_TENSOR_METRIC:
            sources[name] = "ncu 2022.3 stock Hierarchical Tensor section (x 512, Volta) (research §3.1)"
        else:
            sources[name] = NERSC_SOURCE
    return sources


# -- turning one launch's metrics into work ------------------------------------------------------------------


@dataclass
class LaunchWork:
    """What one kernel launch did, in SI units. A key missing from ``flops``/``bytes`` was not measured."""

    time_s: float | None
    flops: dict[str, float]
    bytes: dict[str, float]
    tensor_flops: float | None  # None: unknown (not collected, or an instruction count with no known shape)
    tensor_instructions: float | None
    sm_clock_hz: float | None
    definitions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class _Resolver:
    """Looks metrics up by name, with the fallbacks described in the module docstring."""

    def __init__(self, metrics: Mapping[str, float | None], time_s: float | None) -> None:
        self.metrics = metrics
        self.time_s = time_s
        self.derived_from_rate: list[str] = []

    def direct(self, name: str) -> float | None:
        value = self.metrics.get(name)
        if value is None and name.startswith("sm__sass_thread") and name.endswith(".sum"):
            # The per-SM-sub-partition counter summed over the chip is the same count.
            value = self.metrics.get("smsp__" + name[len("sm__"):])
        return value

    def get(self, name: str) -> float | None:
        value = self.direct(name)
        if value is not None:
            return value
        if self.time_s is None:
            return None
        for candidate in (name, "smsp__" + name[len("sm__"):] if name.startswith("sm__") else None):
            if candidate is None:
                continue
            rate = self.metrics.get(candidate + ".per_second")
            if rate is not None:
                self.derived_from_rate.append(name)
                return rate * self.time_s
            per_cycle = self.metrics.get(candidate + ".per_cycle_elapsed")
            unit = candidate.split("__", 1)[0]
            clock = self.metrics.get(f"{unit}__cycles_elapsed.avg.per_second")
            if per_cycle is not None and clock is not None:
                self.derived_from_rate.append(name)
                return per_cycle * clock * self.time_s
        return None


def launch_time(metrics: Mapping[str, float | None], labels: Mapping[str, float | None] | None = None
                ) -> tuple[float | None, str | None]:
    """A launch's duration in seconds and the formula that gave it."""
    duration = metrics.get(TIME_METRIC)
    if duration is not None and duration > 0:
        return duration, TIME_METRIC
    cycles, clock = metrics.get(CYCLES_METRIC), metrics.get(CLOCK_METRIC)
    if cycles is not None and clock is not None and clock > 0 and cycles > 0:
        return cycles / clock, f"{CYCLES_METRIC} / {CLOCK_METRIC}"
    for label, value in (labels or {}).items():
        if label.rsplit("/", 1)[-1] == DURATION_LABEL and value is not None and value > 0:
            return value, f"'{label}' (section row)"
    return None, None


# A total, or the rate the stock sections keep (turned back into a total by ``_Resolver``).
_OPS_PATH_RE = re.compile(r"^sm__ops_path_tensor_(src_[a-z0-9_]+)\.sum(?:\.per_cycle_elapsed|\.per_second)?$")
_SPARSITY_OR_DST_RE = re.compile(r"_(dst_[a-z0-9]+|sparsity_(on|off))")


def tensor_precision(ops_path_suffix: str) -> str:
    """``"src_bf16_dst_fp32"`` -> ``"bf16_tensor"``; ``"src_fp16_bf16_tf32_dst_fp32"`` (Turing) -> ``"fp16_tensor"``.

    Paths shared by several input types are named after one of them: Turing's fp16/bf16/tf32 path is fp16 (Turing
    has no bf16 or tf32 Tensor Cores) and Blackwell's fp4/fp6/fp8 path is fp8, its widest type, so it meets the fp8
    Tensor Core roof. Integer paths count operations, not FLOPs, and keep their own names (``int8_tensor``).
    """
    source = _SPARSITY_OR_DST_RE.split(ops_path_suffix[len("src_"):], maxsplit=1)[0]
    source = {"fp16_bf16_tf32": "fp16", "fp4_fp6_fp8": "fp8"}.get(source, source)
    return source + TENSOR_SUFFIX


def _packed_fp32(resolver: _Resolver, cc: tuple[int, int] | None, have_fp32: bool, warnings: list[str]
                 ) -> float | None:
    """FLOPs of FADD2/FMUL2/FFMA2 when any of their counters is present; a warning where they should be."""
    counts = {op: resolver.get(sass_metric_packed(op)) for op in PACKED_FP32_FLOPS}
    known = {op: v for op, v in counts.items() if v is not None}
    if not known:
        if have_fp32 and cc in PACKED_FP32_CC:
            warnings.append(f"fp32 FLOPs are a lower bound: CC {format_cc(cc)} executes packed FP32 "
                            "(FADD2/FMUL2/FFMA2) and their counters are absent from the report")
        return None
    if len(known) < len(counts):
        missing = ", ".join(sass_metric_packed(op) for op in counts if op not in known)
        warnings.append(f"packed fp32 FLOPs are partial: {missing} absent")
    return float(sum(PACKED_FP32_FLOPS[op] * value for op, value in known.items()))


FP8_OP_MARK = "op_utcqmma_"  # keys of per-instruction FP8 counters among the aggregates
# Per-instruction FP8 counters that carry FP8 Tensor Core work on CC 10.3, where no aggregate does.
_FP8_OP_RE = re.compile(r"^sm__ops_path_tensor_op_utcqmma_(src_fp8_dst_[a-z0-9]+_sparsity_(?:on|off))"
                        r"\.sum(?:\.per_cycle_elapsed|\.per_second)?$")


def _ops_path_counters(metrics: Mapping[str, float | None], resolver: _Resolver) -> dict[str, float]:
    """Present aggregate ops_path counters, without children of a present parent (no double counting).

    CC 10.3's ``op_utcqmma_src_fp8_*`` counters join in only when no aggregate with FP8 inputs is present
    (on CC 10.0 the ``src_fp4_fp6_fp8_*`` aggregates already hold that work).
    """
    present: dict[str, float] = {}
    for suffix in sorted({m.group(1) for name in metrics if (m := _OPS_PATH_RE.match(name))}):
        value = resolver.get(ops_path_metric(suffix))
        if value is not None:
            present[suffix] = value
    if not any("fp8" in suffix for suffix in present):
        for suffix in sorted({m.group(1) for name in metrics if (m := _FP8_OP_RE.match(name))}):
            value = resolver.get(ops_path_metric(f"op_utcqmma_{suffix}"))
            if value is not None:
                present[FP8_OP_MARK + suffix] = value
    kept: dict[str, float] = {}
    for suffix, value in present.items():
        parent_present = any(
            suffix != other and suffix.startswith(other + "_") and _SPARSITY_OR_DST_RE.match(suffix[len(other):])
            for other in present
        )
        if not parent_present:
            kept[suffix] = value
    return kept


def _writeback_metric(metrics: Mapping[str, float | None], cc: tuple[int, int] | None) -> str:
    if cc is not None:
        if cc >= (9, 0):
            return L1_WRITEBACK["lgds"]
        if cc >= (7, 5):
            return L1_WRITEBACK["lg"]
        return L1_WRITEBACK["all"]
    for name in L1_WRITEBACK.values():
        if any(key.startswith(name) for key in metrics):
            return name
    return L1_WRITEBACK["lg"]


def launch_work(
    metrics: Mapping[str, float | None],
    cc: tuple[int, int] | None,
    labels: Mapping[str, float | None] | None = None,
    half_lanes: int = HALF_LANES_PER_INST,
) -> LaunchWork:
    """FLOPs per precision, bytes per level and time of one launch from its metrics (SI units)."""
    time_s, time_definition = launch_time(metrics, labels)
    resolver = _Resolver(metrics, time_s)
    definitions: dict[str, str] = {}
    warnings: list[str] = []
    if time_definition:
        definitions["time"] = time_definition

    flops: dict[str, float] = {}
    for precision, letter in CUDA_CORE_PRECISIONS.items():
        lanes = half_lanes if letter == "h" else 1
        counts = {op: resolver.get(sass_metric(letter, op)) for op in ("add", "mul", "fma")}
        known = {op: v for op, v in counts.items() if v is not None}
        if not known:
            continue
        if len(known) < 3:
            missing = ", ".join(sass_metric(letter, op) for op in counts if op not in known)
            warnings.append(f"{precision} FLOPs are partial: {missing} absent")
        flops[precision] = lanes * (known.get("add", 0.0) + known.get("mul", 0.0) + 2.0 * known.get("fma", 0.0))
    if any(p in flops for p in CUDA_CORE_PRECISIONS):
        definitions["flops"] = f"add + mul + 2*fma (sass thread instructions; fp16 x{half_lanes} per lane)"
    packed = _packed_fp32(resolver, cc, "fp32" in flops, warnings)
    if packed is not None:
        flops["fp32"] = flops.get("fp32", 0.0) + packed
        definitions["flops_packed_fp32"] = "2*fadd2 + 2*fmul2 + 4*ffma2"

    tensor_flops: float | None = None
    ops_path = _ops_path_counters(metrics, resolver)
    pipe_tensor = resolver.direct(PIPE_TENSOR_METRIC)
    if ops_path:
        for suffix, value in ops_path.items():
            precision = tensor_precision(suffix.removeprefix(FP8_OP_MARK))
            flops[precision] = flops.get(precision, 0.0) + value
        tensor_flops = float(sum(ops_path.values()))
        definitions["tensor"] = "sm__ops_path_tensor_src_*.sum"
        if any(suffix.startswith(FP8_OP_MARK) for suffix in ops_path):
            definitions["tensor"] += " + sm__ops_path_tensor_op_utcqmma_src_fp8_*.sum (no FP8 aggregate on CC 10.3)"
    elif pipe_tensor is not None:
        if cc is None or cc < (7, 5):
            flops["fp16_tensor"] = VOLTA_HMMA_FLOPS_PER_INST * pipe_tensor
            tensor_flops = flops["fp16_tensor"]
            definitions["tensor"] = f"{VOLTA_HMMA_FLOPS_PER_INST} x {PIPE_TENSOR_METRIC} (Volta HMMA)"
            if cc is None and pipe_tensor > 0:
                warnings.append(
                    f"compute capability unknown: Tensor Core FLOPs assume Volta's {VOLTA_HMMA_FLOPS_PER_INST} "
                    "FLOPs per HMMA instruction (pass the compute capability to be exact)"
                )
        elif pipe_tensor == 0:
            tensor_flops = 0.0  # no Tensor Core instruction: zero Tensor Core FLOPs on any chip
            definitions["tensor"] = f"{PIPE_TENSOR_METRIC} == 0"
        else:
            warnings.append(
                f"{PIPE_TENSOR_METRIC} = {pipe_tensor:.0f} on CC {format_cc(cc)}: the FLOPs per Tensor Core "
                "instruction depend on its shape there, so Tensor Core FLOPs are unknown "
                "(collect sm__ops_path_tensor_* counters)"
            )

    bytes_moved: dict[str, float] = {}
    l1 = resolver.get(L1_T_BYTES)
    if l1 is not None:
        bytes_moved[LEVEL_L1] = l1
        definitions[LEVEL_L1] = L1_T_BYTES
    else:
        writeback = _writeback_metric(metrics, cc)
        cycles = resolver.get(writeback)
        if cycles is not None:
            bytes_moved[LEVEL_L1] = 128.0 * cycles
            definitions[LEVEL_L1] = f"{writeback} x 128"
    l2 = resolver.get(L2_T_BYTES)
    if l2 is not None:
        bytes_moved[LEVEL_L2] = l2
        definitions[LEVEL_L2] = L2_T_BYTES
    else:
        xbar = resolver.get(L2_XBAR_CYCLES)
        if xbar is not None:
            bytes_moved[LEVEL_L2] = 32.0 * xbar
            definitions[LEVEL_L2] = f"{L2_XBAR_CYCLES} x 32"
    dram = resolver.get(DRAM_BYTES)
    if dram is not None:
        bytes_moved[LEVEL_HBM] = dram
        definitions[LEVEL_HBM] = DRAM_BYTES
    else:
        read, write = resolver.get(DRAM_READ_BYTES), resolver.get(DRAM_WRITE_BYTES)
        if read is not None or write is not None:
            bytes_moved[LEVEL_HBM] = (read or 0.0) + (write or 0.0)
            definitions[LEVEL_HBM] = f"{DRAM_READ_BYTES} + {DRAM_WRITE_BYTES}"
            if read is None or write is None:
                warnings.append("HBM bytes are partial: only one of dram__bytes_read/write is present")

    cache_kinds = {DEFINITION_RETURNED if " x " in definitions[level] else DEFINITION_T_BYTES
                   for level in (LEVEL_L1, LEVEL_L2) if level in definitions}
    if cache_kinds:
        definitions["cache_bytes"] = cache_kinds.pop() if len(cache_kinds) == 1 else "mixed"
    if resolver.derived_from_rate:
        definitions["derived_from_rate"] = ", ".join(sorted(set(resolver.derived_from_rate)))
    return LaunchWork(
        time_s=time_s,
        flops=flops,
        bytes=bytes_moved,
        tensor_flops=tensor_flops,
        tensor_instructions=pipe_tensor,
        sm_clock_hz=metrics.get(CLOCK_METRIC) or resolver.direct("smsp__cycles_elapsed.avg.per_second"),
        definitions=definitions,
        warnings=warnings,
    )
