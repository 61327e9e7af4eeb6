"""``--roofline-compare last``: REF from the history, for a scheduled job that compares each night with the
last night's commit (A/B in one job, as a pull request's gate) instead of with the history's spread.

``last`` is the commit of the newest session of this machine (its key) and branch in the history whose commit
is not the one under test; ``last~N`` the N-th such commit counting back (distinct commits, newest first:
``last~1`` is ``last``), e.g. ``last~7`` for a weekly anchor night (history/chain.py reconciles the two). Plain
Python over ``history.reader`` sessions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_roofline.record.sessions import Session

_LAST = re.compile(r"(?:history:)?last(?:~(\d+))?")


def last_back(ref: str | None) -> int | None:
    """How many distinct commits back ``ref`` asks for (``last`` 1, ``last~7`` 7), or None when ``ref`` is a
    git revision (a branch named ``last`` is ``refs/heads/last``)."""
    match = _LAST.fullmatch((ref or "").strip())
    if match is None:
        return None
    return max(1, int(match.group(1) or 1))


@dataclass(frozen=True)
class LastNight:
    """What ``last`` resolved to, or why it resolved to nothing (``commit`` None and ``why`` set)."""

    commit: str | None
    session: Session | None = None
    why: str | None = None

    def describe(self) -> str:
        if self.session is None:
            return str(self.why)
        return f"{str(self.commit)[:12]} (session {self.session.id}, {self.session.start[:19]})"


def resolve_last(sessions: Sequence[Session], *, key: str, branch: str | None, head: str | None, back: int = 1,
                 where: str = "the history") -> LastNight:
    """REF for ``last~back``: among ``sessions`` (oldest first) of machine ``key`` on ``branch`` (any branch
    when the checkout is detached), the ``back``-th newest distinct commit other than ``head``."""
    mine = [s for s in sessions if s.machine_key == key and s.commit]
    on_branch = [s for s in mine if branch is None or s.branch == branch]
    seen: list[str] = []
    chosen: Session | None = None
    for session in reversed(on_branch):
        if session.commit == head or session.commit in seen:
            continue
        seen.append(str(session.commit))
        if len(seen) == back:
            chosen = session
            break
    if chosen is not None:
        return LastNight(chosen.commit, chosen)
    scope = f"machine {key}" + (f" on branch {branch!r}" if branch else "")
    if not mine:
        why = f"{where} holds no session of machine {key} yet (a first night)"
    elif not seen:
        why = f"{where} holds no earlier commit of {scope} than the one under test"
    else:
        why = (f"{where} holds {len(seen)} earlier commit(s) of {scope}, fewer than the {back} that "
               f"last~{back} needs")
    return LastNight(None, None, why)
