"""One ncu run for many tests: the batched profiled child, and splitting its report by NVTX range.

The per-test child (:func:`pytest_roofline.counters.ncu.backend.profile_node`) pays a Python + torch + CUDA start
and ncu's attach for every test (tens of seconds each on a GPU runner; docs/gpu.md). Here the
parent hands a list of node ids to one child under one ncu run:

* the child runs them in one pytest session; its ``roofline.measure`` names each range
  ``t<test>-region-<n>`` (``<test>``: the test's position in the child's session) and writes each test's start
  and outcome to a progress file (:class:`~pytest_roofline.counters.ncu.child.BatchProgress`);
* the report's launches carry their NVTX ranges (``ncu_report``'s ``IAction.nvtx_state()``; the trimmed CSVs
  carry an ``NVTX Range`` column), so each test gets the launches of its own ranges;
* each test gets a trimmed report of its own (:mod:`~pytest_roofline.counters.ncu.trim`); the full ``.ncu-rep``
  is kept only when asked (``--roofline-ncu-full``).

What cannot come from the batch falls back to a child per test (:attr:`BatchOutcome.fallback`), never to a
wrong count:

* the child crashed or timed out in a test: the message names that test (from the progress file); that test and
  every one after it fall back, the tests finished before it keep their counts when ncu wrote a report;
* a test failed in the child, or never started there: its own child says why;
* the report's launches carry no range names (read through ``ncu --import --csv``, whose pages have no NVTX
  column) while the batch holds more than one test: all fall back.

The environment's errors (no permission, no GPU, ncu missing) are raised as by ``profile_node``: they concern
every test alike.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.counters.ncu import backend
from pytest_roofline.counters.ncu.child import PROGRESS_ENV
from pytest_roofline.counters.ncu.command import (
    DEFAULT_CACHE_CONTROL,
    DEFAULT_CLOCK_CONTROL,
    REPORT_SUFFIX,
    build_ncu_command,
)
from pytest_roofline.counters.ncu.kernel_report import build_report
from pytest_roofline.counters.ncu.metrics import metric_set
from pytest_roofline.counters.ncu.parse import ParsedLaunches, parse_csv_text
from pytest_roofline.counters.ncu.rep import find_ncu_report_module, read_ncu_rep
from pytest_roofline.counters.ncu.trim import TRIMMED_SUFFIX, write_trimmed
from pytest_roofline.errors import NcuNotFound, NoGpu, NoKernelsInRange
from pytest_roofline.host.process_role import CHILD_ENV

MAX_BATCH = 64  # tests per batched child: a crash late in a long batch costs less, a report stays small
_RANGE_RE = re.compile(r"^t(\d+)-region-\d+$")

LaunchReader = Callable[..., ParsedLaunches]


def read_launches(path: str | os.PathLike[str], ncu: str | None = None) -> ParsedLaunches:
    """Launch records of a report file: a ``.ncu-rep`` through ncu_report or the ncu CLI, else CSV text."""
    file = Path(path)
    if file.suffix == REPORT_SUFFIX:
        return read_ncu_rep(file, ncu=ncu)
    return parse_csv_text(file.read_text(encoding="utf-8", errors="replace"))


def can_split(ncu: str | None) -> bool:
    """Whether a batched report can be split here: the launches' NVTX ranges come from ``ncu_report`` (the CSV
    pages of ``ncu --import`` have none), so without it every test would fall back after the batch."""
    return (find_ncu_report_module(ncu) if ncu else find_ncu_report_module()) is not None


def range_test_index(range_name: str) -> int | None:
    """``t3-region-0`` -> 3; None for a range of a per-test child (``region-0``) or anything else."""
    match = _RANGE_RE.match(range_name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Progress:
    """What the batched child wrote: the tests in the order they started, and the outcome of those that ended."""

    started: list[tuple[int, str]] = field(default_factory=list)
    ended: dict[int, str] = field(default_factory=dict)

    def running(self) -> tuple[int, str] | None:
        """The test that started last and never ended (the child died in it), if any."""
        for index, nodeid in reversed(self.started):
            if index not in self.ended:
                return index, nodeid
        return None


def read_progress(path: Path) -> Progress:
    progress = Progress()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return progress
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0] == "start" and parts[1].isdigit():
            progress.started.append((int(parts[1]), parts[2]))
        elif len(parts) >= 4 and parts[0] == "end" and parts[1].isdigit():
            progress.ended[int(parts[1])] = parts[3]
    return progress


@dataclass
class BatchOutcome:
    """Per node id: its profile, or an error of its own, or a place in ``fallback`` (with ``notes`` saying why)."""

    profiles: dict[str, backend.NcuProfile] = field(default_factory=dict)
    errors: dict[str, Exception] = field(default_factory=dict)
    fallback: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    full_report: Path | None = None


def batch_pytest_argv(nodeids: Sequence[str], python: str | None, extra_args: Sequence[str]) -> list[str]:
    return [python or sys.executable, "-m", "pytest", *nodeids, "-q", "-p", "no:cacheprovider", *extra_args]


def split_by_test(parsed: ParsedLaunches) -> dict[int, ParsedLaunches] | None:
    """The launches of each test index; None when a launch has no batched range name (cannot be split)."""
    groups: dict[int, ParsedLaunches] = {}
    for launch in parsed.launches:
        indices = {i for name in launch.ranges if (i := range_test_index(name)) is not None}
        if len(indices) != 1:
            return None
        index = indices.pop()
        group = groups.setdefault(index, ParsedLaunches(parsed.format, [], list(parsed.messages), 0))
        group.launches.append(launch)
    return groups


def profile_batch(
    nodeids: Sequence[str],
    artifact_dir: str | os.PathLike[str],
    *,
    cc: str | tuple[int, int] | None,
    ncu: str | None = None,
    python: str | None = None,
    extra_pytest_args: Sequence[str] = (),
    clock_control: str = DEFAULT_CLOCK_CONTROL,
    cache_control: str = DEFAULT_CACHE_CONTROL,
    timeout_s: float = backend.DEFAULT_TIMEOUT_S,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    runner: backend.Runner = subprocess.run,
    reader: LaunchReader = read_launches,
    lock_dir: str | os.PathLike[str] | None = None,
    full: bool = False,
) -> BatchOutcome:
    """Run ``nodeids`` in one child under ncu and split the report per test (see the module docstring)."""
    executable = ncu or backend.find_ncu()
    if not executable:
        raise NcuNotFound(backend.missing_ncu_text())
    if cc is None:
        raise NoGpu("no CUDA device was found, so there is nothing for ncu to profile")
    folder = Path(artifact_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"ncu-batch-{uuid.uuid4().hex[:8]}"
    partial = folder / f".{stem}.partial{REPORT_SUFFIX}"
    ncu_log, child_log, progress_file = (folder / f"{stem}{suffix}" for suffix in (".ncu.log", ".child.log",
                                                                                  ".progress"))
    argv = build_ncu_command(cc, batch_pytest_argv(nodeids, python, extra_pytest_args), partial, ncu=executable,
                             clock_control=clock_control, cache_control=cache_control, log_file=ncu_log)
    child_env = dict(os.environ if env is None else env)
    child_env[CHILD_ENV] = "1"
    child_env[PROGRESS_ENV] = str(progress_file)
    outcome = BatchOutcome(argv=argv, logs=[ncu_log, child_log, progress_file])
    timed_out, returncode, why_not = False, None, ""
    try:
        with backend.exclusive(Path(lock_dir) if lock_dir else Path(tempfile.gettempdir())), \
                open(child_log, "wb") as output:
            try:
                returncode = runner(argv, stdout=output, stderr=subprocess.STDOUT, timeout=timeout_s, env=child_env,
                                    cwd=None if cwd is None else os.fspath(cwd), check=False).returncode
            except subprocess.TimeoutExpired:
                timed_out = True
            except OSError as exc:  # ncu could not be started at all: every test tries its own child
                why_not = f"the batched ncu run could not start ({exc})"
        told = backend.read_text(ncu_log) + "\n" + backend.read_text(child_log)
        backend.raise_for_environment(told, f"{len(nodeids)} tests", ncu_log)
        parsed = reader(partial, ncu=executable) if partial.is_file() and not why_not else None
        if parsed is not None and full:
            outcome.full_report = folder / f"{stem}{REPORT_SUFFIX}"
            os.replace(partial, outcome.full_report)
    finally:
        backend.discard(partial)
    progress = read_progress(progress_file)
    crashed = progress.running() if (timed_out or returncode not in (0, 1)) else None
    if crashed is None and (timed_out or returncode not in (0, 1)) and not why_not:
        why_not = (f"the batched ncu child {'timed out' if timed_out else f'exited with status {returncode}'} "
                   "outside any test")
    _assign(outcome, nodeids, parsed, progress, crashed, why_not, timed_out, folder, cc, clock_control,
            executable, ncu_log, child_log)
    return outcome


def _assign(outcome: BatchOutcome, nodeids: Sequence[str], parsed: ParsedLaunches | None, progress: Progress,
            crashed: tuple[int, str] | None, why_not: str, timed_out: bool, folder: Path,
            cc: str | tuple[int, int], clock_control: str, ncu: str, ncu_log: Path, child_log: Path) -> None:
    logs = f"logs: {ncu_log}, {child_log}"
    index_of = {nodeid: index for index, nodeid in progress.started}
    if crashed is not None:
        what = f"timed out after {len(progress.started)} tests" if timed_out else "died"
        position = nodeids.index(crashed[1]) + 1 if crashed[1] in nodeids else crashed[0] + 1
        why_not = (f"the batched ncu child {what} in {crashed[1]} (test {position} of {len(nodeids)}); that test "
                   f"and the ones after it are profiled in a child each; {logs}")
    groups = split_by_test(parsed) if parsed is not None else None
    if parsed is not None and groups is None and len(nodeids) == 1 and nodeids[0] in index_of:
        groups = {index_of[nodeids[0]]: parsed}  # a report without range names: one test owns everything
    if parsed is None and not why_not:
        why_not = f"the batched ncu run wrote no report; {logs}"
    if parsed is not None and groups is None and not why_not:
        why_not = "the report's launches carry no NVTX range names (read without ncu_report), so it cannot be split"
    wanted = metric_set(cc).names
    for nodeid in nodeids:
        index = index_of.get(nodeid)
        ended = progress.ended.get(index) if index is not None else None
        if crashed is not None and (index is None or index >= crashed[0]):
            outcome.fallback.append(nodeid)
            outcome.notes[nodeid] = why_not
            continue
        if ended != "passed" or groups is None:
            outcome.fallback.append(nodeid)
            outcome.notes[nodeid] = why_not or (f"{nodeid} failed in the batched ncu child" if ended == "failed"
                                                else f"{nodeid} did not run in the batched ncu child")
            continue
        group = groups.get(index)  # type: ignore[arg-type]
        if group is None or not group.launches:
            outcome.errors[nodeid] = NoKernelsInRange(
                f"no kernel ran inside the pytest_roofline NVTX ranges of {nodeid} in the batched ncu run: the GPU "
                f"work must run inside roofline.measure(...) (log: {ncu_log})")
            continue
        trimmed = write_trimmed(folder / f"{backend.artifact_stem(nodeid)}{TRIMMED_SUFFIX}", group.launches, wanted)
        report = build_report(group, str(trimmed), cc=cc, clock_control=clock_control)
        kept = outcome.full_report or trimmed
        outcome.profiles[nodeid] = backend.NcuProfile(report, kept, ncu_log, child_log, list(outcome.argv))
