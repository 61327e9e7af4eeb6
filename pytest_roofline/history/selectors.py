"""Name sessions of the history on the command line: by session id, commit (a hex prefix of >= 7 characters),
branch, ``latest`` or ``latest~N`` (N sessions before the latest). Plain Python over ``history.reader``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_roofline.errors import SelectorError
from pytest_roofline.record.sessions import Session

__all__ = ["ACCEPTED", "Selection", "SelectorError", "describe", "resolve_revision", "select_sessions", "what_exists"]

MIN_COMMIT_PREFIX = 7
ACCEPTED = (f"a session id, a commit (a hex prefix of >= {MIN_COMMIT_PREFIX} characters), a branch name, latest or "
            "latest~N (N sessions before the latest), or a git revision (HEAD, HEAD~1, a tag) of the repository "
            "here, resolved to its commit's sessions")
_LATEST = re.compile(r"latest(?:~(\d+))?")
_HEX = re.compile(rf"[0-9a-fA-F]{{{MIN_COMMIT_PREFIX},40}}")


@dataclass(frozen=True)
class Selection:
    selector: str
    kind: str  # "latest", "session", "commit" or "branch"
    sessions: list[Session]  # oldest first, never empty

    @property
    def latest(self) -> Session:
        return self.sessions[-1]


def select_sessions(selector: str, sessions: Sequence[Session], name: str = "selector") -> Selection:
    """The sessions ``selector`` names among ``sessions`` (oldest first); SelectorError naming ``name`` (the
    argument) when none does or a commit prefix is ambiguous."""
    latest = _LATEST.fullmatch(selector)
    if latest:
        back = int(latest.group(1) or 0)
        if back >= len(sessions):
            raise SelectorError(f"{name} {selector!r}: the history holds {len(sessions)} session(s), so latest~N "
                                f"goes back at most to latest~{len(sessions) - 1}")
        return Selection(selector, "latest", [sessions[-1 - back]])
    by_id = [s for s in sessions if s.id == selector]
    if by_id:
        return Selection(selector, "session", by_id)
    if _HEX.fullmatch(selector):
        by_commit = [s for s in sessions if s.commit and s.commit.lower().startswith(selector.lower())]
        commits = sorted({str(s.commit) for s in by_commit})
        if len(commits) > 1:
            raise SelectorError(f"{name} {selector!r} is the prefix of {len(commits)} commits "
                                f"({', '.join(c[:12] for c in commits)}): give more of it")
        if by_commit:
            return Selection(selector, "commit", by_commit)
    by_branch = [s for s in sessions if s.branch == selector]
    if by_branch:
        return Selection(selector, "branch", by_branch)
    raise SelectorError(f"{name} {selector!r} names no session: searched session ids, commits and branches. "
                        f"Accepted: {ACCEPTED}.\n{what_exists(sessions)}")


def what_exists(sessions: Sequence[Session], shown: int = 5) -> str:
    """The latest sessions and the branches, for an error message."""
    if not sessions:
        return "The history holds no session."
    latest = "\n".join(f"  {describe(s)}" for s in reversed(sessions[-shown:]))
    branches = sorted({s.branch for s in sessions if s.branch})
    return (f"The {min(shown, len(sessions))} latest of {len(sessions)} session(s), newest first:\n{latest}\n"
            f"Branches: {', '.join(branches) if branches else 'none recorded'}")


def describe(session: Session) -> str:
    """The session's id, then its commit (12 digits), branch and start: ``ID (commit COMMIT, BRANCH, START)``."""
    parts = [f"commit {session.commit[:12]}" if session.commit else "no commit"]
    if session.branch:
        parts.append(session.branch)
    if session.start:
        parts.append(session.start[:19])
    return f"{session.id} ({', '.join(parts)})"


def resolve_revision(selector: str, sessions: Sequence[Session], resolve: Callable[[str], str | None]) -> str:
    """``selector`` as it is when it names sessions; else, when ``resolve`` (git rev-parse) turns it into a
    commit that has sessions, that commit's full hash; else as it is (its SelectorError then says why)."""
    try:
        select_sessions(selector, sessions)
        return selector
    except SelectorError:
        pass
    commit = resolve(selector)
    if commit and any(s.commit and s.commit.lower() == commit.lower() for s in sessions):
        return commit
    return selector


def git_revision(revision: str, cwd: str | None = None) -> str | None:
    """The commit hash ``revision`` names in the git repository at ``cwd``, or None (no git, no such
    revision). An option-like revision is never passed to git."""
    if revision.startswith("-"):
        return None
    from pathlib import Path

    from pytest_roofline.history.environment import _git

    return _git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], Path(cwd or "."))
