"""Cores of its own: measure on the cores nobody else is using, judged against roofs for that many cores.

Plain Python (no pytest, no torch import of its own), usable from a script:

    setting = parse_cores("auto", "--roofline-cores")
    placement = choose(setting, allowed=base_affinity(), load=sample_load())
    with pinned(placement.used):          # every thread of the process, the thread pools sized to match
        ...time the call...
    machine = interpolate(roofs_by_count, placement.count)

- ``auto`` measures on a fixed number of cores, half the machine's (at least one, at most an xdist worker's
  share; ``auto_count``), chosen among the free ones at each call site: a count that does not change with the
  load keeps a test's fraction comparable between quiet and busy sessions (work that runs on one thread
  whatever the pool size would otherwise read twice as high whenever a neighbour took the other core).
- Load per core comes from ``/proc/stat`` read twice a short window apart (the share of each core's ticks not
  idle); a core is *free* when less than ``FREE_BELOW`` of it was busy.
- ``pinned`` moves every thread of this process (``os.sched_setaffinity`` on each task id; the call on pid 0
  moves only the calling thread) and sets torch's intra-op threads and, through ``threadpoolctl`` when it is
  installed, the BLAS/OpenMP pools to the core count; everything is restored on exit.
- Roofs are characterized at 1 core, at powers of two between, and at all cores (``counts_to_measure``);
  a core count between two measured ones gets each roof linearly interpolated in the core count
  (``interpolate``).
- ``Planner.scope()`` is the one place a measurement is placed: anything run inside it (the timed rounds,
  and a live roof probe timed between them) runs on the same cores with the same thread pools.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from pytest_roofline.errors import CoresSettingError
from pytest_roofline.model import Machine
from pytest_roofline.record.machine_key import Fingerprint

MODES = ("auto", "all")
FREE_BELOW = 0.5        # busy share under which a core counts as free (ticks are 10 ms: 0.1 s gives 10 per core)
LOAD_WINDOW_S = 0.1     # how long /proc/stat is watched before a measurement
SETTLE_S = 0.02         # let our own OpenMP threads stop spinning after the test's setup before watching


@dataclass(frozen=True)
class CoresSetting:
    """``auto`` (half the machine's cores, the free ones now), ``all``, a count (the least loaded N) or an
    explicit list of cores."""

    mode: str                           # "auto", "all", "count" or "list"
    count: int | None = None
    cores: tuple[int, ...] = ()

    def __str__(self) -> str:
        if self.mode == "count":
            return str(self.count)
        if self.mode == "list":
            return ",".join(map(str, self.cores))
        return self.mode


def parse_cores(value: object, where: str = "--roofline-cores") -> CoresSetting:
    """``auto``, ``all``, ``N`` (a positive count) or ``LIST`` (``0,2`` or ranges ``0-3,8``; one core: ``5-5``)."""
    text = str(value).strip().lower()
    accepted = "auto, all, a number of cores N (e.g. 2) or a list of core ids (e.g. 0,1 or 0-3,8)"
    if text in MODES:
        return CoresSetting(text)
    if text.isdigit():
        if int(text) < 1:
            raise CoresSettingError(f"{where} must be {accepted}; got {value!r} (a count is at least 1; "
                                    "core 0 alone is written 0-0)")
        return CoresSetting("count", count=int(text))
    cores: list[int] = []
    try:
        for part in text.split(","):
            first, dash, last = part.strip().partition("-")
            low, high = int(first), int(last) if dash else int(first)
            if low < 0 or high < low:
                raise ValueError(part)
            cores.extend(range(low, high + 1))
    except ValueError:
        raise CoresSettingError(f"{where} must be {accepted}; got {value!r}") from None
    return CoresSetting("list", cores=tuple(sorted(set(cores))))


# --- load per core --------------------------------------------------------------------------------------

def parse_proc_stat(text: str) -> dict[int, tuple[int, int]]:
    """Per core: (busy ticks, total ticks) from the ``cpuN`` lines of /proc/stat (idle and iowait are idle)."""
    out: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        name, *values = line.split()
        if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
            continue
        ticks = [int(v) for v in values[:8]]  # user nice system idle iowait irq softirq steal
        total = sum(ticks)
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        out[int(name[3:])] = (total - idle, total)
    return out


def busy_shares(before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]]) -> dict[int, float]:
    """Share of each core's ticks that were busy between two /proc/stat readings (0 for a core with no ticks)."""
    shares: dict[int, float] = {}
    for core, (busy, total) in after.items():
        busy0, total0 = before.get(core, (busy, total))
        elapsed = total - total0
        shares[core] = min(1.0, max(0.0, (busy - busy0) / elapsed)) if elapsed > 0 else 0.0
    return shares


def read_proc_stat() -> str | None:
    try:
        return Path("/proc/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def parse_task_stat(text: str) -> tuple[int, int]:
    """(utime + stime ticks, the core it last ran on) from one ``/proc/<pid>/task/<tid>/stat`` line."""
    fields = text[text.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    return int(fields[11]) + int(fields[12]), int(fields[36])


def read_own_threads() -> dict[int, str]:
    """The stat line of each thread of this process (empty where /proc is missing)."""
    out: dict[int, str] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        with contextlib.suppress(OSError):
            out[int(tid)] = Path(f"/proc/self/task/{tid}/stat").read_text(encoding="ascii", errors="replace")
    return out


def own_ticks(before: Mapping[int, str], after: Mapping[int, str]) -> dict[int, int]:
    """Ticks this process's own threads ran between two readings, per core they ran on last: pool threads
    that still spin after the test's setup (OpenBLAS, OpenMP) must not make their core look taken."""
    out: dict[int, int] = {}
    for tid, text in after.items():
        try:
            ticks, core = parse_task_stat(text)
            ticks0 = parse_task_stat(before[tid])[0] if tid in before else ticks
        except (ValueError, IndexError):
            continue
        if ticks > ticks0:
            out[core] = out.get(core, 0) + ticks - ticks0
    return out


def sample_load(window_s: float = LOAD_WINDOW_S, read: Callable[[], str | None] = read_proc_stat,
                sleep: Callable[[float], None] = time.sleep,
                read_own: Callable[[], Mapping[int, str]] = read_own_threads) -> dict[int, float] | None:
    """Busy share per core over ``window_s``, this process's own threads left out (None where /proc/stat
    cannot be read: not Linux)."""
    sleep(SETTLE_S)
    own_first, first = read_own(), read()
    if first is None:
        return None
    sleep(window_s)
    second, own_second = read(), read_own()
    if second is None:
        return None
    before, after = parse_proc_stat(first), parse_proc_stat(second)
    for core, ticks in own_ticks(own_first, own_second).items():
        if core in after:
            busy, total = after[core]
            after[core] = (max(before.get(core, (0, 0))[0], busy - ticks), total)
    return busy_shares(before, after)


# --- which cores ---------------------------------------------------------------------------------------

def base_affinity(_cache: list[list[int]] = []) -> list[int]:  # noqa: B006 - remembered on first call
    """The cores this process could run on before anything here pinned it (read once, then remembered)."""
    if not _cache:
        _cache.append(sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else list(range(os.cpu_count() or 1)))
    return list(_cache[0])


def worker_share(cores: Sequence[int], index: int, workers: int) -> list[int]:
    """The disjoint slice of ``cores`` for xdist worker ``index`` of ``workers`` (contiguous, sizes differ by at
    most one); with more workers than cores, workers share single cores round-robin."""
    cores = sorted(cores)
    if workers <= 1:
        return cores
    if workers > len(cores):
        return [cores[index % len(cores)]]
    return cores[index * len(cores) // workers:(index + 1) * len(cores) // workers]


def xdist_worker(environ: Mapping[str, str] = os.environ) -> tuple[int, int] | None:
    """(worker index, worker count) inside a pytest-xdist worker (``gw3`` of 4), else None."""
    name, count = environ.get("PYTEST_XDIST_WORKER", ""), environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if name.startswith("gw") and name[2:].isdigit() and count.isdigit() and int(count) > 0:
        return int(name[2:]), int(count)
    return None


class GpuProcess(TypedDict):
    """Another process on the same GPU, as NVML lists it."""

    pid: int
    kind: str  # compute or graphics
    memory_bytes: int | None


def _gpu_process(value: object) -> GpuProcess | None:
    """A recorded neighbour read back (None for anything but an object with an integer pid)."""
    if not isinstance(value, Mapping) or not isinstance(pid := value.get("pid"), int):
        return None
    memory = value.get("memory_bytes")
    return GpuProcess(pid=pid, kind=str(value.get("kind") or ""),
                      memory_bytes=memory if isinstance(memory, int) else None)


class _PlacementBase(TypedDict):
    used: list[int]
    of: list[int]  # the cores it could have used
    count: int
    setting: str
    contended: bool
    load: dict[str, float]  # core -> busy share just before measuring
    load_beside: float | None
    load_on: float | None


class PlacementDict(_PlacementBase, total=False):
    """A call site's ``cores`` in results.json."""

    gpu_processes: list[GpuProcess]


@dataclass(frozen=True)
class Placement:
    """Where one call site was measured: the cores used, out of which, and the load seen on each."""

    used: tuple[int, ...]
    allowed: tuple[int, ...]
    load: Mapping[int, float] = field(default_factory=dict)   # busy share per core just before measuring
    contended: bool = False
    setting: str = "auto"
    gpu_processes: tuple[GpuProcess, ...] = ()      # other processes on the same GPU (NVML)

    @property
    def count(self) -> int:
        return len(self.used)

    @property
    def load_beside(self) -> float | None:
        """The busiest core among those not used (None when all were used)."""
        beside = [self.load[c] for c in self.allowed if c not in self.used and c in self.load]
        return max(beside) if beside else None

    @property
    def load_on(self) -> float | None:
        """The busiest of the cores used, as seen before measuring."""
        on = [self.load[c] for c in self.used if c in self.load]
        return max(on) if on else None

    def to_dict(self) -> PlacementDict:
        out: PlacementDict = {"used": list(self.used), "of": list(self.allowed), "count": self.count,
                                  "setting": self.setting, "contended": self.contended,
                                  "load": {str(c): round(v, 3) for c, v in sorted(self.load.items())},
                                  "load_beside": self.load_beside, "load_on": self.load_on}
        if self.gpu_processes:
            out["gpu_processes"] = [p.copy() for p in self.gpu_processes]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Placement:  # parsed JSON, read back as to_dict wrote it
        """A placement back from :meth:`to_dict` (a ``results.json`` region's ``cores``)."""
        return cls(tuple(int(c) for c in data.get("used") or ()), tuple(int(c) for c in data.get("of") or ()),
                   {int(c): float(v) for c, v in (data.get("load") or {}).items()},
                   bool(data.get("contended")), str(data.get("setting", "auto")),
                   tuple(p for p in map(_gpu_process, data.get("gpu_processes") or ()) if p is not None))

    def marker(self) -> str:
        """Short text for the terminal row: empty when the whole machine (or ``auto``'s share of it) was used,
        uncontended, with nothing busy beside."""
        parts: list[str] = []
        if self.contended:
            load = self.load_on
            parts.append("contended" + (f", load {load:.0%}" if load is not None else ""))
        quiet_auto = self.setting == "auto" and (self.load_beside or 0.0) < FREE_BELOW  # the usual case: the
        # summary says once how many cores auto takes, rows say so only when a neighbour was busy beside
        if (self.count < len(self.allowed) and not quiet_auto) or self.contended:
            cores = ",".join(map(str, self.used))
            beside = self.load_beside
            parts.append(f"core{'s' if self.count > 1 else ''} {cores} of {len(self.allowed)}"
                         + (f", {beside:.0%} busy beside" if beside is not None else ""))
        if self.gpu_processes:
            parts.append(f"{len(self.gpu_processes)} other process(es) on the GPU")
        return "; ".join(parts)


def auto_count(machine_cores: int, allowed: int) -> int:
    """How many cores ``auto`` measures on: half the machine's (at least one), at most the ``allowed`` ones (an
    xdist worker's share). Fixed per machine, so quiet and busy sessions are judged alike; half, because a
    shared runner's neighbours are expected to take no more than the other half."""
    return max(1, min(allowed, machine_cores // 2))


def choose(setting: CoresSetting, allowed: Sequence[int], load: Mapping[int, float] | None,
           free_below: float = FREE_BELOW, machine_cores: int | None = None,
           where: str = "--roofline-cores") -> Placement:
    """The cores to measure on. ``auto``: the ``auto_count`` least loaded of ``allowed`` (``machine_cores``
    defaults to ``len(allowed)``), *contended* when one of them is busy; ``all``: every allowed core; ``N``:
    the N least loaded; a list: exactly those (must be allowed). Only ``auto`` marks a measurement contended:
    the other settings are the user's choice of cores, measured as asked (the load is recorded all the same)."""
    allowed = sorted(allowed)
    seen = dict(load or {})

    def busy(core: int) -> float:
        return seen.get(core, 0.0)

    if setting.mode == "list":
        missing = [c for c in setting.cores if c not in allowed]
        if missing:
            raise CoresSettingError(f"{where}: core(s) {','.join(map(str, missing))} are not available "
                                    f"to this process (it may run on {','.join(map(str, allowed))})")
        used = list(setting.cores)
    elif setting.mode in ("count", "auto"):
        count = setting.count if setting.mode == "count" else auto_count(machine_cores or len(allowed),
                                                                           len(allowed))
        if count is not None and count > len(allowed):
            raise CoresSettingError(f"{where}: {count} cores asked for, this process may run on "
                                    f"{len(allowed)} ({','.join(map(str, allowed))})")
        # least loaded first; among equals the highest ids, which the OS fills last (core 0 takes interrupts)
        used = sorted(sorted(allowed, key=lambda c: (busy(c), -c))[:count])
    else:
        used = allowed
    contended = setting.mode == "auto" and any(busy(c) >= free_below for c in used)
    return Placement(tuple(used), tuple(allowed), {c: seen[c] for c in allowed if c in seen}, contended,
                     str(setting))


# --- pinning and thread pools --------------------------------------------------------------------------

@dataclass
class Affinity:
    """How threads are listed and pinned; replaced by fakes in tests."""

    threads: Callable[[], list[int]]
    get: Callable[[int], set[int]]
    set: Callable[[int, set[int]], None]


def _process_threads() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


SYSTEM_AFFINITY = Affinity(_process_threads, getattr(os, "sched_getaffinity", lambda _: set()),
                           getattr(os, "sched_setaffinity", lambda _pid, _mask: None))


class PoolLimits(Protocol):
    """What undoes :attr:`ThreadPools.set` (threadpoolctl's ``threadpool_limits``)."""

    def restore_original_limits(self) -> None: ...


@dataclass
class ThreadPools:
    """Get and set the thread count of the pools that run the measured work; replaced by fakes in tests.
    ``restore`` gets the thread count ``get`` saw before, and what ``set`` returned (None if it did not run)."""

    get: Callable[[], int | None]
    set: Callable[[int], PoolLimits | None]
    restore: Callable[[tuple[int | None, PoolLimits | None]], None]


def _torch_threads_get() -> int | None:
    torch = sys.modules.get("torch")  # only a torch the process already uses: no import here
    return int(torch.get_num_threads()) if torch is not None else None


def _pools_set(count: int) -> PoolLimits | None:
    """Size torch's intra-op pool and every BLAS/OpenMP pool threadpoolctl finds; return what undoes it."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(count)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=count)


def _pools_restore(state: tuple[int | None, PoolLimits | None]) -> None:
    torch_threads, limits = state
    if limits is not None:
        limits.restore_original_limits()
    torch = sys.modules.get("torch")
    if torch is not None and torch_threads is not None:
        torch.set_num_threads(torch_threads)


SYSTEM_POOLS = ThreadPools(_torch_threads_get, _pools_set, _pools_restore)


@contextlib.contextmanager
def pinned(cores: Sequence[int], affinity: Affinity = SYSTEM_AFFINITY,
           pools: ThreadPools = SYSTEM_POOLS) -> Iterator[None]:
    """Every thread of this process on ``cores``, the thread pools at ``len(cores)`` threads; undone on exit."""
    mask = set(cores)
    previous: dict[int, set[int]] = {}
    for tid in affinity.threads():
        with contextlib.suppress(OSError):  # a thread may end between listing and pinning
            previous[tid] = set(affinity.get(tid))
            affinity.set(tid, mask)
    pool_state: tuple[int | None, PoolLimits | None] = (pools.get(), None)
    try:
        pool_state = (pool_state[0], pools.set(len(mask)))
        yield
    finally:
        pools.restore(pool_state)
        for tid, old in previous.items():
            with contextlib.suppress(OSError):
                affinity.set(tid, old)


# --- roofs per core count ------------------------------------------------------------------------------

def counts_to_measure(total: int) -> list[int]:
    """1, the powers of two below ``total``, and ``total``."""
    counts, power = [], 1
    while power < total:
        counts.append(power)
        power *= 2
    return counts + [total]


def bracket(count: int, total: int) -> tuple[int, int]:
    """The measured core counts either side of ``count`` (equal when ``count`` is measured itself)."""
    measured = counts_to_measure(total)
    count = max(1, min(count, total))
    low = max(c for c in measured if c <= count)
    high = min(c for c in measured if c >= count)
    return low, high


def interpolate(machines: Mapping[int, Machine], count: int) -> Machine:
    """Roofs at ``count`` cores from machines measured at other counts: each roof linear in the core count
    between the nearest measured counts below and above (a roof known at only one of them is taken as is).
    Per-core roofs (FLOP/s, private caches) grow linearly, so this is exact for them; shared roofs (L3, DRAM)
    saturate, and the line between two points lies under such a curve, so it errs towards a lower roof."""
    if count in machines:
        return machines[count]
    low = max(c for c in machines if c < count)
    high = min(c for c in machines if c > count)
    weight = (count - low) / (high - low)

    def mix(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
        keys = list(a) + [k for k in b if k not in a]
        return {k: (a[k] + weight * (b[k] - a[k])) if k in a and k in b else float(a.get(k, b.get(k, 0.0)))
                for k in keys}

    lo, hi = machines[low], machines[high]
    info = {**lo.info, "core_count": count, "interpolated_from": [low, high]}
    return Machine(name=f"{lo.name.split(' (')[0]} ({count} cores, interpolated)",
                   peak_flops=mix(lo.peak_flops, hi.peak_flops), bandwidth=mix(lo.bandwidth, hi.bandwidth),
                   info=info)


def core_count_fingerprint(fields: Fingerprint, count: int, machine_cores: Sequence[int]) -> Fingerprint:
    """A CPU fingerprint for roofs measured on ``count`` of ``machine_cores`` (whichever ones: their roofs are
    the same), so each core count has its own cache entry."""
    out = fields.copy()
    out["cores"], out["core_count"], out["threads"], out["measured_on_cores"] = list(machine_cores), count, count, count
    out["torch_threads"] = count if fields.get("torch_threads") is not None else None
    return out


def least_loaded(count: int, allowed: Sequence[int], load: Mapping[int, float] | None) -> list[int]:
    """The ``count`` least loaded of ``allowed`` (the first ones when the load is unknown)."""
    seen = dict(load or {})
    return sorted(sorted(allowed, key=lambda c: seen.get(c, 0.0))[:count])


# --- GPU neighbours ------------------------------------------------------------------------------------

def gpu_processes(device_index: int, nvml: Any = None, own_pid: int | None = None,  # nvml: the pynvml module
                  ) -> list[GpuProcess]:
    """Other processes on GPU ``device_index`` according to NVML (pid, memory used); [] without NVML."""
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            return []
    own = os.getpid() if own_pid is None else own_pid
    try:
        nvml.nvmlInit()
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
            seen: dict[int, GpuProcess] = {}
            for query, kind in ((nvml.nvmlDeviceGetComputeRunningProcesses, "compute"),
                                (nvml.nvmlDeviceGetGraphicsRunningProcesses, "graphics")):
                for process in query(handle):
                    pid = int(process.pid)
                    if pid != own:
                        memory = getattr(process, "usedGpuMemory", None)
                        seen.setdefault(pid, GpuProcess(pid=pid, kind=kind,
                                                        memory_bytes=memory if isinstance(memory, int) else None))
            return list(seen.values())
        finally:
            nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - NVML missing, no driver, no permission: nothing is known
        return []


# --- one measurement's scope ---------------------------------------------------------------------------

class Planner:
    """Chooses and holds the cores for each measured call site of a session (or an xdist worker's share)."""

    def __init__(self, setting: CoresSetting, allowed: Sequence[int], *, gpu_index: int | None = None,
                 machine_cores: int | None = None,
                 sampler: Callable[[], Mapping[int, float] | None] | None = None,
                 affinity: Affinity = SYSTEM_AFFINITY, pools: ThreadPools = SYSTEM_POOLS) -> None:
        self.setting = setting
        self.allowed = sorted(allowed)
        self.machine_cores = machine_cores or len(self.allowed)  # the whole machine's, for ``auto_count``
        self.gpu_index = gpu_index
        self._sampler = sampler
        self._affinity = affinity
        self._pools = pools

    @contextlib.contextmanager
    def scope(self) -> Iterator[Placement]:
        """Look at the load, pin to the chosen cores (only when fewer than all allowed), yield the placement.
        ``all`` does not look (it uses every core whatever the load), so it costs nothing."""
        load = None if self.setting.mode == "all" else (self._sampler or sample_load)()
        placement = choose(self.setting, self.allowed, load, machine_cores=self.machine_cores)
        if self.gpu_index is not None:
            placement = Placement(placement.used, placement.allowed, placement.load, placement.contended,
                                  placement.setting, tuple(gpu_processes(self.gpu_index)))
        if placement.count < len(self.allowed):
            with pinned(placement.used, self._affinity, self._pools):
                yield placement
        else:
            yield placement


def current_affinity() -> list[int]:
    """The cores the calling thread may run on now (an xdist worker's share once it is pinned)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))
