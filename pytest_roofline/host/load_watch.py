"""What else ran on our cores while we measured: /proc/stat around a pass, this process's own ticks left out.

    watch = LoadWatch.start(cores=[0, 1])
    ...one pass of a kernel...
    seen = watch.stop()          # Disturbance(others_ticks, steal_ticks, wall_ticks, cores) or None

Plain Python, no pytest or torch. Ticks are USER_HZ (10 ms): a pass shorter than a few ticks reads as 0 or 1
tick of other work, which is why the rules that judge a ``Disturbance`` (``characterize/clean.py``) allow one
tick of slack. ``None`` where /proc is missing (not Linux): nothing is known, nothing is flagged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.host.cores import read_proc_stat


@dataclass(frozen=True)
class CoreTicks:
    busy: int   # user + nice + system + irq + softirq (steal not included)
    steal: int  # the hypervisor ran something else while this vCPU wanted to run
    total: int  # every tick, idle included


@dataclass(frozen=True)
class Disturbance:
    """Ticks over one watched span, summed over the watched cores."""

    others_ticks: int   # busy ticks that were not this process's
    steal_ticks: int
    wall_ticks: float   # the span's length in ticks of one core
    cores: int

    def to_dict(self) -> dict[str, float]:
        return {"others_ticks": self.others_ticks, "steal_ticks": self.steal_ticks,
                "wall_ticks": round(self.wall_ticks, 1), "cores": self.cores}


def parse_core_ticks(text: str) -> dict[int, CoreTicks]:
    """Per core from the ``cpuN`` lines of /proc/stat."""
    out: dict[int, CoreTicks] = {}
    for line in text.splitlines():
        name, *values = line.split()
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        ticks = [int(v) for v in values[:8]] + [0] * max(0, 8 - len(values))
        user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
        out[int(name[3:])] = CoreTicks(user + nice + system + irq + softirq, steal, sum(ticks[:8]))
    return out


def parse_own_ticks(text: str) -> int:
    """utime + stime of the whole process from ``/proc/self/stat`` (children not included)."""
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def read_own_stat() -> str | None:
    try:
        return Path("/proc/self/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


@dataclass
class LoadWatch:
    """A started watch over ``cores``; ``stop()`` says what ran beside us since ``start``."""

    cores: tuple[int, ...]
    first: dict[int, CoreTicks]
    own_first: int
    read: Callable[[], str | None] = read_proc_stat
    read_own: Callable[[], str | None] = read_own_stat

    @classmethod
    def start(cls, cores: Sequence[int], read: Callable[[], str | None] = read_proc_stat,
              read_own: Callable[[], str | None] = read_own_stat) -> LoadWatch | None:
        text, own = read(), read_own()
        if text is None or own is None:
            return None
        try:
            return cls(tuple(cores), parse_core_ticks(text), parse_own_ticks(own), read, read_own)
        except (ValueError, IndexError):
            return None

    def stop(self) -> Disturbance | None:
        text, own = self.read(), self.read_own()
        if text is None or own is None:
            return None
        try:
            second, own_second = parse_core_ticks(text), parse_own_ticks(own)
        except (ValueError, IndexError):
            return None
        watched = [c for c in self.cores if c in self.first and c in second]
        if not watched:
            return None
        busy = sum(second[c].busy - self.first[c].busy for c in watched)
        steal = sum(second[c].steal - self.first[c].steal for c in watched)
        total = sum(second[c].total - self.first[c].total for c in watched)
        # Our own threads run on the watched cores (pinned there, or all cores watched): their ticks are ours.
        others = max(0, busy - (own_second - self.own_first))
        return Disturbance(others, steal, total / len(watched), len(watched))



