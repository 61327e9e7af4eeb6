"""Machine fingerprint: what must stay the same for a cached characterization to stay true.

CPU: model, ISA flags that change the kernels, the cores this process may run on, memory size, the threads
torch and OpenMP will use, the C compiler. CUDA: GPU name, compute capability, clocks, memory, driver: the
roofs are per GPU model, not per GPU, so pytest-xdist workers that each see another GPU of the same model
(``CUDA_VISIBLE_DEVICES``, see ``host/gpus.py``) share one characterization, measured once under the lock.
Both: a hash of the measurement sources and the characterization version.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_roofline.characterize import CHARACTERIZATION_VERSION
from pytest_roofline.characterize.cache_sizes import os_cache_sizes
from pytest_roofline.record.machine_key import Fingerprint

PACKAGE_DIR = Path(__file__).resolve().parent

# Files whose content decides the measured numbers; editing (or renaming) any of them invalidates every cache and
# files every machine's history under a new machine key: leave them alone unless the numbers change.
MEASUREMENT_SOURCES = ("ert_kernel.c", "ert_kernel.cu", "cpu.py", "cpu_ert.py", "cuda_ert.py", "blas_probe.py",
                       "plateaus.py", "dram_samples.py", "build.py", "cuda.py", "cuda_roofs.py", "roof_kernels.cu")

# ISA features that change which kernel variants exist or how fast they run.
_RELEVANT_CPU_FLAGS = ("sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                       "avx512_fp16", "amx_bf16", "amx_fp16", "amx_tile", "asimd", "sve", "sve2")


def kernel_source_hash() -> str:
    digest = hashlib.sha256()
    for name in MEASUREMENT_SOURCES:
        path = PACKAGE_DIR / name
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"<absent>")
    return digest.hexdigest()[:16]


def _proc_cpuinfo() -> dict[str, str]:
    """The first processor block of /proc/cpuinfo (Linux); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    info = _proc_cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine() or "cpu"


def cpu_flags() -> list[str]:
    info = _proc_cpuinfo()
    present = set((info.get("flags") or info.get("Features") or "").split())
    return [flag for flag in _RELEVANT_CPU_FLAGS if flag in present]


def affinity_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def cpu_threads() -> int:
    """Threads the compiled kernels use: OMP_NUM_THREADS if set, else every core in the affinity set."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return len(affinity_cores())


def torch_threads() -> int | None:
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        return None
    import torch

    return int(torch.get_num_threads())


def cache_sizes() -> dict[str, int]:
    """Data/unified cache sizes per level as the OS reports them (bytes, per instance)."""
    return {f"L{level}": size for level, size in sorted(os_cache_sizes().items())}


def cpu_fingerprint() -> Fingerprint:
    from pytest_roofline.characterize.build import compiler_identity
    from pytest_roofline.host.allocator import thp_mode

    cores = affinity_cores()
    return {
        "device": "cpu",
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "isa": cpu_flags(),
        "cores": cores,
        "core_count": len(cores),
        "memory_bytes": memory_bytes(),
        "cache_sizes": cache_sizes(),
        "threads": cpu_threads(),
        "torch_threads": torch_threads(),
        "compiler": compiler_identity(),
        "transparent_huge_pages": thp_mode(),  # the ERT buffer sits on huge pages only where THP allows it
        "kernel_source_hash": kernel_source_hash(),
        "characterization_version": CHARACTERIZATION_VERSION,
    }


def cuda_fingerprint(device_index: int = 0) -> Fingerprint:
    import cupy

    runtime = cupy.cuda.runtime
    props = runtime.getDeviceProperties(device_index)
    name = props["name"]
    return {
        "device": f"cuda:{device_index}",
        "gpu_name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": int(props["multiProcessorCount"]),
        "clock_khz": int(props.get("clockRate", 0)),
        "memory_clock_khz": int(props.get("memoryClockRate", 0)),
        "memory_bytes": int(props["totalGlobalMem"]),
        "l2_bytes": int(props.get("l2CacheSize", 0)),
        "driver_version": int(runtime.driverGetVersion()),
        "runtime_version": int(runtime.runtimeGetVersion()),
        "kernel_source_hash": kernel_source_hash(),
        "characterization_version": CHARACTERIZATION_VERSION,
    }


def parse_device(device: str) -> tuple[str, int]:
    """'cpu' -> ('cpu', 0); 'cuda' / 'cuda:1' / 'gpu' -> ('cuda', index)."""
    text = device.strip().lower()
    if text == "cpu":
        return "cpu", 0
    kind, _, index = text.partition(":")
    if kind in ("cuda", "gpu") and (not index or index.isdigit()):
        return "cuda", int(index or 0)
    raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:N'")


def fingerprint(device: str = "cpu") -> Fingerprint:
    kind, index = parse_device(device)
    return cpu_fingerprint() if kind == "cpu" else cuda_fingerprint(index)


def fingerprint_hash(fields: Fingerprint) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def count_field(fields: Mapping[str, object], key: str, default: int = 0) -> int:
    """A count of the fingerprint (``threads``, ``memory_bytes``): ``default`` where it is missing or empty."""
    value = fields.get(key) or default
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"fingerprint field {key!r} is not a number: {value!r}")
    return int(value)


def isa_flags(fields: Mapping[str, object]) -> list[str]:
    """The fingerprint's ISA flags (``isa``; none where it has no such field)."""
    value = fields.get("isa") or ()
    if not isinstance(value, Iterable):
        raise TypeError(f"fingerprint field 'isa' is not a list of flags: {value!r}")
    return [str(flag) for flag in value]
