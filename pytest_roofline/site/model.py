"""From sessions to what the pages show: one pandas row per (session, test), and per test its summary.

Definitions the index and test pages use (also in docs/site.md):

- *now*: the median fraction of the test's last 3 sessions (one session's noise does not flip a column);
- *last week*: now against the same median 7 days before the latest session (the 3 sessions up to then);
- *baseline*: the baseline sessions the gate compared the test with in the latest session that ran the gate
  (``tests[].baseline.sessions``), their median and range drawn as the band over their span; without a gate
  record, the first 5 sessions shown (from ``--since``, else the oldest kept), once more sessions follow them;
  *since baseline* is now against that median;
- *verdict*: the baseline gate's, where the test's latest session ran it (``tests[].baseline``: time, work and
  fraction against its baseline sessions, the statistic the gate failed or passed it on); else the *trend*,
  ``verdicts.trend`` on the fractions (last 5 sessions against the 5 before);
- *worst first*: regressed, then changed or noisy, steady, new, improved; within each, tests under their
  threshold first, then the largest loss since the baseline, then the smallest share of the threshold.
"""

from __future__ import annotations

import hashlib
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import pandas as pd

from pytest_roofline.record.sessions import Session
from pytest_roofline.record.tests import Params, TestRecord, finite_number

from .verdicts import WINDOW, Comparison, trend

NOW_SESSIONS = 3
VERDICT_ORDER = {"regressed": 0, "changed": 1, "noisy": 1, "steady": 2, "inconclusive": 2, "new": 3, "improved": 4}


@dataclass(frozen=True)
class GateVerdict:
    """What the baseline gate wrote for a test in one session (``tests[].baseline``)."""

    verdict: str
    explanation: str  # the gate's sentence ("time ×1.95 since the baseline: ..."), else its statistic
    statistic: str
    session_id: str
    commit: str

    @classmethod
    def from_record(cls, record: TestRecord, session_id: str, commit: str) -> GateVerdict | None:
        block = record.baseline
        if block is None or block.verdict is None:
            return None
        explanation = block.explanation or block.statistic
        if block.excused == "contended":
            explanation += " (contended: not failed)"
        return cls(block.verdict, explanation, block.statistic, session_id, commit)


def number(value: object) -> float | None:
    """A finite number from a frame cell, else None: pandas turns a missing value into NaN in a float
    column, and a NaN must not reach a page as "nan"."""
    return finite_number(value)


def history_frame(sessions: Mapping[str, list[Session]]) -> pd.DataFrame:
    """One row per test per session, in session order per machine; ``record`` keeps the raw entry."""
    rows: list[dict[str, object]] = []
    for machine, items in sessions.items():
        for position, session in enumerate(items):
            for record in session.tests.values():
                rows.append({
                    "machine": machine, "position": position, "start": session.started, "session_id": session.id,
                    "commit": session.short_commit, "nodeid": record.nodeid, "function": record.test_function,
                    "params": dict(record.params or {}),
                    "fraction": record.fraction if record.measured else None,
                    "min_fraction": record.min_fraction, "bound": record.bound,
                    "time_s": record.time_s, "outcome": record.outcome, "record": record,
                })
    columns = ["machine", "position", "start", "session_id", "commit", "nodeid", "function", "params",
               "fraction", "min_fraction", "bound", "time_s", "outcome", "record"]
    return pd.DataFrame(rows, columns=columns)


DIGEST_CHARS = 20  # hex digits of SHA-256 in a page name: 80 bits, beyond any forger's search for a twin


def slug(text: str) -> str:
    """A file name for a node id (a machine key, a session id): readable, file-safe, and told apart by a
    SHA-256 digest of the full text, so that a forged id cannot name another test's page."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", text.split("::")[-1])[:60].strip("._") or "test"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:DIGEST_CHARS]}"


def page_names(texts: Iterable[str], suffix: str = "") -> dict[str, str]:
    """A distinct file name per distinct text: its :func:`slug` plus ``suffix``. Where two texts would still
    share a name (a digest collision, or names that differ only in case on a disk that ignores it), the later
    in sorted order takes ``-2``, ``-3`` ...: no page is written over another's."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for text in sorted(set(texts)):
        base = slug(text)
        name, count = base, 1
        while name.lower() in taken:
            count += 1
            name = f"{base}-{count}"
        taken.add(name.lower())
        names[text] = name + suffix
    return names


def params_label(params: Params) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def params_key(params: Params) -> tuple[tuple[int, float, str], ...]:
    """Parameter order: numbers by value, other values by their text, key by key."""
    return tuple((0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))
                 for v in params.values())


@dataclass(frozen=True)
class TestSummary:
    machine: str
    nodeid: str
    function: str
    params: Params
    fractions: list[float]
    latest: float | None
    threshold: float | None
    bound: str | None
    outcome: str
    week_change: float | None
    baseline: tuple[float, float, float] | None  # median, low, high
    baseline_change: float | None
    comparison: Comparison  # the trend of the fractions
    gate: GateVerdict | None = None  # the baseline gate's, where the latest session ran it
    baseline_sessions: tuple[str, ...] = ()  # the sessions the band is drawn from (ids, oldest first)
    baseline_gate: str | None = None  # the session whose gate chose them; None: the first sessions shown
    page: str = ""  # its page's file name, distinct among the machine's tests (:func:`page_names`)

    @property
    def verdict(self) -> str:
        """The gate's verdict in the latest session where it ran there, else the trend's."""
        return self.gate.verdict if self.gate is not None else self.comparison.verdict

    @property
    def sort_key(self) -> tuple[int, int, float, float, str]:
        """Verdict order; then tests under their threshold; then the largest loss since the baseline; then the
        smallest share of the threshold (a test with no history yet is still ranked by how close it runs)."""
        change = self.baseline_change if self.baseline_change is not None else 0.0
        margin = (self.latest / self.threshold if self.latest is not None and self.threshold else
                  float("inf"))
        return VERDICT_ORDER.get(self.verdict, 2), 0 if margin < 1 else 1, change, margin, self.nodeid


def _median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _change(now: float | None, then: float | None) -> float | None:
    return now / then - 1 if now is not None and then else None


def summarize(machine: str, nodeid: str, rows: pd.DataFrame, page: str | None = None) -> TestSummary:
    """A test's row on the index from its rows of ``history_frame`` (one machine, session order); ``page``:
    its page's file name (default its :func:`slug`; the site gives the names of :func:`page_names`)."""
    measured = rows.dropna(subset=["fraction"])
    fractions = [float(f) for f in measured["fraction"]]
    now = _median_or_none(fractions[-NOW_SESSIONS:])
    week_change = None
    if len(measured):
        cutoff = measured["start"].iloc[-1] - timedelta(days=7)
        earlier = [float(f) for f in measured.loc[measured["start"] <= cutoff, "fraction"]]
        week_change = _change(now, _median_or_none(earlier[-NOW_SESSIONS:]))
    baseline, baseline_ids, gate_session = gate_baseline(measured)
    if baseline is None:
        # No baseline until sessions follow it: a band over every session there is says nothing.
        first = fractions[:WINDOW]
        baseline = (statistics.median(first), min(first), max(first)) if len(fractions) > WINDOW else None
        baseline_ids = tuple(str(i) for i in measured["session_id"].iloc[:WINDOW]) if baseline else ()
    last = rows.iloc[-1]
    threshold = number(last["min_fraction"])
    return TestSummary(
        machine=machine, nodeid=nodeid, function=str(last["function"]), params=dict(last["params"]),
        fractions=fractions, latest=float(fractions[-1]) if fractions else None, threshold=threshold,
        bound=last["bound"] if isinstance(last["bound"], str) else None, outcome=str(last["outcome"]),
        week_change=week_change, baseline=baseline,
        baseline_change=_change(now, baseline[0]) if baseline else None,
        comparison=trend(fractions), gate=GateVerdict.from_record(last["record"], str(last["session_id"]),
                                                                  str(last["commit"])),
        baseline_sessions=baseline_ids, baseline_gate=gate_session,
        page=page if page is not None else f"{slug(nodeid)}.html")


def gate_baseline(measured: pd.DataFrame) -> tuple[tuple[float, float, float] | None, tuple[str, ...], str | None]:
    """The band of the baseline the gate used: in the newest session whose record lists baseline sessions
    (``tests[].baseline.sessions``), those sessions' fractions in this history (median, low, high; the median
    is the gate's own reference where it recorded one), their ids and the gating session's id. Nothing when no
    session ran the gate or none of its baseline sessions is in the history shown."""
    for row in reversed(list(measured.itertuples())):
        block = row.record.baseline
        if block is None:
            continue
        ids = block.sessions
        if not ids:
            continue
        chosen = measured[measured["session_id"].isin([str(i) for i in ids])]
        values = [float(f) for f in chosen["fraction"]]
        if not values:
            return None, (), None
        reference = block.fraction
        median = reference if reference is not None else statistics.median(values)
        return ((median, min(min(values), median), max(max(values), median)),
                tuple(str(i) for i in chosen["session_id"]), str(row.session_id))
    return None, (), None


def parametrized(summaries: list[TestSummary]) -> dict[str, list[TestSummary]]:
    """Functions with more than one parameter set, their variants in parameter order."""
    groups: dict[str, list[TestSummary]] = {}
    for summary in summaries:
        if summary.params:
            groups.setdefault(summary.function, []).append(summary)
    return {function: sorted(variants, key=lambda s: params_key(s.params))
            for function, variants in sorted(groups.items()) if len(variants) > 1}
