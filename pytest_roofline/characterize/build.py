"""Compile the C kernel at run time into a shared library, cached by source hash + compiler + flags."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

from pytest_roofline.errors import BuildError

# The architecture's tuning flag (-march=native / -mcpu=native) comes from characterize/arch.py.
BASE_FLAGS = ("-O3", "-fopenmp", "-fPIC", "-shared", "-std=c11", "-ffp-contract=fast",
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


def build_shared_library(source: Path, defines: dict[str, str | int], extra_flags: tuple[str, ...],
                         build_dir: Path) -> Path:
    """Compile ``source`` once per (source, compiler, flags, defines); later calls reuse the .so."""
    return build_shared_libraries(source, [defines], extra_flags, build_dir)[0]


def build_shared_libraries(source: Path, variants: list[dict[str, str | int]], extra_flags: tuple[str, ...],
                           build_dir: Path) -> list[Path]:
    """One library per set of defines, compiled concurrently; each cached by source + compiler + flags."""
    compiler = find_compiler()
    if compiler is None:
        raise BuildError("no C compiler found (set $CC or install gcc/clang)")
    flags = [f for f in (*BASE_FLAGS, *extra_flags)
             if f != "-fno-loop-unroll-and-jam" or _accepts_flag(compiler, f)]  # clang lacks this gcc pass
    text = source.read_text()
    targets: list[Path] = []
    pending: list[tuple[list[str], Path, Path, subprocess.Popen[str]]] = []
    build_dir.mkdir(parents=True, exist_ok=True)
    for defines in variants:
        all_flags = [*flags, *(f"-D{k}={v}" for k, v in sorted(defines.items()))]
        key = hashlib.sha256("\0".join([text, compiler_identity() or compiler, *all_flags]).encode())
        target = build_dir / f"{source.stem}-{key.hexdigest()[:16]}.so"
        targets.append(target)
        if target.exists():
            continue
        # Compile to a private name, then rename: a concurrent reader never loads half a library.
        tmp = build_dir / f".{target.name}.{os.getpid()}.tmp"
        command = [compiler, *all_flags, str(source), "-o", str(tmp)]
        try:
            process = _start_in_own_group(command)
        except OSError as error:
            _kill_groups(p for *_, p in pending)
            raise BuildError(f"running {compiler} failed: {error}") from error
        pending.append((command, tmp, target, process))
    failures = []
    try:
        for command, tmp, target, process in pending:
            try:
                _, stderr = process.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                _kill_groups([process])
                process.communicate()
                stderr = "timed out after 180 s"
            if process.returncode == 0:
                os.replace(tmp, target)
            else:
                tmp.unlink(missing_ok=True)
                failures.append(f"{' '.join(command)}\n{stderr.strip()[-2000:]}")
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM turned into an exception, an error): the compilers and their cc1/as/ld
        # children run in their own process groups, so they do not outlive us; their temp files go too.
        _kill_groups(p for *_, p in pending)
        for _, tmp, _, _ in pending:
            tmp.unlink(missing_ok=True)
        raise
    if failures:
        raise BuildError("\n".join(failures))
    return targets


def _start_in_own_group(command: list[str]) -> subprocess.Popen[str]:
    """Start the compiler as the leader of a new process group, so the whole tree (cc1, as, ld) can be killed
    at once. No preexec_fn (PR_SET_PDEATHSIG): Python code between fork and exec can deadlock in a process
    with other threads (torch's pools run during characterization); a compiler orphaned by a SIGKILL of the
    session ends when its compile does."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _kill_groups(processes: Iterable[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def accepts_flag(compiler: str, flag: str) -> bool:
    """Whether ``compiler`` compiles an empty C file with ``flag``."""
    return _accepts_flag(compiler, flag)


@functools.cache
def _accepts_flag(compiler: str, flag: str) -> bool:
    try:
        result = subprocess.run([compiler, flag, "-x", "c", "-c", "-o", os.devnull, "-"], input="int x;\n",
                                capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0
