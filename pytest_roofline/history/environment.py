"""Where a session ran: git commit, branch and dirty flag, and the versions of what it ran on."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pytest_roofline._version import __version__
from pytest_roofline.record.sessions import GitState

GIT_TIMEOUT_S = 3.0


def _git(args: list[str], cwd: Path) -> str | None:
    """One git command's stripped output, or None: no git, not a repository, too slow (a network mount)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(cwd: Path | None = None) -> GitState:
    """The commit (40 hex or None), the branch (None when detached) and whether the tree is dirty (None:
    unknown) of the repository at ``cwd``."""
    where = Path(cwd or Path.cwd())
    commit = _git(["rev-parse", "--verify", "HEAD"], where)
    if commit is None:
        return GitState()
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], where)
    status = _git(["status", "--porcelain", "--untracked-files=no"], where)
    return GitState(commit=commit, branch=None if branch in (None, "HEAD") else branch,
                    dirty=None if status is None else bool(status))


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def versions(machine_info: Mapping[str, object] | None = None) -> dict[str, str | None]:
    """Python, pytest, pytest-roofline, torch, CUDA and the driver. torch is never imported for this: its CUDA
    version is read only when the session loaded it; the driver comes from the GPU's fingerprint."""
    torch = sys.modules.get("torch")
    cuda = getattr(getattr(torch, "version", None), "cuda", None) if torch is not None else None
    found = (machine_info or {}).get("fingerprint")
    fingerprint = found if isinstance(found, Mapping) else {}
    driver = fingerprint.get("driver_version") or fingerprint.get("driver")
    return {"python": platform.python_version(), "pytest": _version("pytest"),
            "pytest_roofline": __version__, "torch": _version("torch"),
            "cuda": None if cuda is None else str(cuda), "driver": None if driver is None else str(driver)}
