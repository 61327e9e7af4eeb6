"""Whether the machine has room for one more process pair (``ab.pool.TwinPool.grow``).

Every pair in a test holds that test's inputs at once (both twins run it up to the call site), so a pool of
twelve pairs holds 24 copies of a test's working set, and a CUDA context per twin on a GPU. A twin killed by the
kernel's out-of-memory killer, or one that cannot allocate on the device, costs that test its comparison (and the
OOM killer may pick the session itself). So a pair is added only while the host (and this job's memory
cgroup), and the device where this process uses CUDA, has twice what the biggest twin now holds for each of the
pair's two processes; otherwise the call site is judged on the pairs there are, and the summary says why.
Linux only (``/proc``); elsewhere the pool grows as asked.
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


def _stat_value(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def cgroup_room(proc: Path = Path("/proc"), cgroup_fs: Path = Path("/sys/fs/cgroup")) -> int | None:
    """What this process's memory cgroup (a container, a CI job's slice) still allows: its limit less its use
    (less the inactive page cache, which the kernel reclaims first), the tightest level for cgroup v2; None where
    no limit is set or it cannot be read. A container's OOM killer acts on this, not on the host's MemAvailable."""
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        parts = [p for p in path.strip().split("/") if p]
        if hierarchy == "0" and controllers == "":  # cgroup v2: every level up to the mount's root
            for depth in range(len(parts), -1, -1):
                level = cgroup_fs.joinpath(*parts[:depth])
                try:
                    limit = (level / "memory.max").read_text().strip()
                    used = int((level / "memory.current").read_text())
                except (OSError, ValueError):
                    continue
                if limit.isdigit():
                    rooms.append(int(limit) - used + _stat_value(level / "memory.stat", "inactive_file"))
        elif "memory" in controllers.split(","):  # cgroup v1: its own group
            level = cgroup_fs.joinpath("memory", *parts)
            try:
                limit_v1 = int((level / "memory.limit_in_bytes").read_text())
                used = int((level / "memory.usage_in_bytes").read_text())
            except (OSError, ValueError):
                continue
            if limit_v1 < 1 << 60:  # v1 says "no limit" with a number near 2**63
                rooms.append(limit_v1 - used + _stat_value(level / "memory.stat", "total_inactive_file"))
    return max(0, min(rooms)) if rooms else None


def private_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """What a process holds alone (private pages and swap): pages it shares with others (the interpreter's
    and libraries' mapped files) are not what one more twin would take."""
    try:
        text = (proc / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    total = 0
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Private_Clean", "Private_Dirty", "SwapPss"):  # shared swap counted in proportion
            try:
                total += int(rest.split()[0]) * 1024
            except (ValueError, IndexError):
                return None
    return total


def host_shortfall(pids: Sequence[int], proc: Path = Path("/proc"),
                   cgroup_fs: Path = Path("/sys/fs/cgroup")) -> str | None:
    """Why the host (or this process's memory cgroup) has no room for one more pair of twins like ``pids``; None
    when it has, or cannot tell."""
    rooms = {"the host has": meminfo_available(proc),
             "this job's memory cgroup allows": cgroup_room(proc, cgroup_fs)}
    known = {where: room for where, room in rooms.items() if room is not None}
    if not known:
        return None
    held = [b for b in (private_bytes(pid, proc) for pid in pids) if b is not None]
    if not held:
        return None
    where, available = min(known.items(), key=lambda item: item[1])
    need = 2 * HEADROOM * max(held)
    if available >= need:
        return None
    return (f"{where} {available / GIB:.1f} GiB available, and a pair needs about {need / GIB:.1f} GiB "
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
        own = torch.cuda.memory_reserved()
    except Exception:  # noqa: BLE001 - no answer from the device: the pool grows as asked
        return None
    return device_text(int(free), int(total), int(own), twins)


def device_text(free: int, total: int, own: int, twins: int) -> str | None:
    """The device's answer: what is in use beyond this process's own reserve, shared out over the twins, is one
    twin's at most (other jobs on the device count as twins' here: an upper estimate)."""
    per_twin = max(0, total - free - own) / twins
    need = 2 * HEADROOM * per_twin
    if free >= need:
        return None
    return (f"the GPU has {free / GIB:.1f} GiB free, and a pair needs up to {need / GIB:.1f} GiB (its two twins, "
            f"each twice the {per_twin / GIB:.1f} GiB a twin holds there now at most)")


def shortfall(pids: Sequence[int]) -> str | None:
    """Why no further pair should start now; None when one may."""
    return host_shortfall(pids) or device_shortfall(len(pids))
