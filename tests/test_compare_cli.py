"""``python -m pytest_roofline compare A B`` on history files built here, and against the baseline gate itself.

numpy and matplotlib are imported here, once: pytester's in-process runs drop modules first imported during a
run (importing numpy twice crashes it), and the gate's regression draws a chart.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

from pytest_roofline.commands import main
from pytest_roofline.record.machine_key import machine_key

PINNED = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}
KEY = machine_key(PINNED)
NOISE = (1.00, 1.03, 0.98, 1.01, 0.99)  # each baseline session's time per call, in units of the test's time


def record(nodeid: str, time_s: float, flops: float, fraction: float, bound: str = "compute:fp32") -> dict[str, Any]:
    """A test record as the plugin writes it: 20 rounds within ±0.5 % of ``time_s``, counted work."""
    samples = [time_s * (1 + 0.005 * math.sin(i)) for i in range(20)]
    return {"nodeid": nodeid, "fraction": fraction, "time_s": time_s, "bound": bound,
            "flops_by_precision": {"fp32": flops}, "bytes": {"DRAM": flops / 100},
            "regions": [{"t_min_s": time_s * fraction, "timing": {"samples_s": samples}}]}


def session(folder: Path, index: int, tests: list[dict[str, Any]], *, branch: str = "main",
            commit: str | None = None, key: str = KEY, year: int = 2025) -> Path:
    document = {"format": "pytest-roofline-history", "schema": 1,
                "session": {"id": f"s{index}", "start": f"{year}-11-25T06:{index:02d}:00+00:00",
                            "git": {"commit": commit or f"{index:x}" * 40, "branch": branch, "dirty": False}},
                "machine": {"key": key, **PINNED}, "tests": tests}
    path = folder / key / f"{year}1125T06{index:02d}00Z-{index:012d}-abcd.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def twice_history(folder: Path) -> Path:
    """Five sessions on main: a matmul at 1 ms (fraction 0.8, 1e8 FLOPs), an axpy at 2 ms and a test later
    removed; then one on branch twice where the matmul runs twice (2 ms, 2e8 FLOPs, fraction 0.8), the axpy
    is unchanged and a new test appears."""
    for i, f in enumerate(NOISE):
        g = NOISE[-1 - i]
        session(folder, i, [record("t.py::test_matmul", 1e-3 * f, 1e8, 0.8 / f),
                            record("t.py::test_axpy", 2e-3 * g, 1e6, 1.0 / g, "memory:DRAM"),
                            record("t.py::test_old", 1e-3, 1e6, 0.5, "memory:DRAM")])
    session(folder, 5, [record("t.py::test_matmul", 2e-3, 2e8, 0.8),
                        record("t.py::test_axpy", 2e-3, 1e6, 1.0, "memory:DRAM"),
                        record("t.py::test_new", 1e-3, 1e6, 0.5, "memory:DRAM")], branch="twice", commit="f" * 40)
    return folder


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines are matched whole: captured output (no terminal, no COLUMNS) is not wrapped."""
    monkeypatch.delenv("COLUMNS", raising=False)


def compare(history: Path, *args: str) -> int:
    return main(["history", "compare", *args, "--history", str(history)])


def test_latest_against_the_one_before_finds_twice_the_work(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    history = twice_history(tmp_path)
    assert compare(history, "latest~1", "latest") == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "A latest~1: s4 (commit 444444444444, main, 2025-11-25T06:04:00)"
    assert lines[1] == "B latest: s5 (commit ffffffffffff, twice, 2025-11-25T06:05:00)"
    # One session in A: the spread pooled over the matmul's and axpy's 5 sessions and test_old's (12 df).
    assert lines[3].endswith("sd 1.6% (pooled over this machine's tests, Student t with 12 df); fraction sd 1.6%")
    rows = {line.split()[0]: line.split() for line in lines if line.startswith("t.py::")}
    # A's matmul took 0.99 ms: 2 / 0.99 = 2.02; the work is 2e8 / 1e8 FLOPs.
    assert rows["t.py::test_matmul"] == ["t.py::test_matmul", "990", "us", "2.00", "ms", "×2.02", "[1.94,", "2.09]",
                                         "0.808", "→", "0.800", "more", "×2.00", "regressed"]
    assert "    time ×2.02 against latest~1: work ×2.00 at the same fraction (0.80)" in lines
    assert rows["t.py::test_axpy"][-2:] == ["same", "steady"] and rows["t.py::test_axpy"][5] == "×1.00"
    assert rows["t.py::test_new"][-1] == "new" and rows["t.py::test_old"][-1] == "removed"
    assert lines[-1] == "4 test(s): 1 regressed, 1 steady, 1 new, 1 removed"


def test_a_branch_is_the_reference_with_each_tests_own_spread(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    history = twice_history(tmp_path)
    assert compare(history, "main", "twice", "--json") == 1
    records = {r["nodeid"]: r for r in json.loads(capsys.readouterr().out)}
    matmul = records["t.py::test_matmul"]
    assert matmul["sessions"] == ["s0", "s1", "s2", "s3", "s4"]
    time = matmul["changes"]["time"]
    assert time["reference"] == pytest.approx(1e-3) and time["ratio"] == pytest.approx(2.0)  # median of 5
    assert time["spread"]["source"] == "own" and time["spread"]["df"] == 4
    assert matmul["verdict"] == "regressed" and matmul["failed_on"] == ["time"]
    assert matmul["changes"]["work"]["ratio"] == 2.0 and matmul["changes"]["fraction"]["verdict"] == "same"
    assert matmul["explanation"] == "time ×2.00 against main: work ×2.00 at the same fraction (0.80)"
    assert records["t.py::test_axpy"]["verdict"] == "steady"
    assert records["t.py::test_new"]["verdict"] == "new" and records["t.py::test_new"]["changes"] is None
    assert records["t.py::test_old"]["verdict"] == "removed"
    # Failed on the fraction only, twice the work at the same fraction is reported, not failed.
    assert compare(history, "main", "twice", "--fail-on", "fraction") == 0
    assert "t.py::test_matmul" in (line := next(x for x in capsys.readouterr().out.splitlines()
                                                if x.startswith("t.py::test_matmul"))) and line.endswith("changed")


def test_commit_prefix_and_session_id_select_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = twice_history(tmp_path)
    assert compare(history, "3333333", "s4", "--json") == 0  # an unchanged session against another
    records = {r["nodeid"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["t.py::test_matmul"]["sessions"] == ["s3"]
    assert records["t.py::test_matmul"]["changes"]["time"]["ratio"] == pytest.approx(0.99 / 1.01)
    assert {r["verdict"] for r in records.values()} == {"steady"}


def test_bad_input_says_what_was_searched_and_what_exists(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    history = twice_history(tmp_path)
    assert compare(history, "nope", "latest") == 2
    err = capsys.readouterr().err
    assert "A 'nope' names no session: searched session ids, commits and branches" in err
    assert "The 5 latest of 6 session(s), newest first:\n  s5 (commit ffffffffffff, twice" in err
    assert "  s1 (commit 111111111111, main" in err and "s0 (" not in err and "Branches: main, twice" in err
    assert compare(history, "latest~6", "latest") == 2
    assert "the history holds 6 session(s), so latest~N goes back at most to latest~5" in capsys.readouterr().err
    assert compare(history, "latest", "latest") == 2
    assert "both name only session s5" in capsys.readouterr().err
    session(history, 6, [record("t.py::test_matmul", 1e-3, 1e8, 0.8)], commit="ab" * 20)
    session(history, 7, [record("t.py::test_matmul", 1e-3, 1e8, 0.8)], commit="abc" + "0" * 37)
    assert compare(history, "abababa", "latest") == 0  # 7 hex characters of one commit
    assert compare(history, "abababa"[:6], "latest") == 2  # 6 are not a commit, nor a branch
    capsys.readouterr()
    session(history, 8, [record("t.py::test_matmul", 1e-3, 1e8, 0.8)], commit="abababa" + "1" * 33)
    assert compare(history, "abababa", "latest") == 2
    assert "is the prefix of 2 commits (abababa11111, abababababab): give more of it" in capsys.readouterr().err
    assert compare(tmp_path / "missing", "latest~1", "latest") == 2
    assert "--history" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        compare(history, "latest~1", "latest", "--max-slowdown", "-0.1")
    assert exit_info.value.code == 2
    assert "--max-slowdown must be a number > 0" in capsys.readouterr().err


def test_another_machine_is_left_out_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = twice_history(tmp_path)
    session(history, 9, [record("t.py::test_matmul", 5e-3, 1e8, 0.2)], key="other-00000000")
    assert compare(history, "latest~1", "latest") == 2  # B is the other machine's one session: nothing before it
    capsys.readouterr()
    assert compare(history, "latest~1", "latest", "--machine-key", KEY) == 1
    assert f"machine {KEY} (1 session(s) of other machines left out; --machine-key picks)" in capsys.readouterr().out
    assert compare(history, "latest~1", "latest", "--machine-key", "nope") == 2
    assert f"--machine-key 'nope': no session of that machine; the history holds other-00000000, {KEY}" in \
        capsys.readouterr().err


def test_a_closed_pipe_is_no_traceback(tmp_path: Path) -> None:
    history = twice_history(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, "-m", "pytest_roofline", "history", "compare", "main", "twice",
                                "--history", str(history)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the table is written, as `| head -0`
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 1  # the verdict's exit code survives the closed pipe
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# Declared work and sleep both scale with ROOFLINE_TEST_K: k = 2 runs every op twice.
TWICE = """
import os, pytest, time

@pytest.mark.roofline
def test_step(roofline):
    k = int(os.environ.get("ROOFLINE_TEST_K", "1"))
    roofline.declare(flops=1e8 * k).measure(time.sleep, 0.001 * k)
"""


def test_compare_gives_the_verdict_the_gate_gave(pytester: pytest.Pytester, machine_file: Path,
                                                 monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                 run_roofline: Callable[..., pytest.RunResult]) -> None:
    """Five crafted sessions at 1.05 ms per call, then the gate runs the test with every op twice: compare
    latest~1 latest must agree with what the gate wrote into the latest history file."""
    pytester.makepyfile(test_twice=TWICE)
    history = pytester.path / ".roofline" / "history"
    for i, f in enumerate(NOISE):  # t_min of 1e8 FLOPs at 100 GFLOP/s: 1 ms
        session(history, i, [record("test_twice.py::test_step", 1.05e-3 * f, 1e8, 1 / 1.05 / f)])
    monkeypatch.setenv("ROOFLINE_TEST_K", "2")
    assert run_roofline(machine_file, "--roofline-baseline", ".roofline/history").ret == pytest.ExitCode.TESTS_FAILED
    latest = max(history.rglob("*.json"), key=lambda p: json.loads(p.read_text())["session"]["start"])
    gate: Mapping[str, Any] = json.loads(latest.read_text())["tests"][0]["baseline"]
    assert gate["verdict"] == "regressed" and "time" in gate["failed_on"]
    capsys.readouterr()
    assert main(["compare", "latest~1", "latest", "--history", str(history), "--json"]) == 1  # the old spelling
    said = capsys.readouterr()
    assert "compare is deprecated; use history compare" in said.err
    (mine,) = json.loads(said.out)
    assert mine["verdict"] == gate["verdict"] and "time" in mine["failed_on"]
    assert mine["changes"]["work"]["ratio"] == gate["changes"]["work"]["ratio"] == 2.0
    assert mine["changes"]["time"]["ratio"] == pytest.approx(gate["changes"]["time"]["ratio"], rel=0.05)


def test_an_unknown_selector_prints_the_historys_ids_and_branches_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Session ids and branches come from history files anyone may have written: ESC, OSC, BEL and U+202E
    are shown as escapes, never sent to the terminal."""
    history = tmp_path / "history"
    hostile = "\x1b[2J\x1b]0;owned\x07\u202eevil"
    path = session(history, 0, [record("t.py::test_matmul", 1e-3, 1e8, 0.8)], branch=hostile)
    document = json.loads(path.read_text())
    document["session"]["id"] = hostile
    path.write_text(json.dumps(document))
    assert compare(history, "nope", "latest") == 2
    err = capsys.readouterr().err
    # such an id or branch is refused by the reader: the file is named as skipped, its id shown escaped
    assert "is not a session id" in err and "the history holds no readable session" in err
    assert not any(c in err for c in "\x1b\x07\u202e"), repr(err)
    assert "\\x1b[2J\\x1b]0;owned\\x07\\u202eevil" in err


def test_git_revisions_name_their_commits_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    shas = []
    for n in range(2):
        (repo / "f.txt").write_text(str(n))
        git("add", "f.txt")
        git("commit", "-qm", f"c{n}")
        shas.append(git("rev-parse", "HEAD"))
    history = tmp_path / "history"
    for i, f in enumerate(NOISE):
        session(history, i, [record("t.py::test_matmul", 1e-3 * f, 1e8, 0.8 / f)], commit=shas[0])
    session(history, 5, [record("t.py::test_matmul", 2e-3, 2e8, 0.8)], commit=shas[1])
    monkeypatch.chdir(repo)
    assert compare(history, "HEAD~1", "HEAD", "--json") == 1  # 2x the time at HEAD
    (matmul,) = json.loads(capsys.readouterr().out)
    assert matmul["sessions"] == ["s0", "s1", "s2", "s3", "s4"] and matmul["verdict"] == "regressed"
    assert compare(history, "HEAD~1", "no-such-revision") == 2
    assert "'no-such-revision' names no session" in capsys.readouterr().err


def test_the_table_fits_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    history = twice_history(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    assert compare(history, "main", "twice") == 1
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100 and any(line.startswith("t.py::test_matmul") for line in lines)
