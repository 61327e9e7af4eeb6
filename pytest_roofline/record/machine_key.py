"""The machine key of a history file: a readable, file-safe name plus 8 hex of the machine's fingerprint hash.

A characterized machine carries its fingerprint hash (``info.fingerprint_hash``); pinned ceilings have none, so
their roofs themselves are hashed: two sessions with the same pinned file share a key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import TypedDict


class Fingerprint(TypedDict, total=False):
    """What identifies a machine's characterization (``characterize.fingerprint``): its hash names the cache
    entry and the machine key. A CPU's fields or a GPU's; a core count's record adds ``measured_on_cores``."""

    device: str  # cpu, cuda:N
    kernel_source_hash: str
    characterization_version: int
    memory_bytes: int | None
    # a CPU's
    cpu_model: str
    machine: str  # platform.machine()
    isa: list[str]
    cores: list[int]
    core_count: int
    cache_sizes: dict[str, int]
    threads: int
    torch_threads: int | None
    compiler: str | None
    transparent_huge_pages: str | None
    measured_on_cores: int
    # a GPU's
    gpu_name: str
    compute_capability: str
    multiprocessors: int
    clock_khz: int
    memory_clock_khz: int
    l2_bytes: int
    driver_version: int
    runtime_version: int


UNKNOWN_KEY = "unknown-00000000"
_UNSAFE = re.compile(r"[^a-z0-9]+")


def fingerprint_of(machine: Mapping[str, object]) -> str:
    """The full fingerprint hash of a machine dict (``Machine.to_dict()``)."""
    info = machine.get("info")
    found = info.get("fingerprint_hash") if isinstance(info, Mapping) else None
    if found:
        return str(found)
    roofs = {"name": machine.get("name"), "peak_flops": machine.get("peak_flops") or {},
             "bandwidth": machine.get("bandwidth") or {}}
    return hashlib.sha256(json.dumps(roofs, sort_keys=True, default=str).encode()).hexdigest()


def readable_name(name: str, limit: int = 40) -> str:
    """``AMD EPYC 9R14 (2 cores)`` -> ``amd-epyc-9r14-2-cores``: lower case, ``[a-z0-9-]`` only, bounded."""
    text = _UNSAFE.sub("-", name.lower()).strip("-")[:limit].rstrip("-")
    return text or "machine"


def machine_key(machine: Mapping[str, object] | None) -> str:
    if not machine:
        return UNKNOWN_KEY
    digest = hashlib.sha256(fingerprint_of(machine).encode()).hexdigest()[:8]
    return f"{readable_name(str(machine.get('name') or 'machine'))}-{digest}"
