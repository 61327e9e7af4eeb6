"""``compare A B``: every test of session B against the sessions A names, with the baseline gate's statistic.

B is one session (the latest that its selector names); A is the reference side: per test, the last
:data:`REFERENCE_SESSIONS` of A's sessions that measured it (with 3 or more, the test's own spread). Below that
the spread pooled over this machine's tests is used, measured over the history up to B (what the gate saw
when B ran, plus A's sessions), else the verdict is ``inconclusive``. Plain Python and numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from pytest_roofline.gates.baseline_stats import Measurement, Spread, pooled_over, seed_for
from pytest_roofline.gates.comparison import Changes, TestComparison, Tolerances, compare_test
from pytest_roofline.history.baseline import for_test, pool_by_test
from pytest_roofline.history.selectors import Selection, SelectorError, describe, select_sessions
from pytest_roofline.record.sessions import Session

REFERENCE_SESSIONS = 5  # as the gate's --roofline-baseline-sessions default


@dataclass(frozen=True)
class Plan:
    """A and B resolved on one machine: the reference sessions, B's session, the spread's sessions."""

    machine: str
    a: Selection
    b: Selection
    reference: list[Session]  # A's sessions without B's, oldest first
    current: Session
    pool: list[Session]
    other_machines: int  # sessions of other machines left out


def _key(session: Session) -> tuple[str, str]:
    return session.id, session.start


def machine_of(sessions: Sequence[Session], b: str, machine_key: str | None) -> str:
    """``--machine-key``, else the only machine, else the machine of B's latest session in the whole history."""
    keys = sorted({s.machine_key for s in sessions})
    if machine_key is not None:
        if machine_key not in keys:
            raise SelectorError(f"--machine-key {machine_key!r}: no session of that machine; the history holds "
                                f"{', '.join(keys) or 'none'}")
        return machine_key
    if len(keys) == 1:
        return keys[0]
    return select_sessions(b, sessions, "B").latest.machine_key


def plan(sessions: Sequence[Session], a: str, b: str, machine_key: str | None = None) -> Plan:
    """Resolve A and B among one machine's ``sessions`` (oldest first); SelectorError on bad input."""
    if not sessions:
        raise SelectorError("the history holds no readable session")
    machine = machine_of(sessions, b, machine_key)
    mine = [s for s in sessions if s.machine_key == machine]
    a_sel, b_sel = select_sessions(a, mine, "A"), select_sessions(b, mine, "B")
    current = b_sel.latest
    reference = [s for s in a_sel.sessions if _key(s) != _key(current)]
    if not reference:
        raise SelectorError(f"A {a!r} and B {b!r} both name only session {describe(current)}: nothing to compare")
    # The gate measured its pooled spread over the history before B ran: the same here, with A's sessions.
    position = next(i for i, s in enumerate(mine) if _key(s) == _key(current))
    earlier = {_key(s) for s in mine[:position]}
    pool = mine[:position] + [s for s in reference if _key(s) not in earlier]
    return Plan(machine, a_sel, b_sel, reference, current, pool, len(sessions) - len(mine))


class RowDict(TypedDict):
    """A test's row as ``history compare --json`` writes it: its comparison's fields, or ``new`` / ``removed``
    with none."""

    nodeid: str
    verdict: str
    failed_on: list[str]
    fail_on: list[str]
    explanation: str | None
    changes: Changes | None
    sessions: list[str]
    commits: list[str | None]


@dataclass(frozen=True)
class Row:
    """One test: its comparison, or ``new`` / ``removed`` when only one side measured it."""

    nodeid: str
    verdict: str
    comparison: TestComparison | None
    sessions: list[Session]  # the reference sessions it was compared with
    now: Measurement | None
    reference: Measurement | None  # a new test has none; else the latest reference measurement

    def to_dict(self) -> RowDict:
        sessions, commits = [s.id for s in self.sessions], [s.commit for s in self.sessions]
        if self.comparison is None:
            return {"nodeid": self.nodeid, "verdict": self.verdict, "failed_on": [], "fail_on": [],
                    "explanation": None, "changes": None, "sessions": sessions, "commits": commits}
        return {"nodeid": self.nodeid, **self.comparison.to_dict(), "sessions": sessions, "commits": commits}


def pooled_spreads(pool: Sequence[Session]) -> dict[str, Spread | None]:
    """The machine's pooled spread of time and fraction, as the gate measures it (each test's last N)."""
    by_test = pool_by_test(pool, REFERENCE_SESSIONS)
    return {q: pooled_over(([s.tests[n] for s in chosen] for n, chosen in by_test.items()), q)
            for q in ("time", "fraction")}


def _measured(session: Session, nodeid: str) -> Measurement | None:
    record = session.tests.get(nodeid)
    return None if record is None else Measurement.from_record(record)


def compare_plan(plan: Plan, tolerances: Tolerances, pooled: dict[str, Spread | None] | None = None) -> list[Row]:
    """Every test measured on either side, in node id order; ``pooled``: :func:`pooled_spreads` of the plan's
    pool, when already computed."""
    pooled = pooled_spreads(plan.pool) if pooled is None else pooled
    nodeids = sorted({n for s in plan.reference for n in s.tests} | set(plan.current.tests))
    rows = []
    for nodeid in nodeids:
        found = [(s, m) for s in for_test(plan.reference, nodeid, None, {}, None, REFERENCE_SESSIONS)
                 if (m := _measured(s, nodeid)) is not None]
        now = _measured(plan.current, nodeid)
        latest = found[-1][1] if found else None
        if now is None or not found:
            if now is not None or found:  # a test measured on neither side is not listed
                rows.append(Row(nodeid, "removed" if now is None else "new", None, [s for s, _ in found], now,
                                latest))
            continue
        result = compare_test(now, [m for _, m in found], tolerances, bound=plan.current.tests[nodeid].bound,
                              pooled=pooled, seed=seed_for(nodeid), against=plan.a.selector)
        rows.append(Row(nodeid, result.verdict, result, [s for s, _ in found], now, latest))
    return rows
