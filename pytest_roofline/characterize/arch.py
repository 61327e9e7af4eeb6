"""Compiler flags and vector widths of the ERT kernel per architecture and compiler.

- x86-64: ``-march=native``; widths 128 (SSE2), 256 (AVX), 512 (AVX-512F) bits from the ISA flags.
- aarch64 (GCC and Clang): ``-mcpu=native`` (Clang before 15 and some GCC builds reject ``-march=native`` there);
  NEON is 128 bits. With SVE the kernel's generic vectors of the SVE length need ``-msve-vector-bits=N``,
  N read from ``/proc/sys/abi/sve_default_vector_length`` (bytes); without it, or if the compiler refuses the
  flag, only 128-bit NEON vectors are used and ``vector_source`` says so.
- anything else: ``-march=native``, else ``-mcpu=native``, else no tuning flag at all (generic code, 128-bit
  vectors); ``vector_source`` records the fallback.

Pure functions of (machine, ISA flags, what the compiler accepts), so every architecture is unit-tested on one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

X86 = ("x86_64", "AMD64", "amd64", "i686", "i386")
ARM64 = ("aarch64", "arm64", "ARM64")
SVE_LENGTH_FILE = Path("/proc/sys/abi/sve_default_vector_length")


@dataclass(frozen=True)
class ArchFlags:
    """What to compile the kernel with: tuning flags, vector widths in bytes, and why."""

    flags: tuple[str, ...]
    widths: tuple[int, ...]
    vector_source: str


def sve_vector_bytes(path: Path = SVE_LENGTH_FILE) -> int | None:
    """The default SVE vector length in bytes (Linux), None when unknown."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) >= 16 else None


def select(machine: str, isa: Iterable[str], accepts: Callable[[str], bool],
           sve_bytes: int | None = None) -> ArchFlags:
    """Flags and widths for ``machine`` (``platform.machine()``) with ISA flags ``isa``; ``accepts(flag)``
    says whether the compiler takes a flag (probed by compiling an empty file)."""
    flags = set(isa)
    if machine in X86:
        widths = [16]
        if "avx" in flags:
            widths.append(32)
        if "avx512f" in flags:
            widths.append(64)
        if accepts("-march=native"):
            return ArchFlags(("-march=native",), tuple(widths), f"x86 ISA flags: {widths[-1] * 8}-bit")
        return ArchFlags((), (16,), "the compiler rejects -march=native: generic x86-64 code, 128-bit SSE2")
    if machine in ARM64:
        tune = next((f for f in ("-mcpu=native", "-march=native") if accepts(f)), None)
        base = (tune,) if tune else ()
        how = tune or "no -mcpu/-march=native accepted: generic aarch64 code"
        if "sve" in flags and sve_bytes in (32, 64):  # the kernel's generic vectors are 16, 32 or 64 bytes
            sve_flag = f"-msve-vector-bits={sve_bytes * 8}"
            if accepts(sve_flag):
                return ArchFlags((*base, sve_flag), (16, sve_bytes),
                                 f"{how}; NEON 128-bit and SVE {sve_bytes * 8}-bit")
            return ArchFlags(base, (16,), f"{how}; NEON 128-bit (the compiler rejects {sve_flag})")
        sve_note = ""
        if "sve" in flags:
            sve_note = (f"; SVE {sve_bytes * 8}-bit not among the kernel's widths (256, 512)" if sve_bytes
                        else "; SVE length unknown")
        return ArchFlags(base, (16,), f"{how}; NEON 128-bit{sve_note}")
    for flag in ("-march=native", "-mcpu=native"):
        if accepts(flag):
            return ArchFlags((flag,), (16,), f"{machine or 'unknown architecture'}: {flag}, 128-bit vectors")
    return ArchFlags((), (16,), f"{machine or 'unknown architecture'}: no native tuning flag accepted, "
                                "generic code, 128-bit vectors")
