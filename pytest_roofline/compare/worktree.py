"""REF checked out in a git worktree under the roofline dir (``<dir>/compare/worktree``), kept between
sessions and moved to REF's commit when REF moves. Plain Python; git is run as a subprocess."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.errors import CompareError

GIT_TIMEOUT_S = 120.0


def git(args: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompareError(f"--roofline-compare: git {' '.join(args)} could not run: {exc}") from None
    if done.returncode != 0:
        raise CompareError(f"--roofline-compare: git {' '.join(args)} failed: {done.stderr.strip()[:500]}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Checkout:
    ref: str  # as given
    commit: str  # 40 hex
    toplevel: Path  # this repository's top
    path: Path  # REF's worktree
    subdir: Path  # where pytest runs, relative to the top (the rootdir's place in the repository)

    @property
    def cwd(self) -> Path:
        return self.path / self.subdir


def resolve(ref: str, where: Path) -> tuple[Path, str]:
    """The repository's top and REF's commit; a clear error when ``where`` is no repository or REF no commit."""
    top = Path(git(["rev-parse", "--show-toplevel"], where))
    try:
        commit = git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], top)
    except CompareError:
        raise CompareError(f"--roofline-compare: {ref!r} is not a commit of the repository at {top} (give a "
                           "branch, tag, commit or an expression such as HEAD~1 or origin/main)") from None
    return top, commit


def prepare(ref: str, where: Path, roofline_dir: Path, name: str = "worktree") -> Checkout:
    """Check REF out (detached) in ``<roofline_dir>/compare/<name>``: created on first use, then reused and
    moved to REF's commit when REF moved. Uncommitted changes of this checkout are this side of the comparison;
    the worktree holds REF exactly as committed."""
    where = where.resolve()
    top, commit = resolve(ref, where)
    path = (roofline_dir if roofline_dir.is_absolute() else where / roofline_dir).resolve() / "compare" / name
    if path.is_dir() and (path / ".git").exists():
        current = git(["rev-parse", "HEAD"], path)
        if current != commit:
            git(["checkout", "--quiet", "--force", "--detach", commit], path)
        git(["clean", "-fdq"], path)  # files a previous twin run left (caches) do not leak into this one
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        git(["worktree", "prune"], top)  # a worktree folder deleted by hand is forgotten first
        git(["worktree", "add", "--force", "--detach", str(path), commit], top)
    try:
        subdir = where.relative_to(top)
    except ValueError:
        subdir = Path(".")
    return Checkout(ref, commit, top, path, subdir)
