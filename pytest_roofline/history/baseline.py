"""Choose the baseline sessions each test is compared with (``--roofline-baseline``).

Per test: the last ``count`` sessions that measured that test with the same parameters, on this machine (its
key) and, where both sessions recorded it, the same environment (torch version, the threads the calls ran on);
on this branch when it has that many, else on any branch. A partial run (``-k``, a node id) therefore never
hides other tests' baselines. A single file (a history file or a ``results.json``) is its one session. Other
machines' sessions are left out unless ``any_machine``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pytest_roofline.history.reader import Loaded, load
from pytest_roofline.history.store import HistoryStore
from pytest_roofline.record.sessions import Session
from pytest_roofline.record.tests import TestRecord


class Environment(TypedDict, total=False):
    """The fields a baseline session must share with the current one where both recorded them (absent or None:
    not recorded)."""

    torch: str | None  # torch's version
    threads: int | None  # the cores the test's calls ran on
    gpu_l2: str | None  # how its GPU call sites found the L2 (record.tests.gpu_l2_of): flushed and warm differ


@dataclass
class Baseline:
    reference: str
    sessions: list[Session] = field(default_factory=list)  # this machine's sessions, oldest first
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the selection left out, for the summary
    count: int = 5
    branch: str | None = None
    environment: Environment = field(default_factory=lambda: Environment())
    spread_pool: list[Session] = field(default_factory=list)  # sessions the pooled spread is measured over
    pooled: dict[str, object] = field(default_factory=dict)  # quantity -> gates' baseline_stats.Spread | None
    blind: str | None = None  # why the history could not be read well enough to judge (reader.Loaded.blind)

    def describe(self) -> str:
        if not self.sessions:
            return f"baseline {self.reference}: no session to compare with"
        left = "".join(f"; {n}" for n in self.notes if "commit under test" in n)
        return (f"baseline {self.reference}: per test, its last {self.count} session(s) of this machine "
                f"({len(self.sessions)} session(s) to choose from{left})")

    def sessions_for(self, nodeid: str, params: object = None, threads: int | None = None,
                     gpu_l2: str | None = None) -> list[Session]:
        """The baseline sessions of one test (oldest first); ``threads``: the cores its calls ran on now;
        ``gpu_l2``: how its GPU call sites found the L2 now."""
        environment = Environment(torch=self.environment.get("torch"), threads=threads, gpu_l2=gpu_l2)
        return for_test(self.sessions, nodeid, params, environment, self.branch, self.count)

    def pool_by_test(self) -> dict[str, list[Session]]:
        """Each test of the spread pool with its last N sessions there (for the pooled spread)."""
        return pool_by_test(self.spread_pool, self.count)


def pool_by_test(sessions: Sequence[Session], count: int) -> dict[str, list[Session]]:
    """Each test of ``sessions`` with its last ``count`` sessions there, whatever their parameters or
    environment: the groups the machine's pooled spread is measured over (the gate and ``compare``)."""
    nodeids = sorted({n for s in sessions for n in s.tests})
    return {n: for_test(sessions, n, None, {}, None, count) for n in nodeids}


def session_label(session: Session) -> str:
    return f"{session.id} ({session.commit[:12]})" if session.commit else session.id


def _measured(record: TestRecord) -> bool:
    """A fraction a baseline may use: measured, and not in an A/B session (``tests[].compare``): there both
    sides take turns with each other, so its fractions are not those of a plain session."""
    return record.compare is None and record.measured


def same_environment(recorded: Environment, current: Environment) -> bool:
    """Equal on every field both recorded (an older file lacking one still counts)."""
    return all(a is None or b is None or a == b
               for a, b in ((recorded.get(key), current.get(key)) for key in Environment.__optional_keys__))


def for_test(sessions: Sequence[Session], nodeid: str, params: object, environment: Environment,
             branch: str | None, count: int) -> list[Session]:
    """The last ``count`` sessions that measured ``nodeid`` with these ``params`` in this environment."""
    found = []
    for session in sessions:
        record = session.tests.get(nodeid)
        if record is None or not _measured(record):
            continue
        if params is not None and record.params is not None and record.params != params:
            continue
        recorded = Environment(torch=session.environment.get("torch"), threads=record.threads,
                               gpu_l2=record.gpu_l2)
        if not same_environment(recorded, environment):
            continue
        found.append(session)
    same_branch = [s for s in found if branch is not None and s.branch == branch]
    chosen = same_branch if len(same_branch) >= count else found
    return chosen[-count:]


def select(sessions: Sequence[Session], *, key: str, any_machine: bool) -> tuple[list[Session], list[str]]:
    """This machine's sessions (oldest first) and notes on what was left out."""
    notes: list[str] = []
    mine = list(sessions) if any_machine else [s for s in sessions if s.machine_key == key]
    others = len(sessions) - len(mine)
    if others:
        keys = sorted({s.machine_key for s in sessions if s.machine_key != key})
        notes.append(f"{others} session(s) of other machines ({', '.join(keys)}) left out; this machine is {key} "
                     "(--roofline-baseline-any-machine compares them)")
    return mine, notes


RECENT = 200  # the newest sessions of this machine a baseline is chosen from (the default retention keeps 200)


def load_baseline(reference: Path | HistoryStore, *, key: str, branch: str | None, count: int, any_machine: bool,
                  environment: Environment | None = None, history: Path | HistoryStore | None = None,
                  exclude_commit: str | None = None, recent: int = RECENT) -> Baseline:
    """The baseline, and the sessions the pooled spread is measured over: the baseline's own and, when the
    baseline is a single file, this machine's ``history`` too (a one-session baseline has no spread of its
    own). A history (a directory or a store) is read for this machine only, its newest ``recent`` sessions,
    unless ``any_machine``. ``exclude_commit``: a history's sessions of this commit are left out of the
    baseline (a commit is never its own baseline: an earlier run of the same slow code would excuse it); a
    single file named as the baseline is taken as asked. StoreError when a store cannot be read."""
    single = isinstance(reference, Path) and not reference.is_dir()
    loaded: Loaded = load(reference, key=None if any_machine or single else key, recent=recent)
    chosen, notes = select(loaded.sessions, key=key, any_machine=any_machine)
    notes = [*loaded.notes, *notes]
    if exclude_commit and not single:
        same = [s for s in chosen if s.commit == exclude_commit]
        if same:
            chosen = [s for s in chosen if s.commit != exclude_commit]
            notes.append(f"{len(same)} session(s) of the commit under test ({exclude_commit[:12]}) left out")
    pool = list(chosen)
    if single and history is not None and (not isinstance(history, Path) or history.is_dir()):
        extra = load(history, key=None if any_machine else key, recent=recent)
        seen = {(s.id, s.start) for s in pool}
        pool += [s for s in select(extra.sessions, key=key, any_machine=any_machine)[0]
                 if (s.id, s.start) not in seen]
    return Baseline(_label(reference), chosen, loaded.skipped, notes, count, branch,
                    Environment(**(environment or {})), pool, blind=loaded.blind())


def _label(reference: Path | HistoryStore) -> str:
    return str(reference) if isinstance(reference, Path) else reference.url


def unmatched_note(baseline: Baseline, nodeids: Sequence[str]) -> str | None:
    """A warning when the baseline has sessions of this machine but none of its node ids is one of this
    session's (``nodeids``): the rootdir or the test paths differ, and every test would be new. Names one id
    of each form so the difference shows."""
    known = sorted({n for s in baseline.sessions for n in s.tests})
    if not known or not nodeids or set(known) & set(nodeids):
        return None
    here = sorted(nodeids)
    return (f"roofline baseline: none of the {len(known)} node id(s) in {baseline.reference} is one of this "
            f"session's {len(here)}: the baseline has e.g. {known[0]!r}, this session {here[0]!r} (another rootdir "
            "or test path?); every test is compared with nothing")
