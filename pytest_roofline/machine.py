"""Public entry points for machine ceilings: measure (and cache) them, or read them from a pinned file.

    machine = characterize("cpu")              # measured once per machine fingerprint, then cached
    machine = load_machine_file("box.toml")    # ceilings written down by hand

Units are SI: ``peak_flops`` in FLOP/s, ``bandwidth`` in bytes/s (bytes as the kernel requests them).
Level names: ``L1``, ``L2``, ``L3``, ``DRAM`` on CPUs and ``L1``, ``L2``, ``HBM`` on GPUs. Precisions:
``fp64``, ``fp32``, ``bf16``, ``fp16``, ``tf32``, ``fp8``; GPU GEMM (Tensor Core) ceilings carry a
``_tensor`` suffix (``fp16_tensor``). ``Machine.info`` records where each roof came from
(``info["sources"]``), the threads, the fingerprint, the seconds taken and the date.

How the CPU is measured (``info["method"] == "ert"``): an ERT-style C/OpenMP kernel compiled at run time
(``characterize/ert_kernel.c``; one library per vector width, cached under ``<cache>/build``) sweeps
working sets from 4 KiB per thread to 4x the last-level cache with an in-place update (1 FLOP, 1 read +
1 write per element) and a triad; each level's roof is the fastest plateau value that at least three
sweep points corroborate inside a window derived from the OS cache sizes (``info["levels"]``). fp64/fp32
peaks come from the same kernel at 1..1024 FLOPs per element with 16 independent FMA chains, per vector
width (``info["isa_peaks"]``); bf16/fp16 roofs, and every GEMM ceiling in ``info["gemm_flops"]``, from the
best numpy/torch GEMM. Raw sweeps are in ``info["sweep"]``. Without a C compiler the roofs come from
numpy/torch alone (``info["method"] == "blas-fallback"``: DRAM and GEMM peaks only). Calls in which a
thread was descheduled by other work are discarded; if too many sweep points had no clean call,
``info["disturbed"]`` says so, a warning is issued and the result is reused for 10 minutes only.
CUDA (``device="cuda"``) uses NVRTC kernels and cuBLAS GEMM (``<precision>_tensor`` roofs); that path is
unverified on hardware.

The cache lives in ``$PYTEST_ROOFLINE_CACHE`` or ``~/.cache/pytest-roofline``: one JSON file per
fingerprint, written atomically. Concurrent processes (pytest-xdist workers) serialise on a file lock, so
one measures and the others read its result.
"""

from __future__ import annotations

import datetime as _dt
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_roofline.characterize import cache as _cache
from pytest_roofline.characterize.fingerprint import fingerprint, fingerprint_hash, parse_device
from pytest_roofline.characterize.pinned import load_machine_file
from pytest_roofline.model import Machine

__all__ = ["cache_file_for", "characterize", "default_cache_dir", "fingerprint", "fingerprint_hash",
           "load_machine_file"]

default_cache_dir = _cache.default_cache_dir

# A characterization disturbed by other work (see ``info["disturbed"]``) is reused only this long: enough
# for the other workers of the same test session, not for the next session, which measures again.
DISTURBED_REUSE_SECONDS = 600.0


class DisturbedCharacterizationWarning(UserWarning):
    """Other work on the machine kept the characterization from measuring undisturbed: roofs may be low."""


def _silent(_: str) -> None:
    pass


def cache_file_for(device: str = "cpu", cache_dir: Path | None = None) -> Path:
    """Where the characterization of ``device`` on this machine is (or would be) cached."""
    kind, _ = parse_device(device)
    return _cache.cache_path(Path(cache_dir) if cache_dir else default_cache_dir(), kind,
                             fingerprint_hash(fingerprint(device)))


def characterize(device: str = "cpu", *, fresh: bool = False, cache_dir: Path | None = None,
                 progress: Callable[[str], None] | None = None, cores: int | None = None) -> Machine:
    """Measured ceilings of ``device`` ('cpu', 'cuda', 'cuda:N'), from the cache when it is valid.

    ``cores=N`` (CPU only): the roofs of N of the process's cores, measured pinned to the N least loaded ones
    with N threads, cached apart from the other core counts (see :mod:`pytest_roofline.cores`).

    ``fresh=True`` ignores the cache and replaces it; if another process finishes a characterization while
    this one waits for the lock, that fresh result is used instead of measuring twice.
    """
    report = progress or _silent
    kind, index = parse_device(device)
    fields = fingerprint(device)
    if cores is not None and kind == "cpu":
        from pytest_roofline.cores import base_affinity, core_count_fingerprint

        fields = core_count_fingerprint(fields, cores, base_affinity())
    digest = fingerprint_hash(fields)
    path = _cache.cache_path(Path(cache_dir) if cache_dir else default_cache_dir(), kind, digest)

    state_before = _cache.file_state(path)
    if not fresh:
        cached = _cache.read_cached(path, fields)
        if cached is not None and _still_usable(cached, report):
            return cached
    with _cache.exclusive_lock(path.with_suffix(".lock")):
        state_now = _cache.file_state(path)
        if state_now is not None and state_now != state_before:
            # Another process wrote a result while we waited for the lock: use it.
            cached = _cache.read_cached(path, fields)
            if cached is not None and _still_usable(cached, report):
                report(f"using the characterization another process just wrote to {path}")
                return cached
        with _on_cores(cores if kind == "cpu" else None):
            machine = _measure(kind, index, fields, digest, report, path.parent)
        _cache.write_cached(path, fields, machine)
        report(f"cached in {path}")
    if machine.info.get("disturbed"):
        warnings.warn(f"pytest-roofline: other work disturbed the characterization of {device} "
                      f"({machine.info.get('disturbed')}); its roofs may be low. It is reused for "
                      f"{DISTURBED_REUSE_SECONDS:.0f} s, then measured again.", DisturbedCharacterizationWarning,
                      stacklevel=2)
    return machine


def _on_cores(count: int | None) -> Any:
    """Pinned to the ``count`` least loaded cores of this process, thread pools sized to match."""
    from contextlib import nullcontext

    if count is None:
        return nullcontext()
    from pytest_roofline import cores

    allowed = cores.current_affinity()
    return cores.pinned(cores.least_loaded(min(count, len(allowed)), allowed, cores.sample_load()))


def _still_usable(machine: Machine, report: Callable[[str], None]) -> bool:
    """A disturbed characterization is only reused shortly after it was measured."""
    if not machine.info.get("disturbed"):
        return True
    try:
        measured = _dt.datetime.fromisoformat(str(machine.info.get("date")))
        age = (_dt.datetime.now(_dt.timezone.utc) - measured).total_seconds()
    except (TypeError, ValueError):
        age = float("inf")
    if 0 <= age < DISTURBED_REUSE_SECONDS:
        return True
    report("the cached characterization was disturbed by other work; measuring again")
    return False


def _measure(kind: str, index: int, fields: dict[str, Any], digest: str, report: Callable[[str], None],
             cache_dir: Path) -> Machine:
    start = time.perf_counter()
    report(f"characterizing {kind}{'' if kind == 'cpu' else f':{index}'} (fingerprint {digest})")
    if kind == "cpu":
        from pytest_roofline.characterize.cpu import characterize_cpu

        machine = characterize_cpu(fields, report, build_dir=cache_dir / "build")
    else:
        from pytest_roofline.characterize.cuda import characterize_cuda

        machine = characterize_cuda(index, fields, report)
    seconds = time.perf_counter() - start
    report(f"done in {seconds:.1f} s")
    info = {**machine.info, "device": fields["device"], "fingerprint": fields, "fingerprint_hash": digest,
            "seconds": seconds, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    return Machine(name=machine.name, peak_flops=machine.peak_flops, bandwidth=machine.bandwidth, info=info)
