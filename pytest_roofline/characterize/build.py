"""Compile the C kernel at run time into a shared library, cached by source hash + compiler + flags."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c11", "-ffp-contract=fast",
              # gcc's unroll-and-jam fuses two trials into one memory pass and doubles low-intensity
              # bandwidth; every trial must stay a separate pass over memory.
              "-fno-loop-unroll-and-jam")


@functools.cache
def find_compiler() -> str | None:
    """$CC if set, else the first of cc, gcc, clang on PATH."""
    candidates = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    return None


@functools.cache
def compiler_identity() -> str | None:
    """First line of ``<cc> --version`` (e.g. 'gcc (Debian 12.2.0-14) 12.2.0'); None without a compiler."""
    compiler = find_compiler()
    if compiler is None:
        return None
    try:
        result = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    first = (result.stdout or result.stderr).strip().splitlines()
    return first[0] if result.returncode == 0 and first else None


class BuildError(RuntimeError):
    """The C compiler is missing or rejected the kernel."""


def build_shared_library(source: Path, defines: dict[str, str | int], extra_flags: tuple[str, ...],
                         build_dir: Path) -> Path:
    """Compile ``source`` once per (source, compiler, flags, defines); later calls reuse the .so."""
    compiler = find_compiler()
    if compiler is None:
        raise BuildError("no C compiler found (set $CC or install gcc/clang)")
    flags = [*BASE_FLAGS, *extra_flags, *(f"-D{k}={v}" for k, v in sorted(defines.items()))]
    key = hashlib.sha256("\0".join([source.read_text(), compiler_identity() or compiler, *flags]).encode())
    target = build_dir / f"{source.stem}-{key.hexdigest()[:16]}.so"
    if target.exists():
        return target
    build_dir.mkdir(parents=True, exist_ok=True)
    # Compile to a private name, then rename: a concurrent reader never loads half a library.
    tmp = build_dir / f".{target.name}.{os.getpid()}.tmp"
    command = [compiler, *flags, str(source), "-o", str(tmp)]
    if "-fno-loop-unroll-and-jam" in flags and not _accepts_flag(compiler, "-fno-loop-unroll-and-jam"):
        command.remove("-fno-loop-unroll-and-jam")  # clang has no such pass and rejects the flag
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        raise BuildError(f"running {compiler} failed: {error}") from error
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"{' '.join(command)}\n{result.stderr.strip()[-2000:]}")
    os.replace(tmp, target)
    return target


@functools.cache
def _accepts_flag(compiler: str, flag: str) -> bool:
    try:
        result = subprocess.run([compiler, flag, "-x", "c", "-c", "-o", os.devnull, "-"], input="int x;\n",
                                capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0
