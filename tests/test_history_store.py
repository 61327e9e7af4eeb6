"""History stores: a directory, an S3-compatible object store (moto's server on localhost, started here) and
a git branch (a bare repository in tmp_path): create-only writes, concurrent writers losing nothing, the gate
and the site reading from them, and a store that cannot be reached failing loudly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401 - imported once here, as test_plugin_history does (pytester reruns)
import numpy  # noqa: F401
import pytest

from pytest_roofline.errors import StoreError, StoreSettingError
from pytest_roofline.history import git_store, object_store, writer
from pytest_roofline.history.baseline import load_baseline
from pytest_roofline.history.location import open_store
from pytest_roofline.history.reader import load
from pytest_roofline.history.retention import Keep, prune
from pytest_roofline.history.store import (
    DirectoryStore,
    HistoryStore,
    WriteInDoubt,
    copy_sessions,
    printable_url,
    read_all,
    safe_name,
)
from pytest_roofline.record.machine_key import machine_key
from pytest_roofline.record.sessions import SessionRecord

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}
KEY = machine_key(MACHINE)

TEST = """
import os, pytest, time

@pytest.mark.roofline
def test_step(roofline):
    k = int(os.environ.get("ROOFLINE_TEST_K", "1"))
    roofline.declare(flops=1e8 * k).measure(time.sleep, 0.002 * k)
"""


def document(index: int = 0, commit: str = "a" * 40, start: str = "2026-11-25T06:39:23+00:00",
             session_id: str | None = None) -> dict[str, Any]:
    return {"format": "pytest-roofline-history", "schema": 1,
            "session": {"id": session_id or f"s{index}", "start": start,
                        "git": {"commit": commit, "branch": "main", "dirty": False}},
            "machine": {"key": KEY, **MACHINE},
            "tests": [{"nodeid": "t.py::test", "fraction": 0.5,
                       "regions": [{"t_min_s": 1e-3, "timing": {"samples_s": [2e-3] * 10}}]}]}


def record(index: int = 0, **changes: Any) -> SessionRecord:
    return SessionRecord.from_dict(document(index, **changes))


# --- names, URLs, options ------------------------------------------------------------------------------------

def test_object_names_from_a_store_cannot_leave_its_folder() -> None:
    assert safe_name("k-0123abcd/20261125T063923Z-aaaa-1f2e.json") == "k-0123abcd/20261125T063923Z-aaaa-1f2e.json"
    for bad in ("../x.json", "a/../../x.json", "/etc/passwd", "a//b.json", "a/./b.json", "a b.json", "a\\b.json", ""):
        with pytest.raises(StoreError, match="not a plain relative path"):
            safe_name(bad)


def test_locations_parse_and_bad_ones_name_what_is_accepted(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path), DirectoryStore)
    assert open_store(f"file://{tmp_path}").url == str(tmp_path)  # type: ignore[attr-defined]
    with pytest.raises(StoreSettingError, match=r"--roofline-history: 'ftp://h/x': the scheme 'ftp' is not a "
                                                r"history store; accepted: a directory.*"
                                                r"s3://BUCKET/PREFIX.*git:BRANCH"):
        open_store("ftp://user:secret@h/x")
    with pytest.raises(StoreSettingError, match="not in the URL") as caught:
        open_store("s3://AKIA:secret@bucket/h")
    assert "secret" not in str(caught.value)
    with pytest.raises(StoreSettingError, match="git:BRANCH or git:REMOTE:BRANCH"):
        open_store("git:bad..branch")
    assert printable_url("s3://key:secret@bucket/p?token=x") == "s3://bucket/p"


def test_a_directory_store_never_overwrites(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    store.create("k/a.json", b"1")
    with pytest.raises(FileExistsError):
        store.create("k/a.json", b"2")
    assert (tmp_path / "k" / "a.json").read_bytes() == b"1"
    assert [e.name for e in store.entries()] == ["k/a.json"]
    assert [p.name for p in tmp_path.rglob("*")] == ["k", "a.json"]


def test_an_unknown_history_scheme_is_a_usage_error(pytester: pytest.Pytester, write_machine: Callable[..., Path],
                                                    run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_step=TEST)
    result = run_roofline(write_machine(MACHINE), "--roofline-history", "http://example.invalid/h")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("*--roofline-history / ini roofline_history: 'http://example.invalid/h': the "
                                 "scheme 'http' is not a history store; accepted:*")])
    assert not (pytester.path / "http:").exists()


# --- an S3-compatible server on localhost ---------------------------------------------------------------------

S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_REGION": "us-east-1",
          "AWS_ALLOW_HTTP": "true"}


@pytest.fixture
def s3_url(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the local server; the environment names the endpoint and credentials, as in CI."""
    import boto3

    for name, value in {**S3_ENV, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(name, value)
    bucket = f"roofline-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/history"


def test_the_object_store_is_create_only_and_lists_one_machine(s3_url: str) -> None:
    store = open_store(s3_url)
    assert store.remote and store.url == s3_url
    store.create(f"{KEY}/a.json", b'{"x": 1}')
    store.create("other-machine-00000000/b.json", b"{}")
    with pytest.raises(FileExistsError):
        store.create(f"{KEY}/a.json", b"overwritten")
    assert store.read(f"{KEY}/a.json", 100) == b'{"x": 1}'
    with pytest.raises(StoreError, match="more than the 4 bytes"):
        store.read(f"{KEY}/a.json", 4)
    assert [e.name for e in store.entries(folder=KEY)] == [f"{KEY}/a.json"]
    assert len(store.entries()) == 2
    assert store.delete([f"{KEY}/a.json"]) == [f"{KEY}/a.json"] and store.entries(folder=KEY) == []


WRITER = """
import json, sys
from pytest_roofline.history.location import open_store
from dataclasses import replace
from pytest_roofline.record.sessions import SessionRecord
from pytest_roofline.history.writer import write_history
doc = SessionRecord.from_dict(json.loads(sys.argv[2]))
for round in range(int(sys.argv[3])):
    # one session each: the reader keys on id and start
    session = replace(doc.session, id=f"writer{sys.argv[4]}-round{round}")
    print(write_history(open_store(sys.argv[1]), replace(doc, session=session)))
"""


def test_eight_concurrent_writers_lose_no_session(s3_url: str) -> None:
    """8 processes × 3 sessions, every one of the same machine, commit and second: only the random part of
    their names differs, and the conditional create makes a clash draw another. All 24 read back."""
    doc = json.dumps(document())
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, s3_url, doc, "3", str(index)], stdout=subprocess.PIPE,
                                text=True) for index in range(8)]
    names = [line for w in writers for line in w.communicate(timeout=120)[0].split()]
    assert all(w.returncode == 0 for w in writers)
    assert len(names) == len(set(names)) == 24
    loaded = load(open_store(s3_url))
    assert loaded.skipped == [] and len(loaded.sessions) == 24
    assert {s.source for s in loaded.sessions} == set(names)


def test_the_gate_reads_only_this_machines_newest_sessions(s3_url: str) -> None:
    store = open_store(s3_url)
    for index in range(6):
        writer.write_history(store, record(index, start=f"2026-11-25T06:0{index}:00+00:00"))
    other = {**document(9), "machine": {"key": "other-machine-00000000", **MACHINE}}
    store.create("other-machine-00000000/x.json", json.dumps(other).encode())
    store.create(f"{KEY}/broken.json", b"{not json")
    baseline = load_baseline(store, key=KEY, branch="main", count=5, any_machine=False, recent=4)
    # the newest 4 names of the folder: 'broken' sorts after the timestamps, so 3 sessions and one skipped
    assert [s.id for s in baseline.sessions] == ["s3", "s4", "s5"]
    assert len(baseline.skipped) == 1 and "broken.json" in baseline.skipped[0]
    assert baseline.reference == s3_url and baseline.describe().startswith(f"baseline {s3_url}: per test")


def test_retention_prunes_the_store(s3_url: str) -> None:
    store = open_store(s3_url)
    for index in range(8):
        writer.write_history(store, record(index, start=f"2026-11-25T06:0{index}:00+00:00"))
    removed = prune(store, Keep(sessions=3), protect=1, folders=[KEY])
    assert len(removed) == 5 and [s.id for s in load(store).sessions] == ["s5", "s6", "s7"]


def test_copy_between_stores_is_create_only(s3_url: str, tmp_path: Path) -> None:
    local = DirectoryStore(tmp_path)
    for index in range(3):
        writer.write_history(local, record(index))
    store = open_store(s3_url)
    assert [len(x) for x in copy_sessions(local, store, 2**20)] == [3, 0, 0]
    assert [len(x) for x in copy_sessions(local, store, 2**20)] == [0, 3, 0]


def test_the_baseline_gate_from_s3_flags_doubled_work_and_passes_a_clean_session(
        s3_url: str, pytester: pytest.Pytester, write_machine: Callable[..., Path],
        run_roofline: Callable[..., pytest.RunResult], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    pytester.makepyfile(test_step=TEST)
    machine = write_machine(MACHINE)
    for _ in range(3):
        assert run_roofline(machine, "--roofline-history", s3_url).ret == 0
    assert not (pytester.path / ".roofline" / "history").exists()  # nothing written locally but results.json
    clean = run_roofline(machine, "--roofline-history", s3_url, "--roofline-baseline", s3_url)
    assert clean.ret == 0, clean.stdout.str()
    clean.stdout.fnmatch_lines([f"*baseline {s3_url}: per test, its last 5*", f"history: {s3_url}/{KEY}/*.json"])
    monkeypatch.setenv("ROOFLINE_TEST_K", "2")
    slow = run_roofline(machine, "--roofline-history", s3_url, "--roofline-baseline", s3_url)
    assert slow.ret == pytest.ExitCode.TESTS_FAILED
    slow.stdout.fnmatch_lines(["*regression against the baseline: time ×[12].* since the baseline: work ×2.00*"])
    assert len(open_store(s3_url).entries(folder=KEY)) == 5


def test_the_site_builds_from_the_store(s3_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ruptures", reason="the site needs pytest-roofline[site]")
    from pytest_roofline.commands import main

    store = open_store(s3_url)
    for index in range(4):
        writer.write_history(store, record(index, start=f"2026-11-25T06:0{index}:00+00:00"))
    assert main(["report", s3_url, "--out", str(tmp_path / "site")]) == 0
    assert "over 4 sessions" in capsys.readouterr().out
    assert (tmp_path / "site" / "index.html").is_file()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_an_unreachable_store_fails_the_session_and_keeps_its_results(
        pytester: pytest.Pytester, write_machine: Callable[..., Path], run_roofline: Callable[..., pytest.RunResult],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("obstore", reason="the object store needs pytest-roofline[store]")
    monkeypatch.setenv("COLUMNS", "250")
    for name, value in {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}"}.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_step=TEST)
    machine = write_machine(MACHINE)
    result = run_roofline(machine, "--roofline-history", "s3://roofline-fleet/h")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*roofline: could not write the history to s3://roofline-fleet/h: *cannot write*",
                                 "*exit status 1: the tests passed, but the history store did not get this session"])
    assert (pytester.path / ".roofline" / "results.json").is_file()
    (kept,) = (pytester.path / ".roofline" / "history-unsent").rglob("*.json")
    assert json.loads(kept.read_text())["tests"][0]["nodeid"] == "test_step.py::test_step"
    gated = run_roofline(machine, "--roofline-history", "none", "--roofline-baseline", "s3://roofline-fleet/h")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines([("*exit status 1: the baseline could not be read: s3://roofline-fleet/h: cannot "
                                "list the history*")])
    assert "testing-secret" not in gated.stdout.str() + result.stdout.str()


# --- a branch of a git remote ---------------------------------------------------------------------------------

def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def clones(tmp_path: Path) -> Callable[[int], list[Path]]:
    """``clones(n)``: n clones of one repository whose origin is a bare repository in tmp_path."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "init", "--quiet", "-b", "main", str(seed))
    (seed / "README").write_text("x\n")
    git(seed, "add", "README")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init")
    git(seed, "push", "--quiet", str(bare), "HEAD:refs/heads/main")

    def make(count: int) -> list[Path]:
        made = []
        for index in range(count):
            clone = tmp_path / f"clone{index}"
            git(tmp_path, "clone", "--quiet", str(bare), str(clone))
            made.append(clone)
        return made

    return make


def test_four_concurrent_pushers_to_a_git_branch_lose_no_session(clones: Callable[[int], list[Path]]) -> None:
    runners = clones(5)
    errors: list[BaseException] = []

    def push(root: Path) -> None:
        try:
            store = open_store("git:roofline-history", root=root)
            for index in range(3):
                writer.write_history(store, record(session_id=f"{root.name}-{index}"))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=push, args=(root,)) for root in runners[:4]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert errors == []
    reader: HistoryStore = open_store("git:roofline-history", root=runners[4])
    loaded = load(reader)
    assert loaded.skipped == [] and len(loaded.sessions) == 12
    assert git(runners[4], "status", "--porcelain") == "" and git(runners[4], "branch", "--list") == "* main"
    assert prune(reader, Keep(sessions=4), protect=1, folders=[KEY]) and len(load(reader).sessions) == 4


def test_the_plugin_appends_to_a_git_branch(clones: Callable[[int], list[Path]]) -> None:
    (runner,) = clones(1)
    (runner / "test_step.py").write_text(TEST)
    (runner / "machine.json").write_text(json.dumps(MACHINE))
    command = [sys.executable, "-m", "pytest", "--roofline", "--roofline-machine=machine.json",
               "--roofline-max-time=0.05", "-p", "no:cacheprovider", "--roofline-history", "git:roofline-history",
               "test_step.py"]
    for _ in range(2):
        done = subprocess.run(command, cwd=runner, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "history: git:roofline-history/" in done.stdout
    files = git(runner, "ls-tree", "-r", "--name-only", "refs/roofline-history/origin/roofline-history").split()
    assert len(files) == 2 and all(f.startswith(f"{KEY}/") for f in files)
    # the user's branches, index and tracked files are untouched
    assert git(runner, "branch", "--list") == "* main" and git(runner, "diff", "--name-only", "HEAD") == ""


def test_the_gate_and_the_site_read_a_git_branch(clones: Callable[[int], list[Path]], tmp_path: Path) -> None:
    """Three sessions at three commits appended by one clone; another clone's gate passes a clean session and
    fails a doubled-work one from the branch, and its site builds from the branch."""
    writer_root, gate_root = clones(2)
    for root in (writer_root, gate_root):
        (root / "test_step.py").write_text(TEST)
        (root / "machine.json").write_text(json.dumps(MACHINE))
    command = [sys.executable, "-m", "pytest", "--roofline", "--roofline-machine=machine.json",
               "--roofline-max-time=0.05", "-p", "no:cacheprovider", "--roofline-history=git:roofline-history",
               "test_step.py"]

    def session(root: Path, *extra: str, k: str = "1") -> subprocess.CompletedProcess[str]:
        # a new commit per session: the gate leaves out the sessions of the commit under test
        git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "night")
        env = {**os.environ, "ROOFLINE_TEST_K": k, "COLUMNS": "250"}
        return subprocess.run([*command, *extra], cwd=root, capture_output=True, text=True, timeout=300,
                              check=False, env=env)

    for _ in range(3):
        done = session(writer_root)
        assert done.returncode == 0, done.stdout + done.stderr
    clean = session(gate_root, "--roofline-baseline=git:roofline-history")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "baseline git:roofline-history: per test, its last 5" in clean.stdout
    slow = session(gate_root, "--roofline-baseline=git:roofline-history", k="2")
    assert slow.returncode == pytest.ExitCode.TESTS_FAILED, slow.stdout + slow.stderr
    assert "since the baseline: work ×2.00" in slow.stdout
    assert len(load(open_store("git:roofline-history", root=gate_root)).sessions) == 5
    site = subprocess.run([sys.executable, "-m", "pytest_roofline", "report", "git:roofline-history", "--out",
                           str(tmp_path / "site")], cwd=gate_root, capture_output=True, text=True, timeout=300,
                          check=False)
    assert site.returncode == 0, site.stdout + site.stderr
    assert "over 5 sessions" in site.stdout and (tmp_path / "site" / "index.html").is_file()


def test_a_git_branch_is_untrusted_input(clones: Callable[[int], list[Path]]) -> None:
    """Files someone pushed to the branch by hand: one too large and one of a name a reader refuses are skipped
    and named, the valid session is read; the large blob's content is never read (its size is checked first)."""
    (runner,) = clones(1)
    store = open_store("git:roofline-history", root=runner)
    writer.write_history(store, record())
    git(runner, "fetch", "--quiet", "origin", "roofline-history")
    git(runner, "checkout", "--quiet", "-b", "by-hand", "FETCH_HEAD")
    (runner / KEY / "big.json").write_text(" " * (2**20 + 10))
    (runner / KEY / "odd name.json").write_text(json.dumps(document(1)))
    git(runner, "add", "-A")
    git(runner, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "by hand")
    git(runner, "push", "--quiet", "origin", "HEAD:refs/heads/roofline-history")
    names = [e.name for e in store.entries()]
    assert len(names) == 3
    results = dict(read_all(store, names, 2**20))
    assert isinstance(results[f"{KEY}/big.json"], StoreError) and "more than the 1048576" in str(
        results[f"{KEY}/big.json"])
    assert isinstance(results[f"{KEY}/odd name.json"], StoreError)
    loaded = load(store)
    assert len(loaded.sessions) == 1 and len(loaded.skipped) == 2


def test_a_git_store_opened_from_a_subfolder_writes_and_reads_at_the_top(clones: Callable[[int], list[Path]]) -> None:
    """pytest's rootdir is often a subfolder of the repository: git would scope ls-tree and ls-files to it."""
    writer_root, reader_root = clones(2)
    (writer_root / "sub").mkdir()
    (reader_root / "deep" / "er").mkdir(parents=True)
    store = open_store("git:roofline-history", root=writer_root / "sub")
    for index in range(3):
        writer.write_history(store, record(index, start=f"2026-11-25T06:0{index}:00+00:00"))
    names = git(writer_root, "ls-tree", "-r", "--name-only", "refs/roofline-history/origin/roofline-history").split()
    assert len(names) == 3 and all(n.startswith(f"{KEY}/") for n in names)
    reader = open_store("git:roofline-history", root=reader_root / "deep" / "er")
    assert [s.id for s in load(reader).sessions] == ["s0", "s1", "s2"]
    assert prune(reader, Keep(sessions=1), protect=1, folders=[KEY]) and len(load(reader).sessions) == 1


def test_a_push_a_hook_declines_fails_at_once_with_gits_words(clones: Callable[[int], list[Path]],
                                                              tmp_path: Path) -> None:
    (runner,) = clones(1)
    hook = tmp_path / "origin.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected: no pushes here' >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(StoreError, match="failed: .*protected: no pushes here.*pre-receive hook declined"):
        writer.write_history(open_store("git:roofline-history", root=runner), record())


def test_copy_places_nested_artifacts_under_their_machine_key(s3_url: str, tmp_path: Path) -> None:
    """A merged CI artifact nests the machine folders; in the store each session goes under its key, where the
    gate and retention read; a file outside any machine folder is named, not copied."""
    local = tmp_path / "merged"
    path = writer.write_history(local / "artifact-gpu-1", record())
    (local / "loose.json").write_text(json.dumps(document(1)))
    store = open_store(s3_url)
    copied, present, failed = copy_sessions(DirectoryStore(local), store, 2**20)
    assert len(copied) == 1 and present == [] and [f.split(":")[0] for f in failed] == ["loose.json"]
    assert [e.name for e in store.entries(folder=KEY)] == [f"{KEY}/{Path(path).name}"]
    assert copy_sessions(DirectoryStore(local), store, 2**20)[1] == [f"artifact-gpu-1/{KEY}/{Path(path).name}"]


def test_retention_keeps_a_session_it_could_not_read(tmp_path: Path) -> None:
    """A read that failed (a network error) says nothing of the tests a session holds: it may be a test's
    protected baseline, so it is never deleted on that read."""
    class Flaky(DirectoryStore):
        def read_many(self, names: list[str], max_bytes: int) -> Iterator[tuple[str, bytes | StoreError]]:
            for n in names:
                yield n, StoreError("timed out") if n.endswith("-s0.json") else self.read(n, max_bytes)

    store = Flaky(tmp_path)
    for index in range(6):
        store.create(f"{KEY}/2026112{index}T000000Z-{'a' * 12}-s{index}.json", json.dumps(document(index)).encode())
    removed = prune(store, Keep(sessions=2), protect=1, folders=[KEY])
    assert sorted(Path(n).name[-8:] for n in removed) == ["-s1.json", "-s2.json", "-s3.json"]
    assert [e.name[-8:] for e in store.entries(folder=KEY)] == ["-s0.json", "-s4.json", "-s5.json"]


def test_a_directory_store_says_what_is_in_the_way(tmp_path: Path) -> None:
    (tmp_path / KEY).write_text("a file where the machine's folder goes")
    with pytest.raises(StoreError, match="is in the way|Not a directory"):
        DirectoryStore(tmp_path).create(f"{KEY}/x.json", b"{}")


def test_an_azure_container_url_is_not_taken_for_credentials() -> None:
    pytest.importorskip("obstore")
    try:
        store = open_store("abfss://history@myaccount.dfs.core.windows.net/roofline")
    except StoreSettingError as exc:  # obstore may want more configuration; never the credentials refusal
        assert "not in the URL" not in str(exc)
    else:
        assert store.url == "abfss://history@myaccount.dfs.core.windows.net/roofline"
    with pytest.raises(StoreSettingError, match="not in the URL"):
        open_store("abfss://user:secret@myaccount.dfs.core.windows.net/roofline")


def test_under_xdist_an_unreadable_baseline_store_fails_the_run(
        pytester: pytest.Pytester, write_machine: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker loads the baseline; the controller, which writes the results and sets the exit status, must
    learn that a worker could not read it."""
    pytest.importorskip("obstore", reason="the object store needs pytest-roofline[store]")
    for name, value in {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}"}.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_a=TEST, test_b=TEST)
    result = pytester.runpytest_subprocess("-n", "2", "--roofline", f"--roofline-machine={write_machine(MACHINE)}",
                                           "--roofline-max-time=0.05", "-p", "no:cacheprovider",
                                           "--roofline-history=none", "--roofline-baseline=s3://roofline-fleet/h")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*exit status 1: the baseline could not be read: s3://roofline-fleet/h*"])


def test_local_retention_prunes_folders_of_any_name(tmp_path: Path) -> None:
    """A merged artifact's folder may be named anything; its own listing's names are pruned, never a path out."""
    folder = tmp_path / "merged artifacts" / KEY
    folder.mkdir(parents=True)
    for index in range(6):
        (folder / f"2026112{index}T000000Z-{'a' * 12}-s{index}.json").write_text(json.dumps(document(index)))
    store = DirectoryStore(tmp_path / "merged artifacts")
    assert len(prune(store.path, Keep(sessions=2), protect=1)) == 4
    assert sorted(p.name[-8:] for p in folder.iterdir()) == ["-s4.json", "-s5.json"]
    assert store.delete(["../outside.json", f"{KEY}/../../x.json"]) == []


# --- writes whose outcome is unknown --------------------------------------------------------------------------

class DoubtfulStore(DirectoryStore):
    """A folder whose creates fail as a network store's do: ``landed`` says, per failing try, whether the
    object was written before the error (a reply lost after the write) or not (a request that never arrived)."""

    def __init__(self, path: Path, landed: list[bool]) -> None:
        super().__init__(path)
        self.landed = landed
        self.tried: list[str] = []

    def create(self, name: str, data: bytes) -> None:
        self.tried.append(name)
        if not self.landed:
            return super().create(name, data)
        if self.landed.pop(0):
            super().create(name, data)
        raise WriteInDoubt(f"{self.url}: cannot write {name}: timed out")


def test_a_create_that_landed_but_reported_an_error_is_written_once(tmp_path: Path) -> None:
    store = DoubtfulStore(tmp_path, landed=[True])
    where = writer.write_history(store, record())
    assert [e.name for e in store.entries()] == [store.tried[0]]
    assert store.tried == [f"{KEY}/{Path(where).name}"]  # read back, never created again
    assert (tmp_path / store.tried[0]).read_bytes() == record().encode()


def test_a_create_in_doubt_that_did_not_land_is_retried_under_the_same_name(tmp_path: Path) -> None:
    store = DoubtfulStore(tmp_path, landed=[False, False])
    writer.write_history(store, record())
    assert len(store.tried) == 3 and len(set(store.tried)) == 1
    assert [e.name for e in store.entries()] == store.tried[:1]


def test_creates_in_doubt_that_never_settle_fail_and_write_nothing_twice(tmp_path: Path) -> None:
    store = DoubtfulStore(tmp_path, landed=[False] * 10)
    with pytest.raises(WriteInDoubt, match="timed out"):
        writer.write_history(store, record())
    assert len(store.tried) == 3 and len(set(store.tried)) == 1 and store.entries() == []


def test_a_create_in_doubt_on_a_store_that_cannot_be_read_is_tried_once(tmp_path: Path) -> None:
    """The read-back fails too (the store is down): no second name and no second try, the doubt is raised."""
    class Down(DoubtfulStore):
        def read(self, name: str, max_bytes: int) -> bytes:
            raise StoreError(f"{self.url}: cannot read {name}: connection refused")

    store = Down(tmp_path, landed=[False] * 10)
    with pytest.raises(WriteInDoubt, match="cannot write .*timed out"):
        writer.write_history(store, record())
    assert len(store.tried) == 1 and store.entries() == []


def test_only_a_name_holding_other_bytes_draws_a_new_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a create in doubt, the name is taken: by another session's bytes a new name is drawn; by ours (the
    doubtful try landed after all) it is not."""
    names = iter([f"{KEY}/first.json", f"{KEY}/second.json"])
    monkeypatch.setattr(SessionRecord, "name", lambda self: next(names))
    DirectoryStore(tmp_path).create(f"{KEY}/first.json", b"someone else's session")
    store = DoubtfulStore(tmp_path, landed=[False])
    assert Path(writer.write_history(store, record())).name == "second.json"
    assert store.tried == [f"{KEY}/first.json", f"{KEY}/first.json", f"{KEY}/second.json"]
    assert (tmp_path / KEY / "first.json").read_bytes() == b"someone else's session"
    assert (tmp_path / KEY / "second.json").read_bytes() == record().encode()


def fail_after_put(monkeypatch: pytest.MonkeyPatch, then: Callable[..., object]) -> list[str]:
    """obstore.put as it is, then ``then(store, name, data)`` once: the paths put."""
    import obstore

    real = obstore.put
    put: list[str] = []

    def put_once(store: Any, name: str, data: bytes, **options: Any) -> Any:
        put.append(name)
        done = real(store, name, data, **options)
        if len(put) == 1:
            then(store, name, data, **options)
        return done

    monkeypatch.setattr(obstore, "put", put_once)
    return put


def test_an_s3_put_whose_reply_is_lost_is_stored_once(s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from obstore.exceptions import GenericError

    def timed_out(*_: Any, **__: Any) -> None:
        raise GenericError("Generic S3 error: error sending request: operation timed out")

    put = fail_after_put(monkeypatch, timed_out)
    store = open_store(s3_url)
    writer.write_history(store, record())
    assert len(put) == 1 and [e.name for e in store.entries()] == put


def test_an_s3_put_that_obstore_retried_after_it_landed_is_stored_once(s3_url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """obstore retries a request that timed out; when the first one had landed, the retry finds the name taken
    by our own bytes: that is our object, not a clash."""
    import obstore

    real = obstore.put
    put = fail_after_put(monkeypatch, lambda store, name, data, **options: real(store, name, data, **options))
    store = open_store(s3_url)
    writer.write_history(store, record())
    assert len(put) == 1 and [e.name for e in store.entries()] == put
    with pytest.raises(FileExistsError):  # other bytes under the name are a clash, as ever
        store.create(put[0], b"other bytes")


def test_an_s3_refusal_is_not_in_doubt(s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import obstore
    from obstore.exceptions import PermissionDeniedError

    def refuse(*_: Any, **__: Any) -> None:
        raise PermissionDeniedError("403 Forbidden")

    monkeypatch.setattr(obstore, "put", refuse)
    with pytest.raises(StoreError, match="403 Forbidden") as caught:
        open_store(s3_url).create(f"{KEY}/a.json", b"{}")
    assert not isinstance(caught.value, WriteInDoubt)


# --- git pushes judged by where the branch is, never by git's words ---------------------------------------------

GERMAN = b"Fehler: Fehler beim Versenden einiger Referenzen\nHinweis: Aktualisierungen wurden zur\xc3\xbcckgewiesen\n"


def spy_pushes(store: HistoryStore, monkeypatch: pytest.MonkeyPatch,
               around: Callable[[int, Callable[[], subprocess.CompletedProcess[bytes]]],
                                subprocess.CompletedProcess[bytes]]) -> list[tuple[str, ...]]:
    """Every ``git push`` of ``store`` goes through ``around(index, push)``; the pushes' arguments."""
    real = store._git  # type: ignore[attr-defined]
    pushes: list[tuple[str, ...]] = []

    def git(*args: str, **options: Any) -> subprocess.CompletedProcess[bytes]:
        if args[0] != "push":
            return real(*args, **options)  # type: ignore[no-any-return]
        pushes.append(args)
        return around(len(pushes) - 1, lambda: real(*args, **options))

    monkeypatch.setattr(store, "_git", git)
    return pushes


def in_german(done: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    """git's answer with every word translated, as a user's locale would; the porcelain flag and ref stay."""
    if done.returncode == 0:
        return done
    refused = [line.split(b"\t")[:2] for line in done.stdout.splitlines() if line.startswith(b"!\t")]
    assert len(refused) == 1, done  # the push was refused: its real flag is what is kept
    stdout = b"Nach origin\n" + b"\t".join([*refused[0], b"[abgelehnt] (zuerst holen)"]) + b"\nFertig\n"
    return subprocess.CompletedProcess(done.args, done.returncode, stdout, GERMAN)


def branch_files(root: Path) -> list[str]:
    git(root, "fetch", "--quiet", "origin", "roofline-history")
    return git(root, "ls-tree", "-r", "--name-only", "FETCH_HEAD").split()


def test_a_push_race_is_recognised_in_any_locale(clones: Callable[[int], list[Path]], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Another runner pushes between our fetch and our push; every word git says is German: the race is seen
    by the branch's tip and redone. git itself runs in the C locale (the remote's hook sees it)."""
    for name, value in {"LANGUAGE": "de", "LC_ALL": "de_DE.UTF-8", "LANG": "de_DE.UTF-8"}.items():
        monkeypatch.setenv(name, value)
    hook = tmp_path / "origin.git" / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho \"$LC_ALL|$LANG|${{LANGUAGE-unset}}\" >> {tmp_path / 'locale'}\n")
    hook.chmod(0o755)
    mine, other = clones(2)
    store = open_store("git:roofline-history", root=mine)

    def racing(index: int, push: Callable[[], subprocess.CompletedProcess[bytes]]
               ) -> subprocess.CompletedProcess[bytes]:
        if index == 0:  # the other runner gets there first
            writer.write_history(open_store("git:roofline-history", root=other), record(session_id="other"))
        return in_german(push())

    pushes = spy_pushes(store, monkeypatch, racing)
    writer.write_history(store, record(session_id="mine"))
    assert len(pushes) == 2
    assert len(branch_files(mine)) == 2
    assert {s.id for s in load(open_store("git:roofline-history", root=other)).sessions} == {"mine", "other"}
    assert (tmp_path / "locale").read_text().split() == ["C|C|unset"] * 2  # the other push, our redo


def test_a_hook_that_declines_in_a_races_words_fails_at_once(clones: Callable[[int], list[Path]], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook may print anything, 'non-fast-forward' included: the branch did not move, so it is no race."""
    (runner,) = clones(1)
    store = open_store("git:roofline-history", root=runner)
    writer.write_history(store, record(session_id="first"))
    hook = tmp_path / "origin.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'rejected: non-fast-forward, fetch first (stale info)' >&2\nexit 1\n")
    hook.chmod(0o755)
    pushes = spy_pushes(store, monkeypatch, lambda index, push: push())
    with pytest.raises(StoreError, match="failed: .*non-fast-forward.*pre-receive hook declined"):
        writer.write_history(store, record(session_id="second"))
    assert len(pushes) == 1 and len(branch_files(runner)) == 1


def test_a_push_that_timed_out_after_landing_is_not_pushed_again(clones: Callable[[int], list[Path]],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (runner,) = clones(1)
    store = open_store("git:roofline-history", root=runner)

    def lands_then_times_out(index: int, push: Callable[[], subprocess.CompletedProcess[bytes]]
                             ) -> subprocess.CompletedProcess[bytes]:
        done = push()
        if index == 0:
            assert done.returncode == 0
            raise git_store.GitTimedOut("git push ran past 120 s and was stopped")
        return done

    pushes = spy_pushes(store, monkeypatch, lands_then_times_out)
    writer.write_history(store, record())
    assert len(pushes) == 1 and len(branch_files(runner)) == 1


def test_a_push_that_timed_out_before_landing_is_pushed_again(clones: Callable[[int], list[Path]],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (runner,) = clones(1)
    store = open_store("git:roofline-history", root=runner)

    def times_out_once(index: int, push: Callable[[], subprocess.CompletedProcess[bytes]]
                       ) -> subprocess.CompletedProcess[bytes]:
        if index == 0:
            raise git_store.GitTimedOut("git push ran past 120 s and was stopped")
        return push()

    pushes = spy_pushes(store, monkeypatch, times_out_once)
    where = writer.write_history(store, record())
    assert len(pushes) == 2 and branch_files(runner) == [str(where).split("git:roofline-history/", 1)[1]]


def test_a_stopped_push_that_lands_late_is_not_written_twice(clones: Callable[[int], list[Path]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The first push is stopped and the branch has not moved when we look; it lands just after (a slow
    remote). The redo is refused (the tip moved), and the tip then holds our file in our stopped commit."""
    (runner,) = clones(1)
    store = open_store("git:roofline-history", root=runner)
    real = store._git  # type: ignore[attr-defined]

    def lands_late(index: int, push: Callable[[], subprocess.CompletedProcess[bytes]]
                   ) -> subprocess.CompletedProcess[bytes]:
        if index == 0:
            raise git_store.GitTimedOut("git push ran past 120 s and was stopped")
        if index == 1:
            assert real(*pushes[0]).returncode == 0  # the first one arrives now
        return push()

    pushes = spy_pushes(store, monkeypatch, lands_late)
    writer.write_history(store, record())
    assert len(pushes) == 2 and len(branch_files(runner)) == 1


# --- reads held a few at a time ---------------------------------------------------------------------------------

def test_read_all_reads_nothing_before_it_is_asked(tmp_path: Path) -> None:
    reads: list[str] = []

    class Counting(DirectoryStore):
        def read(self, name: str, max_bytes: int) -> bytes:
            reads.append(name)
            return super().read(name, max_bytes)

    store = Counting(tmp_path)
    for index in range(5):
        store.create(f"{KEY}/{index}.json", b"x" * index)
    results = read_all(store, [f"{KEY}/{i}.json" for i in range(5)], 100)
    assert reads == []
    assert next(results) == (f"{KEY}/0.json", b"")
    assert reads == [f"{KEY}/0.json"]
    assert [data for _, data in results] == [b"x", b"xx", b"xxx", b"xxxx"]


def test_an_object_store_holds_a_bounded_number_of_objects(s3_url: str) -> None:
    """40 objects read through read_all: at no point are more than IN_FLIGHT read and not yet taken."""
    store = open_store(s3_url)
    names = [f"{KEY}/{index:02d}.json" for index in range(40)]
    for name in names:
        store.create(name, name.encode())
    lock = threading.Lock()
    done = [0]
    real = store.read

    def read(name: str, max_bytes: int) -> bytes:
        data = real(name, max_bytes)
        with lock:
            done[0] += 1
        return data

    store.read = read  # type: ignore[method-assign]
    held = []
    results = read_all(store, [*names[:20], f"{KEY}/absent.json", *names[20:]], 100)
    assert done[0] == 0
    taken = []
    for name, data in results:
        taken.append((name, data))
        held.append(done[0] - len(taken))
    assert max(held) <= object_store.IN_FLIGHT - 1 and max(held) >= 1
    assert [n for n, _ in taken] == [*names[:20], f"{KEY}/absent.json", *names[20:]]
    assert all(data == name.encode() for name, data in taken if name != f"{KEY}/absent.json")
    assert isinstance(dict(taken)[f"{KEY}/absent.json"], StoreError)


def test_a_git_store_reads_in_batches_bounded_in_bytes(clones: Callable[[int], list[Path]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (runner,) = clones(1)
    store = open_store("git:roofline-history", root=runner)
    names = [f"{KEY}/{index}.json" for index in range(7)]
    for index, name in enumerate(names):
        store.create(name, bytes([65 + index]) * 100)
    monkeypatch.setattr(git_store, "BATCH_BYTES", 250)  # two objects a batch
    real = store._git  # type: ignore[attr-defined]
    batches: list[int] = []

    def git_(*args: str, **options: Any) -> subprocess.CompletedProcess[bytes]:
        done = real(*args, **options)
        if args[:2] == ("cat-file", "--batch"):
            batches.append(len(options["data"].splitlines()))
        return done  # type: ignore[no-any-return]

    monkeypatch.setattr(store, "_git", git_)
    store.entries()
    asked = [*names[:3], f"{KEY}/absent.json", *names[3:]]
    results = list(read_all(store, asked, 1000))
    assert [n for n, _ in results] == asked
    assert [d for n, d in results if n != f"{KEY}/absent.json"] == [bytes([65 + i]) * 100 for i in range(7)]
    assert isinstance(dict(results)[f"{KEY}/absent.json"], StoreError)
    assert batches == [2, 2, 2, 1]  # the absent name is yielded in its place, between two blobs of a batch


# --- locations that are not what they look like -----------------------------------------------------------------

@pytest.mark.parametrize("text", ["s3:/b/p", "s3:b/p", "S3:/b/p", "gs:/x", "az:container/p", "file:/tmp/h",
                                  "abfss:/c", "s3:AKIAX:ab/cdSECRET@bucket/p"])
def test_a_scheme_without_its_slashes_is_refused(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreSettingError, match=r"--roofline-history: a location starting with '[a-z0-9]+:' but "
                                                r"not '[a-z0-9]+://' is neither a URL nor a folder; accepted: a "
                                                r"directory.*s3://BUCKET/PREFIX") as caught:
        open_store(text)
    assert "cdSECRET" not in str(caught.value) + printable_url(text) and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["s3://AKIAX:ab/cdSECRET@bucket/p", "s3://AKIAX:cdSECRET@bucket/p",
                                  "gs://cdSECRET@bucket/p", "file://user:cdSECRET@/tmp/h",
                                  "file:///tmp/us/er:cdSECRET@h", "az://u:ab/cdSECRET@container/p",
                                  "abfss://u:ab/cdSECRET@acct.dfs.core.windows.net/p",
                                  "abfss://c@cdSECRET@acct.net/p", "s3://AKIAX:ab#cdSECRET@bucket/p"])
def test_a_url_with_credentials_is_refused_and_never_printed(text: str) -> None:
    with pytest.raises(StoreSettingError, match="not in the URL") as caught:
        open_store(text)
    assert "cdSECRET" not in str(caught.value) and "cdSECRET" not in printable_url(text)


def test_the_object_store_refuses_a_secret_holding_a_slash_itself() -> None:
    pytest.importorskip("obstore")
    from pytest_roofline.history.object_store import ObjectStore

    with pytest.raises(StoreSettingError, match="not in the URL") as caught:
        ObjectStore.from_url("s3://AKIAX:ab/cdSECRET@bucket/p")
    assert "cdSECRET" not in str(caught.value)


def test_printable_urls_keep_no_user_info() -> None:
    assert printable_url("s3://AKIAX:ab/cdSECRET@bucket/p?x=1#y") == "s3://bucket/p"
    assert printable_url("https://user:pa?ss#wo/rd@host/repo.git") == "https://host/repo.git"
    assert printable_url("s3://bucket/prefix") == "s3://bucket/prefix"
    assert printable_url("s3:AKIAX:ab/cdSECRET@bucket/p") == "s3:bucket/p"
    assert printable_url(".roofline/history") == ".roofline/history"
    assert printable_url("abfss://history@acct.dfs.core.windows.net/r") == "abfss://history@acct.dfs.core.windows.net/r"
    assert printable_url("abfss://u:pw@acct.dfs.core.windows.net/r") == "abfss://acct.dfs.core.windows.net/r"
