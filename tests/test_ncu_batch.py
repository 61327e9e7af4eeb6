"""The batched ncu child: one run for several tests, split by NVTX range, with the crash fallback.

The ncu run is faked by a runner that writes what the real child would leave behind: the progress file the
child's plugin writes, ncu's log, and a report. The report is built from the launches of a real H100 report
(``fixtures/ncu/h100_conv2d_fp32.trimmed.ncu.csv``, see its ``.source.txt``) with their ``NVTX Range`` column
rewritten to the batched range names of two or three tests.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.counters.ncu import batch as batch_module
from pytest_roofline.counters.ncu.batch import profile_batch, range_test_index, read_progress, split_by_test
from pytest_roofline.counters.ncu.child import PROGRESS_ENV, BatchProgress, ChildRecorder
from pytest_roofline.counters.ncu.deferred import NcuBatches
from pytest_roofline.counters.ncu.kernel_report import build_report
from pytest_roofline.counters.ncu.parse import parse_csv_text
from pytest_roofline.errors import CountersNotPermitted, NoKernelsInRange
from pytest_roofline.host.process_role import CHILD_ENV

FIXTURE = Path(__file__).parent / "fixtures" / "ncu" / "h100_conv2d_fp32.trimmed.ncu.csv"
NODES = ["tests/test_a.py::test_one", "tests/test_a.py::test_two[x]", "tests/test_b.py::test_three"]
GEMM_TF32_FLOPS = 2 * 8 * 64 * 64 * 9 * 56 * 56  # the conv's implicit GEMM, 1,849,688,064
NCHW_FP32_FLOPS = 1_642_496.0  # the two nchwToNhwc launches of the H100 report, summed


def retagged(ranges: list[str]) -> str:
    """The H100 launches (2 x nchwToNhwc, the implicit GEMM, an add) with their range column set per launch."""
    rows = list(csv.reader(io.StringIO(FIXTURE.read_text())))
    column = rows[0].index("NVTX Range")
    kept = [rows[0], rows[1]]
    for row, name in zip(rows[2:], ranges):
        if name != "-":
            row[column] = name
            kept.append(row)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(kept)
    return out.getvalue()


class FakeBatchRun:
    """Stands in for subprocess.run under ncu: the child's progress lines, ncu's log, the exported report."""

    def __init__(self, report: str | None, progress: list[str], returncode: int = 0, log: str = "",
                 timeout: bool = False) -> None:
        self.report, self.progress, self.returncode, self.log, self.timeout = report, progress, returncode, log, timeout
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        self.calls.append((list(argv), kwargs))
        Path(argv[argv.index("--log-file") + 1]).write_text("==PROF== Connected\n" + self.log)
        Path(kwargs["env"][PROGRESS_ENV]).write_text("".join(line + "\n" for line in self.progress))
        if self.report is not None:
            Path(argv[argv.index("--export") + 1]).write_text(self.report)
        if self.timeout:
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        return subprocess.CompletedProcess(argv, self.returncode)


def read_csv(path: Path, ncu: str | None = None) -> Any:
    return parse_csv_text(Path(path).read_text())


def done(*indices: int, failed: tuple[int, ...] = ()) -> list[str]:
    lines = []
    for i in indices:
        lines += [f"start\t{i}\t{NODES[i]}", f"end\t{i}\t{NODES[i]}\t{'failed' if i in failed else 'passed'}"]
    return lines


def run(tmp_path: Path, fake: FakeBatchRun, nodes: list[str] = NODES, **options: Any) -> batch_module.BatchOutcome:
    return profile_batch(nodes, tmp_path / "artifacts", cc=(9, 0), ncu="/opt/ncu/ncu", python="/venv/bin/python",
                         runner=fake, reader=read_csv, lock_dir=tmp_path / "lock", env={"PATH": "/usr/bin"},
                         **options)


def test_the_trimmed_h100_report_reads_back_to_the_counts_of_the_full_one() -> None:
    report = build_report(parse_csv_text(FIXTURE.read_text()), cc=(9, 0))
    by_name = {k.name.split("<")[0].split("(")[0]: k for k in report.kernels}
    gemm = next(k for name, k in by_name.items() if "implicit_gemm" in name)
    assert gemm.flops["tf32_tensor"] == GEMM_TF32_FLOPS == 1_849_688_064
    assert gemm.time_s == pytest.approx(22.304e-6)
    assert report.launch_count == 4 and len(report.kernels) == 3
    assert FIXTURE.stat().st_size < 4096  # against 8,928,653 bytes for the .ncu-rep of the same 4 launches


def test_range_names_give_the_test_index() -> None:
    assert [range_test_index(n) for n in ("t0-region-0", "t12-region-3", "region-0", "t1-regionx", "x")] == [
        0, 12, None, None, None]


def test_one_run_profiles_every_test_and_splits_the_report_by_range(tmp_path: Path) -> None:
    fake = FakeBatchRun(retagged(["t0-region-0", "t0-region-0", "t1-region-0", "t1-region-1"]), done(0, 1, 2))
    outcome = run(tmp_path, fake)
    (argv, kwargs), = fake.calls  # one ncu run for the three tests
    assert argv[argv.index("/venv/bin/python"):argv.index("/venv/bin/python") + 6] == [
        "/venv/bin/python", "-m", "pytest", *NODES]
    assert argv[argv.index("--nvtx-include") + 1] == "regex:pytest_roofline@.+"
    assert kwargs["env"][CHILD_ENV] == "1" and kwargs["env"][PROGRESS_ENV].endswith(".progress")
    one, two = outcome.profiles[NODES[0]], outcome.profiles[NODES[1]]
    assert [(k.launches, k.flops["fp32"]) for k in one.report.kernels] == [(2, NCHW_FP32_FLOPS)]
    assert one.report.launch_count == 2 and two.report.launch_count == 2
    assert sorted(k.flops["tf32_tensor"] for k in two.report.kernels) == [0.0, GEMM_TF32_FLOPS]
    assert isinstance(outcome.errors[NODES[2]], NoKernelsInRange)  # ran, but no kernel in its ranges
    assert "test_three" in str(outcome.errors[NODES[2]]) and outcome.fallback == []
    # Per test, a trimmed report of its own launches; no .ncu-rep kept, no partial file left.
    assert one.report_path.name == "test_a.py__test_one.ncu.csv" and one.report_path.stat().st_size < 4096
    files = sorted(p.name for p in (tmp_path / "artifacts").iterdir())
    assert not [f for f in files if f.endswith(".ncu-rep")]
    assert "test_a.py__test_two_x_.ncu.csv" in files


def test_a_child_that_dies_in_test_two_names_it_and_the_rest_fall_back(tmp_path: Path) -> None:
    progress = done(0) + [f"start\t1\t{NODES[1]}"]  # died inside test 2, test 3 never started
    fake = FakeBatchRun(retagged(["t0-region-0", "t0-region-0", "-", "-"]), progress, returncode=-11)
    outcome = run(tmp_path, fake)
    assert list(outcome.profiles) == [NODES[0]]
    assert outcome.profiles[NODES[0]].report.kernels[0].flops["fp32"] == NCHW_FP32_FLOPS
    assert outcome.fallback == NODES[1:]
    note = outcome.notes[NODES[1]]
    assert f"died in {NODES[1]} (test 2 of 3)" in note and ".ncu.log" in note
    assert outcome.notes[NODES[2]] == note


def test_a_timeout_names_the_test_it_was_in(tmp_path: Path) -> None:
    fake = FakeBatchRun(None, done(0) + [f"start\t1\t{NODES[1]}"], timeout=True)
    outcome = run(tmp_path, fake)
    assert outcome.profiles == {} and outcome.fallback == NODES  # ncu was killed: no report for test 1 either
    assert f"timed out after 2 tests in {NODES[1]} (test 2 of 3)" in outcome.notes[NODES[1]]


def test_a_test_that_failed_in_the_child_gets_a_child_of_its_own(tmp_path: Path) -> None:
    fake = FakeBatchRun(retagged(["t0-region-0", "t0-region-0", "t2-region-0", "-"]), done(0, 1, 2, failed=(1,)),
                        returncode=1)
    outcome = run(tmp_path, fake)
    assert sorted(outcome.profiles) == [NODES[0], NODES[2]]
    assert outcome.fallback == [NODES[1]] and "failed in the batched ncu child" in outcome.notes[NODES[1]]


def test_launches_without_range_names_cannot_be_split(tmp_path: Path) -> None:
    fake = FakeBatchRun(retagged(["", "", "", ""]), done(0, 1, 2))
    outcome = run(tmp_path, fake)
    assert outcome.profiles == {} and outcome.fallback == NODES
    assert "no NVTX range names" in outcome.notes[NODES[0]]


def test_full_keeps_the_report(tmp_path: Path) -> None:
    fake = FakeBatchRun(retagged(["t0-region-0", "t0-region-0", "t1-region-0", "t2-region-0"]), done(0, 1, 2))
    outcome = run(tmp_path, fake, full=True)
    assert outcome.full_report is not None and outcome.full_report.is_file()
    assert outcome.profiles[NODES[2]].report_path == outcome.full_report


def test_no_permission_is_raised_for_the_whole_batch(tmp_path: Path) -> None:
    fake = FakeBatchRun(None, [], returncode=1, log="==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    with pytest.raises(CountersNotPermitted, match="NVreg_RestrictProfilingToAdminUsers=0"):
        run(tmp_path, fake)


def test_progress_file_and_range_prefix_of_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.progress"
    progress = BatchProgress.from_env({PROGRESS_ENV: str(path)})
    assert progress is not None and BatchProgress.from_env({}) is None
    progress.start(NODES[0])
    progress.finish(NODES[0])
    progress.start(NODES[1])
    assert progress.prefix() == "t1-region-"
    events: list[Any] = []
    nvtx = type(sys)("nvtx")
    nvtx.start_range = lambda message=None, domain=None: events.append((message, domain)) or 1  # type: ignore
    nvtx.end_range = lambda handle: None  # type: ignore
    monkeypatch.setitem(sys.modules, "nvtx", nvtx)
    ChildRecorder(progress.prefix()).measure(lambda: None)
    assert events == [("t1-region-0", "pytest_roofline")]
    read = read_progress(path)
    assert read.started == [(0, NODES[0]), (1, NODES[1])] and read.ended == {0: "passed"}
    assert read.running() == (1, NODES[1])


def test_split_needs_exactly_one_test_per_launch() -> None:
    parsed = parse_csv_text(retagged(["t0-region-0", "t0-region-0", "t1-region-0", "t1-region-1"]))
    groups = split_by_test(parsed)
    assert groups is not None and {i: len(g.launches) for i, g in groups.items()} == {0: 2, 1: 2}
    assert split_by_test(parse_csv_text(retagged(["t0-region-0", "region-0", "-", "-"]))) is None


def test_the_session_runs_one_batch_and_hands_each_test_its_profile() -> None:
    runs: list[list[str]] = []

    def fake(ids: list[str]) -> batch_module.BatchOutcome:
        runs.append(ids)
        outcome = batch_module.BatchOutcome()
        outcome.profiles[ids[0]] = "profile-one"  # type: ignore[assignment]
        outcome.fallback.append(ids[1])
        outcome.notes[ids[1]] = "the batched ncu child died in it"
        outcome.errors[ids[2]] = NoKernelsInRange("nothing in range")
        return outcome

    batches = NcuBatches()
    assert batches.profile_for(NODES[0], NODES, fake) == ("profile-one", None)
    assert batches.profile_for(NODES[1], NODES[1:], fake) == (
        None, "profiled in a child of its own: the batched ncu child died in it")
    with pytest.raises(NoKernelsInRange):
        batches.profile_for(NODES[2], NODES[2:], fake)
    assert runs == [NODES]  # one batched run for the three
    assert batches.profile_for("tests/test_c.py::alone", ["tests/test_c.py::alone"], fake) == (None, None)
    assert runs == [NODES]  # a lone test goes straight to its own child


def test_ncu_report_is_found_in_the_extras_folder_of_a_cuda_toolkit(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA toolkit's bin/ncu next to nsight-compute-<version>/extras/python/ncu_report.py (NVIDIA's layout)."""
    from pytest_roofline.counters.ncu import rep

    if importlib.util.find_spec("ncu_report") is not None:
        pytest.skip("ncu_report is importable here: the extras folder is not looked at")
    bin_dir = tmp_path / "cuda-13.0" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "ncu").write_text("#!/bin/sh\n")
    extras = tmp_path / "cuda-13.0" / "nsight-compute-2025.3.1" / "extras" / "python"
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text("WHERE = 'extras'\n")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the extras folder is appended: restored afterwards
    try:
        module = rep.find_ncu_report_module(str(bin_dir / "ncu"))
        assert module is not None and module.WHERE == "extras" and str(extras) in sys.path
        sys.modules.pop("ncu_report", None)
        assert batch_module.can_split(str(bin_dir / "ncu"))
    finally:
        sys.modules.pop("ncu_report", None)  # the stub must not be found by later tests
