"""Which tests an A/B session compares: those the change between REF and this checkout can reach
(docs/ab-compare.md, "Only what the change reaches").

The comparing process runs every test itself, so it traces each one (:class:`.code_trace.CodeTrace`: the
repository functions its setup, body and measured calls run, and the files its process imported) and each fixture
as it is built (a shared fixture is built once, for the first test that asks for it; every later test that uses
it inherits what it ran). At a test's call site, after this side counted the call (the counting run is traced,
the timed ones never are), :func:`.impact.impact` says whether any change reaches the test. One it reaches takes
turns with REF's twins from that call site on (:class:`TestReach`); one it does not is timed here as in a plain
session and reported as unchanged at REF, never as a pass of the comparison. Plain Python: the pytest glue
(``ab.plugin.session``) hands in the test's fixtures and the pool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.ab.code_trace import CodeTrace, TestTrace
from pytest_roofline.ab.impact import Change, Reason, changed_code, impact
from pytest_roofline.ab.pool import PoolLink

UNCHANGED = "unchanged"  # the verdict of a test no change reaches (tests[].compare.verdict)


@dataclass
class Cost:
    """What the comparison cost this session, for the summary: seconds spent starting the pool of twins and
    taking turns with it (this process waiting on the twins included), over the session's whole run."""

    pool_start_s: float = 0.0
    paired_s: float = 0.0
    session_start: float = field(default_factory=time.monotonic)

    @property
    def total_s(self) -> float:
        return self.pool_start_s + self.paired_s

    def describe(self, compared: int, unchanged: int) -> str:
        """``compare: 2 of 9 tests compared (7 unchanged at REF: not compared); the comparison took 41.2 s
        (pool start 11.0 s), x2.1 of this session without it``."""
        wall = time.monotonic() - self.session_start
        plain = max(wall - self.total_s, 1e-9)
        ratio = f", x{wall / plain:.1f} of this session without it" if self.total_s > 0 else ""
        return (f"compare: {compared} of {compared + unchanged} test(s) compared ({unchanged} unchanged at REF: "
                f"not compared); the comparison took {self.total_s:.1f} s (pool start {self.pool_start_s:.1f} s)"
                f"{ratio}")


class Reach:
    """The session's change between REF and this checkout, and each test's trace. ``compare_all``: why every
    test is compared whatever the change (``--roofline-compare-all``, a nightly ``last``); None: by reach."""

    def __init__(self, root: Path, commit: str, compare_all: str | None) -> None:
        self.root = root
        self.commit = commit
        self.forced = compare_all
        self._change: Change | None = None
        self.fixtures: dict[str, frozenset[tuple[str, str]]] = {}  # fixture key -> functions its setup ran
        self.cost = Cost()

    @property
    def change(self) -> Change:
        """The diff, made once at the first test that needs it (git runs once per session)."""
        if self._change is None:
            self._change = changed_code(self.root, self.commit)
        return self._change

    def compare_all(self) -> str | None:
        """Why every test is compared (the option, a nightly, or a change tracing cannot see into), or None."""
        return self.forced or self.change.compare_all

    @property
    def reaches_none(self) -> bool:
        """No test can be reached: every test is compared by reach, and the change has no Python file (docs,
        files of no impact). Then no test is traced: tracing would cost a plain session its overhead for
        nothing."""
        return self.compare_all() is None and not self.change.python

    def trace(self) -> CodeTrace:
        return CodeTrace(self.root)

    def record_fixture(self, key: str, trace: CodeTrace) -> None:
        """What a fixture's setup ran, kept for every test that uses the fixture (it is built once per scope)."""
        result = trace.result()
        self.fixtures[key] = self.fixtures.get(key, frozenset()) | (result.functions if result else frozenset())

    def reaches(self, nodeid: str, trace: CodeTrace, fixtures: Iterable[str],
                own: Iterable[tuple[str, str]] = ()) -> Reason | None:
        """Why the change reaches the test now (its trace so far, its fixtures' and ``own``: the fixture
        functions it names), or None when it does not. A trace that could not be recorded reaches."""
        forced = self.compare_all()
        if forced is not None:
            return Reason("compare-all", forced)
        if self.reaches_none:
            return None
        result = trace.result()
        if result is None:
            return impact(self.change, {nodeid: None})[nodeid]
        functions = set(result.functions) | set(own)
        for key in fixtures:
            functions |= self.fixtures.get(key, frozenset())
        return impact(self.change, {nodeid: TestTrace(frozenset(functions), result.imported)})[nodeid]


@dataclass
class TestReach:
    """One test's comparison under change impact. ``decide``: the reason the change reaches it now (None: not
    yet); ``begin(site)``: the pool's link for the test, brought up to call site ``site`` (None: no pair can run
    it). The first call site the change reaches begins the pairs; earlier call sites were timed here."""

    __test__ = False
    nodeid: str
    decide: Callable[[], Reason | None]
    begin: Callable[[int], PoolLink | None]
    link: PoolLink | None = None
    reason: Reason | None = None
    local_sites: int = 0  # call sites timed here, unchanged at REF
    begun: bool = False  # the pool was asked for the test (link None then: it could not run it)
    cost: Cost = field(default_factory=Cost)  # the session's: the turns' seconds are added to it

    def next_site(self) -> PoolLink | None:
        """The link to time this call site with, or None to time it here (unchanged at REF, or the pool could
        not run the test: :attr:`begun` tells which)."""
        if self.begun:
            return self.link
        reason = self.decide()
        if reason is None:
            self.local_sites += 1
            return None
        self.reason, self.begun = reason, True
        self.link = self.begin(self.local_sites)
        return self.link

    def begin_now(self, reason: Reason) -> None:
        """Ask the pool for the test before its first call site, whatever it runs (every test is compared):
        the twins run its setup beside this side's."""
        self.reason, self.begun = reason, True
        self.link = self.begin(0)

    @property
    def unchanged(self) -> bool:
        """No call site of the test was reached by the change (so far: at its end, the verdict)."""
        return not self.begun
