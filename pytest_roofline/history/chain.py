"""A per-test trajectory from nightly A/B ratios (``--roofline-compare last``), free of the runner's drift.

Each night measured each test against REF (the last night's commit) in pairs of processes, so its time ratio
cancels whatever the host did that night. Chaining the ratios gives a test's time at every night relative to a
first one; the log of a chain is a random walk (price-index theory calls it chain drift), so its interval grows
with every link, and it is grown honestly here: each ratio's own 95 % interval gives its standard error.

Every comparison is an edge between two commits (REF -> night) with a log ratio and a standard error; the
levels are their weighted least-squares solution with the first night fixed at 1 (the cycle method of land
surveying, the GEKS idea of price indices). On a plain chain that is the product of the ratios; where some
nights were also compared with an older anchor (``--roofline-compare last~7`` once a week) the loops it closes
pull the chain back and narrow the interval, and the misclosure says how well the chain held. A night whose REF
is not yet on the chain (a skipped night is fine: its REF is an earlier node; a REF never seen, or pruned)
starts a segment of its own, marked as not joined.

Plain Python over ``history.reader`` sessions; numpy for the solve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, TypeGuard

from pytest_roofline.record.sessions import Session

Z95 = 1.959964


@dataclass(frozen=True)
class Edge:
    """One night's A/B of one test: the night's commit measured against REF's."""

    ref: str
    commit: str
    log_ratio: float
    se: float
    session: str
    start: str
    verdict: str | None


class NightDict(TypedDict):
    """A night of a test's chain as ``history chain --json`` writes it."""

    commit: str
    start: str | None
    level: float
    ci: list[float]  # [low, high]: the 95 % interval
    segment: int
    ratio: float | None
    ref: str | None
    verdict: str | None
    raw: float | None


class TrajectoryDict(TypedDict):
    nodeid: str
    edges: int
    misclosure: float | None
    dof: int
    nights: list[NightDict]


@dataclass(frozen=True)
class Night:
    """A commit on a test's trajectory: its time relative to the first night, with a 95 % interval."""

    commit: str
    start: str | None
    level: float
    low: float
    high: float
    segment: int  # 0: joined to the first night; 1, 2, ...: a segment whose REF was never on the chain
    ratio: float | None = None  # the night's own A/B ratio against its REF (None: the first night)
    ref: str | None = None
    verdict: str | None = None  # the night's own A/B verdict (a change point where regressed or improved)
    raw: float | None = None  # the night's measured time over the first night's, host drift included

    def to_dict(self) -> NightDict:
        return {"commit": self.commit, "start": self.start, "level": self.level, "ci": [self.low, self.high],
                "segment": self.segment, "ratio": self.ratio, "ref": self.ref, "verdict": self.verdict,
                "raw": self.raw}


@dataclass
class Trajectory:
    nodeid: str
    nights: list[Night] = field(default_factory=list)
    edges: int = 0
    misclosure: float | None = None  # chi-square of the residuals over its degrees of freedom (loops only)
    dof: int = 0

    def to_dict(self) -> TrajectoryDict:
        return {"nodeid": self.nodeid, "edges": self.edges, "misclosure": self.misclosure, "dof": self.dof,
                "nights": [n.to_dict() for n in self.nights]}


def edge_of(session: Session, nodeid: str) -> Edge | None:
    """The test's A/B edge in one session, where it was compared and its time ratio has an interval."""
    record = session.tests.get(nodeid)
    compare = None if record is None else record.compare
    if compare is None or not session.commit:
        return None
    ref, time = compare.commit, compare.time
    if not ref or time is None or ref == session.commit:
        return None
    ratio, ci = time.ratio, time.ci
    if not _positive(ratio) or ci is None or not all(map(_positive, ci)):
        return None
    low, high = ci
    se = max((math.log(high) - math.log(low)) / (2 * Z95), 1e-6)
    return Edge(ref, str(session.commit), math.log(ratio), se, session.id, session.start, compare.verdict or None)


MAX_LOG_LEVEL = 700.0  # exp(709) is the largest float: a chain of many forged ratios must not overflow


def _exp(log_level: float) -> float:
    """A level on the chain from its logarithm, bounded so that no chain of recorded ratios overflows a float
    (a level beyond 1e304 says the chain is broken, and reads as such)."""
    return math.exp(max(-MAX_LOG_LEVEL, min(MAX_LOG_LEVEL, log_level)))


def _positive(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def trajectory(sessions: Sequence[Session], nodeid: str) -> Trajectory:
    """The test's nights (oldest first, by the first session of each commit) on its chain of A/B ratios."""
    edges = [e for e in (edge_of(s, nodeid) for s in sessions) if e is not None]
    result = Trajectory(nodeid, edges=len(edges))
    if not edges:
        return result
    starts: dict[str, str] = {}
    raw_time: dict[str, float] = {}
    for session in sessions:  # oldest first: a commit's first session dates it and gives its raw time
        record = session.tests.get(nodeid)
        if session.commit and session.commit not in starts and record is not None:
            starts[session.commit] = session.start
            if _positive(record.time_s):
                raw_time[session.commit] = record.time_s
    nodes: list[str] = []
    for edge in edges:  # REF first: the first night is the first edge's REF
        for commit in (edge.ref, edge.commit):
            if commit not in nodes:
                nodes.append(commit)
    segments = _segments(nodes, edges)
    levels, variances, chi2, dof = _solve(nodes, edges, segments)
    result.misclosure, result.dof = (chi2 / dof if dof else None), dof
    last_edge = {e.commit: e for e in edges}  # the night's own comparison (its newest, if it ran twice)
    first_raw: dict[int, float | None] = {}
    for commit in nodes:
        first_raw.setdefault(segments[commit], raw_time.get(commit))
    for commit in sorted(nodes, key=lambda c: (starts.get(c) or "", nodes.index(c))):
        spread = Z95 * math.sqrt(variances[commit])
        own = last_edge.get(commit)
        base = first_raw.get(segments[commit])
        raw = raw_time.get(commit)
        result.nights.append(Night(
            commit, starts.get(commit), _exp(levels[commit]), _exp(levels[commit] - spread),
            _exp(levels[commit] + spread), segments[commit], None if own is None else _exp(own.log_ratio),
            None if own is None else own.ref, None if own is None else own.verdict,
            raw / base if raw is not None and base else None))
    return result


def _segments(nodes: Sequence[str], edges: Sequence[Edge]) -> dict[str, int]:
    """Connected components, numbered in order of their first node (0: the first night's)."""
    parent = {n: n for n in nodes}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for edge in edges:
        a, b = root(edge.ref), root(edge.commit)
        if a != b:
            parent[max(a, b, key=nodes.index)] = min(a, b, key=nodes.index)
    numbers: dict[str, int] = {}
    return {n: numbers.setdefault(root(n), len(numbers)) for n in nodes}


def _solve(nodes: Sequence[str], edges: Sequence[Edge],
           segments: Mapping[str, int]) -> tuple[dict[str, float], dict[str, float], float, int]:
    """Weighted least squares per segment, its first node fixed at 0: log levels, their variances, the
    residuals' chi-square and its degrees of freedom (edges beyond a spanning tree: the loops)."""
    import numpy as np

    levels: dict[str, float] = {}
    variances: dict[str, float] = {}
    chi2, dof = 0.0, 0
    for segment in sorted(set(segments.values())):
        members = [n for n in nodes if segments[n] == segment]
        mine = [e for e in edges if segments[e.ref] == segment]
        levels[members[0]], variances[members[0]] = 0.0, 0.0
        free = {n: i for i, n in enumerate(members[1:])}
        if not free:
            continue
        design = np.zeros((len(mine), len(free)))
        for row, edge in enumerate(mine):
            if edge.commit in free:
                design[row, free[edge.commit]] += 1.0
            if edge.ref in free:
                design[row, free[edge.ref]] -= 1.0
        weights = np.array([1.0 / e.se ** 2 for e in mine])
        observed = np.array([e.log_ratio for e in mine])
        normal = design.T @ (design * weights[:, None])
        covariance = np.linalg.inv(normal)
        solution = covariance @ (design.T @ (weights * observed))
        for name, index in free.items():
            levels[name] = float(solution[index])
            variances[name] = float(covariance[index, index])
        residuals = observed - design @ solution
        chi2 += float(np.sum(weights * residuals ** 2))
        dof += len(mine) - len(free)
    return levels, variances, chi2, dof


def trajectories(sessions: Sequence[Session], nodeids: Iterable[str] | None = None) -> list[Trajectory]:
    """Every test's trajectory among ``sessions`` (one machine's, oldest first) that has an A/B night."""
    names = sorted({n for s in sessions for n in s.tests}) if nodeids is None else list(nodeids)
    found = [trajectory(sessions, n) for n in names]
    return [t for t in found if t.nights]


def table(found: Sequence[Trajectory]) -> str:
    """The trajectories as text: per test, a line per night."""
    lines: list[str] = []
    for path in found:
        loops = ("" if path.misclosure is None
                 else f"; loops: misclosure {path.misclosure:.2f} over {path.dof} degree(s) of freedom (≈1: the "
                      "chain and its anchors agree)")
        lines.append(f"{path.nodeid}: {len(path.nights)} night(s), {path.edges} A/B comparison(s){loops}")
        lines.append(f"  {'night':19s} {'commit':12s} {'A/B ratio':>9s} {'time vs first night':>19s} "
                     f"{'95% interval':>17s} {'raw':>6s}  verdict")
        for night in path.nights:
            ratio = "—" if night.ratio is None else f"{night.ratio:.3f}"
            raw = "—" if night.raw is None else f"{night.raw:.3f}"
            note = night.verdict or ("first night" if night.ratio is None else "")
            if night.segment:
                note = f"{note} (not joined: segment {night.segment}, its REF was never on the chain)".strip()
            lines.append(f"  {(night.start or '')[:19]:19s} {night.commit[:12]:12s} {ratio:>9s} "
                         f"{'×' + format(night.level, '.3f'):>19s} {f'[{night.low:.3f}, {night.high:.3f}]':>17s} "
                         f"{raw:>6s}  {note}")
    return "\n".join(lines)
