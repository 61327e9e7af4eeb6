"""History files (pytest_roofline/history): machine key, layout, atomic writes, reading back, selection."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.errors import StoreError
from pytest_roofline.history import environment, writer
from pytest_roofline.history.baseline import for_test, load_baseline, same_environment, select
from pytest_roofline.history.reader import load
from pytest_roofline.record.machine_key import UNKNOWN_KEY, machine_key, readable_name
from pytest_roofline.record.sessions import GitState, Session, SessionInfo, SessionRecord
from pytest_roofline.record.tests import TestRecord

MACHINE = {"name": "AMD EPYC 9R14 (2 cores)", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10},
           "info": {}}


def document(start: str = "2026-11-25T06:39:23.916956+00:00", commit: str | None = "a" * 40,
             branch: str | None = "main", machine: dict[str, Any] | None = None,
             session_id: str = "s1") -> SessionRecord:
    results = {"schema": 1, "machine": machine or MACHINE, "tests": [{"nodeid": "t.py::test_a", "fraction": 0.5}]}
    return SessionRecord.of_results(results, SessionInfo(
        id=session_id, start=start, end=start, exit_status=0, git=GitState(commit, branch, False),
        versions={"python": "3.11.7"}, pytest_args=("--roofline",), counter="analytic"))


def test_machine_key_is_readable_and_follows_the_fingerprint() -> None:
    key = machine_key(MACHINE)
    assert key.startswith("amd-epyc-9r14-2-cores-") and len(key.rsplit("-", 1)[1]) == 8
    assert machine_key({**MACHINE, "info": {"fingerprint_hash": "abc"}}) != key  # the hash decides, not roofs
    assert machine_key({**MACHINE, "bandwidth": {"DRAM": 2e10}}) != key  # pinned: the roofs are the identity
    assert machine_key(None) == UNKNOWN_KEY
    assert readable_name("../x y/..") == "x-y"


def test_the_file_lands_under_its_machine_key_with_time_and_commit(tmp_path: Path) -> None:
    path = writer.write_history(tmp_path, document())
    assert path.parent == tmp_path / machine_key(MACHINE)
    stamp, commit, suffix = path.stem.split("-")
    assert (stamp, commit, len(suffix)) == ("20261125T063923Z", "a" * 12, 4)
    written = json.loads(path.read_text())
    assert written["format"] == "pytest-roofline-history" and written["schema"] == 1
    assert written["session"]["git"]["commit"] == "a" * 40
    assert written["session"]["counter"] == "analytic"
    assert written["machine"]["key"] == machine_key(MACHINE) and written["machine"]["peak_flops"] == {"fp32": 1e11}
    nogit = writer.write_history(tmp_path, document(commit=None))
    assert "-nogit-" in nogit.name
    assert nogit != path


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_link(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "link", broken_link)
    with pytest.raises(StoreError, match="No space left on device"):
        writer.write_history(tmp_path, document())
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # neither the file nor its temp file


def test_corrupt_foreign_and_newer_files_are_skipped_and_named(tmp_path: Path) -> None:
    good = writer.write_history(tmp_path, document())
    folder = good.parent
    (folder / "corrupt.json").write_text("{not json")
    (folder / "foreign.json").write_text(json.dumps({"format": "something-else", "tests": []}))
    (folder / "newer.json").write_text(json.dumps({**document().to_dict(), "schema": 99}))
    (folder / "list.json").write_text("[1, 2]")
    loaded = load(tmp_path)
    assert [s.source for s in loaded.sessions] == [str(good)]
    skipped = " ".join(loaded.skipped)
    assert len(loaded.skipped) == 4
    for name in ("corrupt.json", "foreign.json", "newer.json", "list.json"):
        assert name in skipped
    assert "schema 99 is newer" in skipped


def test_a_results_json_is_one_session_keyed_by_its_machine(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": 1, "machine": MACHINE,
                                "session": {"id": "r1", "start": "2026-11-25T06:39:23+00:00"},
                                "tests": [{"nodeid": "t.py::test_a", "fraction": 0.4}]}))
    (session,) = load(path).sessions
    assert (session.id, session.machine_key, session.commit) == ("r1", machine_key(MACHINE), None)
    assert session.tests["t.py::test_a"].fraction == 0.4


def make(index: int, key: str = "m-1", branch: str | None = "main", tests: tuple[str, ...] = ("t",),
         torch: str | None = None, threads: int | None = None, params: dict | None = None) -> Session:
    regions = [{"cores": {"count": threads}}] if threads else []
    return Session(id=f"s{index}", start=f"2026-11-25T0{index}:00:00", machine_key=key, commit=None,
                   branch=branch, source="",
                   tests={t: TestRecord(t, fraction=0.5, regions=tuple(regions), params=params) for t in tests},
                   environment={"torch": torch} if torch else {})


def test_selection_keeps_this_machine_and_prefers_this_branch_when_it_has_enough() -> None:
    sessions = [make(0), make(1, key="other-2"), make(2, branch="dev"), make(3), make(4, branch="dev")]
    mine, notes = select(sessions, key="m-1", any_machine=False)
    assert [s.id for s in mine] == ["s0", "s2", "s3", "s4"] and "other-2" in notes[0]
    assert [s.id for s in for_test(mine, "t", None, {}, "main", 2)] == ["s0", "s3"]  # the last two of main
    # main has only 2: the last 3 of any branch
    assert [s.id for s in for_test(mine, "t", None, {}, "main", 3)] == ["s2", "s3", "s4"]
    everything, notes = select(sessions, key="m-1", any_machine=True)
    assert [s.id for s in everything] == ["s0", "s1", "s2", "s3", "s4"] and notes == []


def test_a_partial_run_does_not_hide_other_tests_baselines() -> None:
    # three full runs, then four debugging runs of test a alone: b's baseline is still the full runs
    sessions = [make(i, tests=("a", "b")) for i in range(3)] + [make(i, tests=("a",)) for i in range(3, 7)]
    assert [s.id for s in for_test(sessions, "b", None, {}, "main", 5)] == ["s0", "s1", "s2"]
    assert [s.id for s in for_test(sessions, "a", None, {}, "main", 5)] == ["s2", "s3", "s4", "s5", "s6"]


def test_sessions_of_another_environment_or_other_params_are_not_a_baseline() -> None:
    sessions = [make(0, torch="2.12.0", threads=1), make(1, torch="2.13.0", threads=1),
                make(2, torch="2.13.0", threads=2), make(3), make(4, params={"n": 2})]
    chosen = for_test(sessions, "t", {"n": 1}, {"torch": "2.13.0", "threads": 1}, None, 5)
    # s0: other torch; s2: other thread count; s3 recorded neither (an older file): kept; s4: other params
    assert [s.id for s in chosen] == ["s1", "s3"]
    assert same_environment({"torch": "2.13.0"}, {"torch": "2.13.0", "threads": 4})


def test_a_file_copied_into_the_wrong_folder_is_read_by_its_key(tmp_path: Path) -> None:
    path = writer.write_history(tmp_path, document())
    moved = tmp_path / "someone-else" / path.name
    moved.parent.mkdir()
    shutil.move(path, moved)
    baseline = load_baseline(tmp_path, key=machine_key(MACHINE), branch="main", count=5, any_machine=False)
    assert [s.source for s in baseline.sessions] == [str(moved)]


def test_git_state_without_a_repository_is_all_none(tmp_path: Path) -> None:
    assert environment.git_state(tmp_path) == GitState(commit=None, branch=None, dirty=None)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_state_reads_commit_branch_and_dirty(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q", "-b", "trunk")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("commit", "-qm", "one")
    state = environment.git_state(tmp_path)
    assert state.commit is not None and len(state.commit) == 40 and state.branch == "trunk" and state.dirty is False
    (tmp_path / "f").write_text("2")
    assert environment.git_state(tmp_path).dirty is True


def test_versions_take_the_driver_from_the_fingerprint() -> None:
    found = environment.versions({"fingerprint": {"driver_version": 12040}})
    assert found["driver"] == "12040" and found["python"].count(".") == 2
    assert found["pytest_roofline"]


def test_session_files_take_ready_made_records_and_report_errors_as_text(tmp_path: Path) -> None:
    """What the pytest-xdist controller calls with the workers' records; nothing raises."""
    from pytest_roofline.history.session_files import Targets, write_session_files
    from pytest_roofline.model import Machine

    targets = Targets(directory=tmp_path / "out", session_id="20261125T063923.916Z-1", history=tmp_path / "hist")
    machine = Machine.from_dict(MACHINE)
    meta = {"id": targets.session_id, "start": "2026-11-25T06:39:23.916956+00:00", "end": "x", "exit_status": 0}
    records = [TestRecord("t.py::test_a", fraction=0.5, params={}, function="t.py::test_a")]
    done = write_session_files(targets, machine, records, meta, ["--roofline"], counter_label="analytic (auto)",
                               root=tmp_path)
    assert done.errors == [] and done.results_written and not done.history_unsent
    (history,) = (tmp_path / "hist").rglob("*.json")
    assert done.history_file == str(history)
    doc = json.loads(history.read_text())
    written = [{"nodeid": "t.py::test_a", "outcome": "not run", "min_fraction": None, "artifacts": [],
                "counter": None, "fraction": 0.5, "bound": None, "time_s": None, "flops": None, "bytes": {},
                "kernels": [], "regions": [], "function": "t.py::test_a", "params": {}}]
    assert doc["tests"] == written and doc["session"]["counter"] == "analytic"
    assert doc["session"]["id"] == targets.session_id and doc["session"]["pytest_args"] == ["--roofline"]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["tests"] == written
    blocked = Targets(directory=tmp_path / "out", session_id="s2",
                      history=tmp_path / "out" / "results.json" / "under-a-file")
    errors = write_session_files(blocked, machine, records, meta, [], root=tmp_path).errors
    assert len(errors) == 1 and errors[0].startswith("roofline: could not write the history under")
