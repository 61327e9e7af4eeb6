"""What the benchmark scripts share: running a ``pytest --roofline`` session and reading its results, a
throwaway git repository, busy neighbours, the host's busy share, and the loud stop when a run measured
nothing.

The scripts import it as ``from common import ...``; each adds its own folder to ``sys.path`` first, so they
run from any working directory (``python benchmarks/NAME.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

BUSY_LOOP = "while True: pass"


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a fixed bench author; its stdout, stripped."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


@dataclass
class Session:
    """What one ``pytest --roofline`` session left: its results.json document (None where it wrote none), its
    terminal output (with ``output=True``) and its wall time."""

    document: dict[str, Any] | None
    output: str
    seconds: float

    def required(self, what: str) -> dict[str, Any]:
        """The document, or a loud stop with the session's last output."""
        if self.document is None:
            print(self.output[-4000:], file=sys.stderr)
            raise SystemExit(f"{Path(sys.argv[0]).name}: {what} wrote no results.json")
        return self.document


def roofline_session(directory: Path, pytest_args: Sequence[str], env: Mapping[str, str] | None = None,
                     cwd: Path | None = None, checkout: Path | None = None, output: bool = False) -> Session:
    """One ``pytest --roofline`` session writing into ``directory``. ``checkout``: another checkout of
    pytest-roofline, put first on ``PYTHONPATH`` (an older commit in a git worktree, side by side) and,
    without ``cwd``, the folder the session runs in."""
    command = [sys.executable, "-m", "pytest", "--roofline", f"--roofline-dir={directory}", "-q",
               "-p", "no:cacheprovider", *pytest_args]
    full_env = {**os.environ, **(env or {})}
    if checkout is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), full_env.get("PYTHONPATH")) if p)
    began = time.perf_counter()
    done = subprocess.run(command, check=False, stdout=subprocess.PIPE if output else subprocess.DEVNULL,
                          stderr=subprocess.STDOUT if output else subprocess.DEVNULL, text=True, env=full_env,
                          cwd=cwd if cwd is not None else checkout)
    seconds = time.perf_counter() - began
    try:
        document = json.loads((Path(directory) / "results.json").read_text())
    except (OSError, ValueError):
        print(f"session in {directory} wrote no results", file=sys.stderr)
        document = None
    return Session(document, done.stdout or "", seconds)


def measured_tests(document: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A results document's tests that got a fraction, by node id."""
    return {t["nodeid"]: t for t in (document or {}).get("tests", []) if t.get("fraction") is not None}


def start_neighbours(count: int, code: str = BUSY_LOOP) -> list[subprocess.Popen[bytes]]:
    """``count`` busy processes (a Python loop each, as another job on a shared runner would be)."""
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def stop_neighbours(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.kill()
    for process in processes:
        process.wait()


def busy_share(seconds: float = 1.0) -> float:
    """Share of all CPUs busy over ``seconds`` (from /proc/stat; 0 where it is missing)."""
    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return sum(fields) - fields[3] - fields[4], sum(fields)

    if not Path("/proc/stat").exists():
        return 0.0
    busy0, total0 = sample()
    time.sleep(seconds)
    busy1, total1 = sample()
    return (busy1 - busy0) / max(1, total1 - total0)


def quiet_share(timeout_s: float, calm_seconds: int = 3) -> float:
    """Wait until other work uses under 10 % of the CPUs for ``calm_seconds`` in a row (at most
    ``timeout_s``); the last share seen."""
    deadline, calm, share = time.time() + timeout_s, 0, 1.0
    while time.time() < deadline and calm < calm_seconds:
        share = busy_share()
        calm = calm + 1 if share < 0.10 else 0
    return share


def wait_for_quiet(timeout_s: float, calm_seconds: int = 3) -> str:
    """``quiet_share`` as a line saying how quiet the machine was."""
    if not Path("/proc/stat").exists():
        return "no /proc/stat: did not check for other work"
    share = quiet_share(timeout_s, calm_seconds)
    if share < 0.10:
        return f"machine quiet (other work {share:.0%} of the CPUs)"
    return (f"machine still busy after {timeout_s:.0f} s (other work {share:.0%} of the CPUs): "
            "ratios are suspect")


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (population), 0 for fewer than two values."""
    return statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def require(count: int, what: str) -> None:
    """Stop loudly when a run measured nothing: a table of zeros would read as a result."""
    if count <= 0:
        raise SystemExit(f"{Path(sys.argv[0]).name}: measured nothing ({what}): run one of its sessions "
                         "by hand to see why")
