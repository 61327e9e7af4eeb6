"""Whether the machine has room for one more process pair (``compare.pool.TwinPool.grow``).

Every pair in a test holds that test's inputs at once (both twins run it up to the call site), so a pool of
twelve pairs holds 24 copies of a test's working set, and a CUDA context per twin on a GPU. A twin killed by the
kernel's out-of-memory killer, or one that cannot allocate on the device, costs that test its comparison (and the
OOM killer may pick the session itself). So a pair is added only while the host, and the device where this
process uses CUDA, has twice what the biggest twin now holds for each of the pair's two processes; otherwise
the call site is judged on the pairs there are, and the summary says why. Linux only (``/proc``); elsewhere the
pool grows as asked.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

HEADROOM = 2.0  # twice a twin's present memory per new twin: a test's later call sites may hold more than now
GIB = 1024 ** 3


def meminfo_available(proc: Path = Path("/proc")) -> int | None:
    """The host's MemAvailable in bytes; None where it cannot be read."""
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def private_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """What a process holds alone (private pages and swap): a twin forked from the zygote shares its imports,
    so its resident size would count torch once per twin."""
    try:
        text = (proc / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    total = 0
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Private_Clean", "Private_Dirty", "Swap"):
            try:
                total += int(rest.split()[0]) * 1024
            except (ValueError, IndexError):
                return None
    return total


def host_shortfall(pids: Sequence[int], proc: Path = Path("/proc")) -> str | None:
    """Why the host has no room for one more pair of twins like ``pids``; None when it has (or cannot tell)."""
    available = meminfo_available(proc)
    held = [b for b in (private_bytes(pid, proc) for pid in pids) if b is not None]
    if available is None or not held:
        return None
    need = 2 * HEADROOM * max(held)
    if available >= need:
        return None
    return (f"the host has {available / GIB:.1f} GiB available, and a pair needs about {need / GIB:.1f} GiB "
            f"(its two twins, each twice the {max(held) / GIB:.1f} GiB the biggest twin holds now)")


def device_shortfall(twins: int) -> str | None:
    """Why the current CUDA device has no room for one more pair; None when it has, or where this process does not
    use CUDA (no torch import here: only a torch this session already imported and initialized is asked)."""
    torch = sys.modules.get("torch")
    if torch is None or twins <= 0:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        free, total = torch.cuda.mem_get_info()
    except Exception:  # noqa: BLE001 - no answer from the device: the pool grows as asked
        return None
    return device_text(int(free), int(total), twins)


def device_text(free: int, total: int, twins: int) -> str | None:
    """The device's answer: the memory in use, shared out over the twins and this process, is one twin's."""
    per_twin = (total - free) / (twins + 1)
    need = 2 * HEADROOM * per_twin
    if free >= need:
        return None
    return (f"the GPU has {free / GIB:.1f} GiB free, and a pair needs about {need / GIB:.1f} GiB (its two twins, "
            f"each twice the {per_twin / GIB:.1f} GiB a process holds there now)")


def shortfall(pids: Sequence[int]) -> str | None:
    """Why no further pair should start now; None when one may."""
    return host_shortfall(pids) or device_shortfall(len(pids))
