"""REF checked out in a git worktree, kept between sessions and moved to REF's commit when REF moves. Plain
Python; git is run as a subprocess.

Where: under the characterization cache (``<cache>/compare/<repository name>-<hash of its path>/``), outside
the repository, so a later plain ``pytest`` never collects REF's copy, whatever ``--roofline-dir`` is. A
repository that moved gets a worktree of its own; worktrees whose repository is gone are removed.

Concurrency: each worktree has a lock file held for the whole session (:class:`Checkout.release`). A second
session in the same repository takes the next free slot (``worktree-1``, ...), so no session re-checks a
worktree out under another session's running twin.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pytest_roofline.characterize.ceiling_cache import default_cache_dir
from pytest_roofline.errors import CompareError

GIT_TIMEOUT_S = 120.0
SLOTS = 4  # sessions of one repository at once, each with its own worktree; a fifth waits for the first

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one session at a time is then the user's care
    fcntl = None  # type: ignore[assignment]


def git(args: list[str], cwd: Path, config: list[str] | None = None) -> str:
    options = [x for c in config or [] for x in ("-c", c)]
    try:
        done = subprocess.run(["git", *options, *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
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
    lock: IO[bytes] | None = field(default=None, compare=False, repr=False)  # held while this session uses it

    @property
    def cwd(self) -> Path:
        return self.path / self.subdir

    def release(self) -> None:
        if self.lock is not None and not self.lock.closed:
            self.lock.close()  # closing the file drops the flock


def resolve(ref: str, where: Path) -> tuple[Path, str]:
    """The repository's top and REF's commit; a clear error when ``where`` is no repository or REF no commit."""
    top = Path(git(["rev-parse", "--show-toplevel"], where))
    try:
        commit = git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], top)
    except CompareError:
        raise CompareError(f"--roofline-compare: {ref!r} is not a commit of the repository at {top} (give a "
                           "branch, tag, commit or an expression such as HEAD~1 or origin/main)") from None
    return top, commit


def worktrees_home(top: Path, cache_dir: Path | None = None) -> Path:
    """This repository's folder of worktrees: outside it, keyed by where it is (a moved repository starts
    afresh rather than inheriting worktrees whose links point at its old place)."""
    base = (cache_dir or default_cache_dir()).expanduser().resolve() / "compare"
    digest = hashlib.sha256(str(top.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / f"{top.name[:40]}-{digest}"


def _take_lock(path: Path, wait: bool) -> IO[bytes] | None:
    handle = open(path, "a+b")  # noqa: SIM115 - held open for the session: the lock lives as long as the file
    if fcntl is None:
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        handle.close()
        return None
    return handle


def lock_slot(home: Path, name: str, say: Callable[[str], None] | None = None) -> tuple[Path, IO[bytes]]:
    """A worktree path of ``home`` no other session holds, and its lock; waits (saying so) when all are held."""
    home.mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS):
        path = home / (name if slot == 0 else f"{name}-{slot}")
        handle = _take_lock(path.with_name(path.name + ".lock"), wait=False)
        if handle is not None:
            return path, handle
    if say is not None:
        say(f"--roofline-compare: {SLOTS} other compare sessions of this repository hold their worktrees; "
            f"waiting for {home / name}")
    handle = _take_lock(home / f"{name}.lock", wait=True)
    assert handle is not None
    return home / name, handle


def _registered(top: Path) -> set[Path]:
    """The worktrees git knows for this repository."""
    listing = git(["worktree", "list", "--porcelain"], top)
    return {Path(line[len("worktree "):]).resolve() for line in listing.splitlines() if line.startswith("worktree ")}


def remove_orphans(base: Path) -> None:
    """Worktree folders whose repository is gone (deleted or moved): their ``.git`` file names a git dir that
    no longer exists. Never raises: tidying is no reason to fail a session."""
    try:
        homes = [p for p in base.iterdir() if p.is_dir()]
    except OSError:
        return
    for home in homes:
        for tree in home.iterdir() if home.is_dir() else ():
            link = tree / ".git"
            try:
                text = link.read_text() if link.is_file() else ""
            except OSError:
                continue
            gitdir = text.partition("gitdir:")[2].strip()
            if gitdir and not Path(gitdir).exists():
                shutil.rmtree(tree, ignore_errors=True)


def init_submodules(path: Path, top: Path) -> None:
    """REF's submodules at the commits REF pins: a plain ``git worktree add`` leaves them empty, and tests that
    import from one would fail there. A submodule this checkout has cloned is fetched from that clone."""
    if not (path / ".gitmodules").is_file():
        return
    config = ["protocol.file.allow=always"]
    try:
        entries = git(["config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$"], path)
    except CompareError:
        entries = ""
    for line in entries.splitlines():
        key, _, sub = line.partition(" ")
        name = key[len("submodule."):-len(".path")]
        local = top / sub
        if (local / ".git").exists():
            config.append(f"submodule.{name}.url={local}")
    try:
        git(["submodule", "update", "--init", "--recursive", "--force"], path, config=config)
    except CompareError as exc:
        raise CompareError(f"--roofline-compare: REF's git submodules could not be checked out in its worktree "
                           f"{path} ({exc}); run `git submodule update --init --recursive` in this checkout "
                           "so REF's submodule commits are at hand, or compare without them") from None


def prepare(ref: str, where: Path, roofline_dir: Path | None = None, name: str = "worktree",
            say: Callable[[str], None] | None = None, cache_dir: Path | None = None) -> Checkout:
    """Check REF out (detached) in a worktree of this repository (:func:`worktrees_home`): created on first use,
    then reused and moved to REF's commit when REF moved; recreated when stale (unknown to git, or its
    repository moved). Uncommitted changes of this checkout are this side of the comparison; the worktree
    holds REF exactly as committed, submodules included. ``roofline_dir`` is no longer where it lives (kept
    for callers); the returned checkout holds the worktree's lock until :meth:`Checkout.release`."""
    where = where.resolve()
    top, commit = resolve(ref, where)
    home = worktrees_home(top, cache_dir)
    remove_orphans(home.parent)
    path, lock = lock_slot(home, name, say)
    try:
        git(["worktree", "prune"], top)  # a worktree folder deleted by hand is forgotten first
        fresh = path.resolve() not in _registered(top) or not (path / ".git").exists()
        if not fresh:
            try:
                fresh = Path(git(["rev-parse", "--show-toplevel"], path)).resolve() != path.resolve()
            except CompareError:
                fresh = True
        if fresh:
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
                git(["worktree", "prune"], top)
            git(["worktree", "add", "--force", "--detach", str(path), commit], top)
        else:
            if git(["rev-parse", "HEAD"], path) != commit:
                git(["checkout", "--quiet", "--force", "--detach", commit], path)
            git(["clean", "-fdq"], path)  # files a previous twin run left (caches) do not leak into this one
        init_submodules(path, top)
    except BaseException:
        lock.close()
        raise
    try:
        subdir = where.relative_to(top.resolve())
    except ValueError:
        subdir = Path(".")
    return Checkout(ref, commit, top, path, subdir, lock)

