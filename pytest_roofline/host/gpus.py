"""One GPU per pytest-xdist worker on a machine with several: ``CUDA_VISIBLE_DEVICES`` from the worker index.

Plain Python, no torch: the variable must be set before anything initializes CUDA (the CUDA runtime reads it
once, at its initialization), so the GPUs are counted from the NVIDIA driver's ``/proc`` entries, or from
``nvidia-smi -L`` when those are absent, and the plugin sets it while pytest loads the first conftests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path

VISIBLE = "CUDA_VISIBLE_DEVICES"
PROC_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU (its PCI address) while the driver is loaded


def count_gpus(proc: Path = PROC_GPUS, smi: Callable[[], str | None] | None = None) -> int:
    """NVIDIA GPUs on this machine, whatever ``CUDA_VISIBLE_DEVICES`` says; 0 when none can be seen."""
    try:
        found = sum(1 for entry in proc.iterdir() if entry.is_dir())
    except OSError:
        found = 0
    if found:
        return found
    listing = (smi or _nvidia_smi_list)()
    return sum(1 for line in (listing or "").splitlines() if re.match(r"GPU \d+:", line.strip()))


def _nvidia_smi_list() -> str | None:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def worker_index(worker_id: str | None) -> int | None:
    """``gw3`` -> 3; None for anything that is not an xdist worker id."""
    match = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(match.group(1)) if match else None


def gpu_for_worker(worker_id: str | None, gpu_count: int, visible: str | None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` value for an xdist worker, or None to leave the environment alone: only on a
    machine with two or more GPUs, and never when the user set the variable (their choice wins). Worker ``gwI``
    gets GPU ``I mod count``, so with more workers than GPUs they share round-robin."""
    index = worker_index(worker_id)
    if index is None or gpu_count < 2 or visible is not None:
        return None
    return str(index % gpu_count)


def assign_worker_gpu(environ: MutableMapping[str, str] | None = None,
                      gpu_count: Callable[[], int] = count_gpus) -> str | None:
    """Set ``CUDA_VISIBLE_DEVICES`` for this xdist worker (see :func:`gpu_for_worker`); return the value set.
    The GPUs are counted only inside a worker whose variable is unset, so other processes pay nothing."""
    env: MutableMapping[str, str] = os.environ if environ is None else environ
    worker = env.get("PYTEST_XDIST_WORKER")
    if worker_index(worker) is None or VISIBLE in env:
        return None
    value = gpu_for_worker(worker, gpu_count(), None)
    if value is not None:
        env[VISIBLE] = value
    return value


def assignment_note(environ: Mapping[str, str], assigned: str | None) -> dict[str, str | None]:
    """What a worker's records say about its GPU: its id, the variable's value and who chose it."""
    return {"worker": environ.get("PYTEST_XDIST_WORKER"), "cuda_visible_devices": environ.get(VISIBLE),
            "gpu_set_by": "pytest-roofline" if assigned is not None else None}
