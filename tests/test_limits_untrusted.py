"""Issue 26: ``characterize --cores`` is bounded as ``--roofline-cores`` is; killed sessions' folders are pruned
with the rest, never a running session's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_roofline._atomic import write_text_atomic
from pytest_roofline.commands import main
from pytest_roofline.history.results_dir import (
    ABANDONED_S,
    RESULTS_FILE,
    STALE_S,
    is_abandoned,
    prune_sessions,
)
from pytest_roofline.host.cores import base_affinity


@pytest.mark.parametrize("flag", [[], ["--fingerprint"]])
def test_characterize_refuses_more_cores_than_it_may_run_on(capsys: pytest.CaptureFixture[str],
                                                             flag: list[str]) -> None:
    allowed = sorted(base_affinity())
    began = time.monotonic()
    assert main(["characterize", "--cores", "999", *flag]) == 2
    assert time.monotonic() - began < 5  # refused, not measured
    assert capsys.readouterr().err == (f"characterize: --cores: 999 cores asked for, this process may run on "
                                       f"{len(allowed)} ({','.join(map(str, allowed))})\n")
    assert main(["characterize", "--cores", "0", *flag]) == 2
    assert capsys.readouterr().err == "characterize: --cores must be a number of cores >= 1, got 0\n"


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def folder(root: Path, day: int, pid: int, idle_s: float = 0.0, finished: bool = False) -> Path:
    path = root / "sessions" / f"2026010{day}T000000.000Z-{pid}"
    path.mkdir(parents=True)
    (path / "chart.png").write_bytes(b"png")
    if finished:
        write_text_atomic(path / RESULTS_FILE, "{}")
    stamp = time.time() - idle_s
    os.utime(path, (stamp, stamp))
    return path


def test_killed_sessions_are_pruned_with_the_rest_never_a_running_one(tmp_path: Path) -> None:
    gone, alive = dead_pid(), os.getpid()
    killed = folder(tmp_path, 1, gone, idle_s=STALE_S * 2)  # killed long ago, its process gone
    running = folder(tmp_path, 2, alive, idle_s=STALE_S * 2)  # quiet for a while, but still running
    just_killed = folder(tmp_path, 3, gone, idle_s=60)  # too fresh to tell from a slow start
    ancient = folder(tmp_path, 4, alive, idle_s=ABANDONED_S * 2)  # a week untouched: a reused pid
    finished = [folder(tmp_path, day, gone, finished=True) for day in (5, 6, 7)]
    assert [is_abandoned(p) for p in (killed, running, just_killed, ancient)] == [True, False, False, True]
    removed = prune_sessions(tmp_path, keep=2, current=finished[-1].name)
    assert sorted(p.name for p in removed) == sorted([killed.name, ancient.name, finished[0].name])
    assert sorted(p.name for p in (tmp_path / "sessions").iterdir()) == sorted(
        [running.name, just_killed.name, finished[1].name, finished[2].name])


def test_pid_zero_or_junk_names_are_not_taken_for_running_sessions(tmp_path: Path) -> None:
    assert is_abandoned(folder(tmp_path, 1, 0, idle_s=STALE_S * 2))  # pid 0 would signal our own group
    odd = tmp_path / "sessions" / "not-a-session"
    odd.mkdir()
    stamp = time.time() - STALE_S * 2
    os.utime(odd, (stamp, stamp))
    assert is_abandoned(odd)


def test_pinned_machine_files_are_read_bounded(tmp_path: Path) -> None:
    from pytest_roofline.characterize.pinned import load_machine_file

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(ValueError, match=r"^machine file .*deep.json: nested deeper than 64 levels$"):
        load_machine_file(deep)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"fifo.json: cannot read it \(not a regular file\)$"):
        load_machine_file(fifo)  # refused without opening it: no hang
    nan = tmp_path / "nan.json"
    nan.write_text('{"peak_flops": {"fp32": NaN}, "bandwidth": {"DRAM": 1e10}}')
    with pytest.raises(ValueError, match=r"peak_flops.fp32: must be a positive finite number, got nan"):
        load_machine_file(nan)


def test_import_ncu_machine_roofs_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roofs = tmp_path / "roofs.json"
    roofs.write_text('{"name": "m", "peak_flops": {"fp32": Infinity}, "bandwidth": {"DRAM": 1e10}}')
    assert main(["import-ncu", str(tmp_path / "any.csv"), "--machine-file", str(roofs)]) == 2
    assert capsys.readouterr().err == (f"import-ncu: cannot read machine file {roofs}: machine.peak_flops.fp32: inf "
                                       "is not a finite number in [1000, 1e+20]\n")
