"""Which reduced precisions a CPU computes natively, from its ISA flags (and PyTorch's own check).

x86: ``amx_bf16`` / ``avx512_bf16`` give bf16 a native path, ``amx_fp16`` / ``avx512_fp16`` fp16. ARM: ``bf16``
(BFDOT/BFMMLA) in /proc/cpuinfo's Features, ``fphp``/``asimdhp`` for fp16. Elsewhere PyTorch converts to fp32
and back around scalar code: a bf16 GEMM then runs at a few GFLOP/s on a CPU whose fp32 units do hundreds.
CUDA devices always have both (the example suite runs fp16 autocast there).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

NATIVE_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("amx_bf16", "avx512_bf16", "bf16", "sme", "sve_bf16"),
    "fp16": ("amx_fp16", "avx512_fp16", "fphp", "asimdhp"),
}


def cpuinfo_flags(text: str | None = None) -> set[str]:
    """Every flag of the first processor in /proc/cpuinfo (x86 ``flags``, ARM ``Features``)."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def native_precisions(flags: Iterable[str]) -> set[str]:
    """The reduced precisions (``bf16``, ``fp16``) these ISA flags give a native arithmetic path."""
    present = set(flags)
    return {precision for precision, names in NATIVE_FLAGS.items() if present & set(names)}


def missing_path_reason(precision: str, flags: Iterable[str] | None = None) -> str | None:
    """None when the CPU computes ``precision`` natively; else what it lacks, for a skip reason."""
    present = cpuinfo_flags() if flags is None else set(flags)
    if precision in native_precisions(present):
        return None
    names = NATIVE_FLAGS.get(precision, ())
    return (f"this CPU has no native {precision} path (none of {', '.join(names)} in /proc/cpuinfo), so PyTorch "
            f"emulates {precision} in software")
