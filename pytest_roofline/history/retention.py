"""How much history a machine keeps (``--roofline-history-keep``), and the pruning that enforces it.

A machine's folder keeps its newest N sessions (or those of the last N days). Each test's newest baseline
sessions are kept whatever their age, so a test run rarely (a nightly-only test, a partial run) never loses
the baseline it is judged against. Pruning starts only when a folder holds 10 % more than it keeps, so it
runs once every few sessions, not after each. Each removal is one ``unlink``: a file is whole or gone, and a
reader never sees half of one. Plain Python, cheap to import (the option is parsed at configure time).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.errors import SettingError

DEFAULT_KEEP = "200"
SLACK = 1.10  # prune once a folder holds this many times what it keeps


@dataclass(frozen=True)
class Keep:
    sessions: int | None = None  # the newest N sessions of each machine
    days: float | None = None  # the sessions of the last N days

    def describe(self) -> str:
        return f"the newest {self.sessions} sessions" if self.sessions else f"the last {self.days:g} days"


def parse_keep(value: object, where: str) -> Keep | None:
    """``N``, ``Nd`` or ``all`` (None: keep everything)."""
    text = str(value if value is not None else DEFAULT_KEEP).strip().lower() or DEFAULT_KEEP
    if text == "all":
        return None
    match = re.fullmatch(r"(\d+)\s*(d|days?)?", text)
    if match is None or int(match.group(1)) < 1:
        raise SettingError(f"{where} must be a number of sessions (200), of days (90d), or all; got {value!r}")
    number = int(match.group(1))
    return Keep(days=float(number)) if match.group(2) else Keep(sessions=number)


def _nodeids(path: Path) -> set[str]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {str(t["nodeid"]) for t in document.get("tests") or [] if isinstance(t, dict) and "nodeid" in t
                and isinstance(t.get("fraction"), (int, float))}
    except (OSError, ValueError, AttributeError, TypeError, RecursionError):
        return set()


def prune_machine(folder: Path, keep: Keep, protect: int, *, now: float | None = None) -> list[Path]:
    """Remove the sessions of one machine's folder beyond ``keep``, except each test's newest ``protect``
    sessions. Returns what was removed. File names start with the session's UTC start, so name order is
    time order."""
    files = sorted(p for p in folder.glob("*.json") if p.is_file() and not p.name.startswith("."))
    if keep.sessions is not None:
        if len(files) <= keep.sessions * SLACK:
            return []
        candidates = files[:-keep.sessions]
    else:
        cutoff = (time.time() if now is None else now) - float(keep.days or 0) * 86400
        candidates = [p for p in files if p.stat().st_mtime < cutoff]
        if not candidates:
            return []
    kept = files[len(candidates):] if keep.sessions is not None else [p for p in files if p not in candidates]
    seen: dict[str, int] = {}
    for path in kept:
        for nodeid in _nodeids(path):
            seen[nodeid] = seen.get(nodeid, 0) + 1
    removed = []
    for path in reversed(candidates):  # newest first: they are the ones a test still short of baseline keeps
        ids = _nodeids(path)
        needed = [n for n in ids if seen.get(n, 0) < protect]
        if needed:
            for nodeid in ids:
                seen[nodeid] = seen.get(nodeid, 0) + 1
            continue
        try:
            path.unlink()
            removed.append(path)
        except OSError:
            pass  # another session pruned it first, or a read-only copy: never an error
    return removed


def prune(history: Path, keep: Keep | None, protect: int) -> list[Path]:
    """Prune every machine folder under the history directory."""
    if keep is None or not history.is_dir():
        return []
    removed: list[Path] = []
    for folder in sorted(p for p in history.iterdir() if p.is_dir()):
        removed += prune_machine(folder, keep, protect)
    return removed
