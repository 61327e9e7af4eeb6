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
from pytest_roofline.history import writer
from pytest_roofline.history.baseline import load_baseline
from pytest_roofline.history.document import SessionRecord
from pytest_roofline.history.location import open_store
from pytest_roofline.history.machine_key import machine_key
from pytest_roofline.history.reader import load
from pytest_roofline.history.retention import Keep, prune
from pytest_roofline.history.store import (
    DirectoryStore,
    HistoryStore,
    copy_sessions,
    printable_url,
    safe_name,
)

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

@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    try:
        import boto3  # noqa: F401
        import obstore  # noqa: F401
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        pytest.skip(f"the S3 tests need moto[server], boto3 and obstore (pip install -e '.[dev]'): {exc}")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - any failure to start is a skip with its reason
        pytest.skip(f"moto's S3 server did not start on localhost: {exc!r}")
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


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
from pytest_roofline.history.document import SessionRecord
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
    from pytest_roofline.history.store import read_all

    names = [e.name for e in store.entries()]
    assert len(names) == 3
    results = dict(zip(names, read_all(store, names, 2**20)))
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
        def read_many(self, names: list[str], max_bytes: int) -> list[bytes | StoreError]:
            return [StoreError("timed out") if n.endswith("-s0.json") else self.read(n, max_bytes) for n in names]

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
