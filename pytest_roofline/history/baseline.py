"""Choose the baseline sessions a session is compared with (``--roofline-baseline``).

From a history directory: the last ``count`` sessions of this machine (its key), on this branch when it has
that many, else on any branch. A single file (a history file or a ``results.json``) is its one session. Other
machines' sessions are left out unless ``any_machine``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.history.reader import Loaded, Session, load


@dataclass
class Baseline:
    reference: str
    sessions: list[Session] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the selection left out, for the summary

    def describe(self) -> str:
        if not self.sessions:
            return f"baseline {self.reference}: no session to compare with"
        ids = ", ".join(session_label(s) for s in self.sessions)
        return f"baseline {self.reference}: {len(self.sessions)} session(s): {ids}"


def session_label(session: Session) -> str:
    return f"{session.id} ({session.commit[:12]})" if session.commit else session.id


def select(sessions: Sequence[Session], *, key: str, branch: str | None, count: int,
           any_machine: bool) -> tuple[list[Session], list[str]]:
    """The sessions to compare with (oldest first) and notes on what was left out."""
    notes: list[str] = []
    mine = list(sessions) if any_machine else [s for s in sessions if s.machine_key == key]
    others = len(sessions) - len(mine)
    if others:
        keys = sorted({s.machine_key for s in sessions if s.machine_key != key})
        notes.append(f"{others} session(s) of other machines ({', '.join(keys)}) left out; this machine is {key} "
                     "(--roofline-baseline-any-machine compares them)")
    same_branch = [s for s in mine if branch is not None and s.branch == branch]
    chosen = same_branch if len(same_branch) >= count else mine
    return chosen[-count:], notes


def load_baseline(reference: Path, *, key: str, branch: str | None, count: int, any_machine: bool) -> Baseline:
    loaded: Loaded = load(reference)
    chosen, notes = select(loaded.sessions, key=key, branch=branch, count=count, any_machine=any_machine)
    return Baseline(str(reference), chosen, loaded.skipped, notes)
