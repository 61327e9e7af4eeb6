"""Cache sizes as the operating system reports them."""

from __future__ import annotations

from pathlib import Path

_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def _parse_size(text: str) -> int:
    """'48K' / '2048K' / '105M' -> bytes."""
    text = text.strip().upper()
    factor = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * factor


def os_cache_sizes() -> dict[int, int]:
    """{level: bytes per instance} for data and unified caches of CPU 0 (Linux sysfs); empty when unknown."""
    sizes: dict[int, int] = {}
    if not _SYSFS_CACHE.is_dir():
        return sizes
    for index in sorted(_SYSFS_CACHE.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            sizes[level] = size
    return sizes


def os_cache_sharing() -> dict[int, int]:
    """{level: number of CPUs sharing one instance}; lets the sweep know how much cache all threads have."""
    sharing: dict[int, int] = {}
    if not _SYSFS_CACHE.is_dir():
        return sharing
    for index in sorted(_SYSFS_CACHE.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            cpus = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            sharing[level] = _count_cpu_list(cpus)
    return sharing


def _count_cpu_list(text: str) -> int:
    count = 0
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count
