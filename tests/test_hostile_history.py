"""A shared history written by someone hostile: every try of docs/untrusted-history.md's "No single object
silences a gate", against a directory, an ``s3://`` store on moto's local server and a ``git:`` branch of a bare
repository. Each object is refused by name, or the gate fails; no secret reaches any output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline._redact import redact
from pytest_roofline.errors import StoreError, StoreSettingError
from pytest_roofline.history.baseline import load_baseline
from pytest_roofline.history.location import open_store
from pytest_roofline.history.nightly import LastNight, resolve_last
from pytest_roofline.history.reader import load
from pytest_roofline.history.retention import Keep, prune_folder
from pytest_roofline.history.store import DirectoryStore, HistoryStore
from pytest_roofline.record.machine_key import machine_key
from pytest_roofline.record.sessions import Session

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}
KEY = machine_key(MACHINE)
HEAD = "c" * 40
REAL = ["1" * 40, "2" * 40, "3" * 40]


def document(index: int, commit: str | None = None, start: str | None = None, **session: Any) -> dict[str, Any]:
    """A sound history record of one test at 0.5 of its roof, its start ``index`` minutes after 06:00."""
    return {"format": "pytest-roofline-history", "schema": 1,
            "session": {"id": f"s{index}", "start": start or f"2026-11-25T06:{index:02d}:00+00:00",
                        "git": {"commit": commit or REAL[index % len(REAL)], "branch": "main", "dirty": False},
                        **session},
            "machine": {"key": KEY, **MACHINE},
            "tests": [{"nodeid": "t.py::test", "fraction": 0.5,
                       "regions": [{"t_min_s": 1e-3, "timing": {"samples_s": [2e-3] * 10}}]}]}


def name(index: int, tag: str = "0123456789ab") -> str:
    return f"{KEY}/20261125T06{index:02d}00Z-{tag}-{index:04x}.json"


def put(store: HistoryStore, object_name: str, content: dict[str, Any] | str) -> None:
    store.create(object_name, (content if isinstance(content, str) else json.dumps(content)).encode())


# --- three stores ---------------------------------------------------------------------------------------------

def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def bare_clone(tmp_path: Path) -> Path:
    bare, seed = tmp_path / "origin.git", tmp_path / "clone"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(bare))
    git(tmp_path, "init", "--quiet", "-b", "main", str(seed))
    (seed / "README").write_text("x\n")
    git(seed, "add", "README")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init")
    git(seed, "remote", "add", "origin", str(bare))
    git(seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    return seed


@pytest.fixture(params=["directory", "s3", "git"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    if request.param == "directory":
        return DirectoryStore(tmp_path / "history")
    if request.param == "git":
        return open_store("git:roofline-history", root=bare_clone(tmp_path))
    import boto3

    endpoint = request.getfixturevalue("s3_endpoint")
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
                       "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    bucket = f"hostile-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return open_store(f"s3://{bucket}/history")


# --- 1. one object switches off both gates ---------------------------------------------------------------------

def test_a_start_that_is_no_time_or_in_the_future_is_refused_and_time_orders_the_rest(store: HistoryStore) -> None:
    put(store, name(1), document(1))
    put(store, name(2), document(2))
    put(store, f"{KEY}/zzzz.json", document(3, start="z"))
    put(store, f"{KEY}/zzzy.json", document(4, start="2999-01-01T00:00:00+00:00"))
    put(store, f"{KEY}/00000000T000000Z-aaaaaaaaaaaa-0000.json", document(5, start="2026-11-25T07:00:00+00:00"))
    loaded = load(store, key=KEY)
    assert [s.id for s in loaded.sessions] == ["s1", "s2", "s5"]  # by the parsed start, never by the name
    refused = "\n".join(loaded.refused)
    assert f"{KEY}/zzzz.json: session.start: 'z' is not an ISO 8601 time" in refused
    assert "zzzy.json: session.start: '2999-01-01T00:00:00+00:00' is outside 2020-01-01 .. the reader's clock" \
        in refused
    assert loaded.blind() is None  # three sound sessions: the gate judges with them and names the two


@pytest.mark.parametrize("commit", ["HEAD", "C" * 40, "c" * 12, "main", "-c" + "c" * 38])
def test_a_commit_that_git_would_resolve_to_another_object_is_refused(store: HistoryStore, commit: str) -> None:
    put(store, name(1), document(1))
    put(store, name(2), document(2, commit=commit))
    loaded = load(store, key=KEY)
    assert [s.id for s in loaded.sessions] == ["s1"]
    shown = repr(commit) if len(repr(commit)) <= 40 else repr(commit)[:37] + "..."  # messages cut a long value
    assert loaded.refused == [(f"{store.url}/{name(2)}: session.git.commit: {shown} is not a full hexadecimal "
                              "commit id")]
    night = resolve_last(loaded.sessions, key=KEY, branch="main", head=HEAD)
    assert night.commit == REAL[1]  # the sound session's commit, never the code under test


def test_a_record_under_another_machines_folder_is_refused(store: HistoryStore) -> None:
    other = document(1)
    other["machine"]["key"] = "other-machine-00000000"
    put(store, name(1), other)
    loaded = load(store, key=KEY)
    assert loaded.sessions == []
    assert loaded.refused == [(f"{store.url}/{name(1)}: machine.key 'other-machine-00000000' is not the folder "
                              f"{KEY!r} it sits in")]
    assert loaded.blind() == f"all 1 history object(s) listed were refused: {loaded.refused[0]}"


def test_a_ref_that_is_the_commit_under_test_is_refused_by_name() -> None:
    from pytest_roofline.ab.plugin.session import refuse_ref

    session = Session(id="s9", start="", machine_key=KEY, commit=REAL[0], branch="main", source="x/s9.json",
                      tests={})
    night = LastNight(REAL[0], session)
    assert refuse_ref(night, REAL[0], HEAD) is None
    assert refuse_ref(night, REAL[0], REAL[0]) == (f"refused x/s9.json: its commit {REAL[0][:12]} is the commit "
                                                   "under test (HEAD)")
    assert refuse_ref(night, HEAD, REAL[1]) == (f"refused x/s9.json: its commit {REAL[0]!r} resolves to "
                                                f"{HEAD[:12]}, another object")


# --- 2. listed but unreadable passes blind ---------------------------------------------------------------------

def test_every_object_overwritten_with_garbage_blinds_the_gate(store: HistoryStore) -> None:
    for index in range(3):
        put(store, name(index), "{")
    baseline = load_baseline(store, key=KEY, branch="main", count=5, any_machine=False)
    assert baseline.sessions == []
    assert baseline.blind is not None and baseline.blind.startswith("all 3 history object(s) listed were refused: ")


def test_an_object_that_cannot_be_read_blinds_the_gate(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "history")
    put(store, name(1), document(1))
    huge = tmp_path / "history" / name(2)
    with huge.open("wb") as handle:
        handle.truncate(2**25 + 1)  # sparse: one byte past what a record may hold, no disk spent
    loaded = load(store, key=KEY)
    assert [s.id for s in loaded.sessions] == ["s1"]
    assert loaded.blind() == (f"1 of 2 history object(s) listed could not be read: {huge}: 33554433 bytes, more "
                              "than the 33554432 a record file may have")


TEST = """
import os, pytest, time

@pytest.mark.roofline
def test_step(roofline):
    k = int(os.environ.get("ROOFLINE_TEST_K", "1"))
    roofline.declare(flops=1e8 * k).measure(time.sleep, 0.002 * k)
"""


def test_the_gate_fails_the_session_when_its_history_is_all_garbage(
        pytester: pytest.Pytester, write_machine: Callable[..., Path],
        run_roofline: Callable[..., pytest.RunResult], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    pytester.makepyfile(test_step=TEST)
    machine = write_machine(MACHINE)
    for _ in range(3):
        assert run_roofline(machine).ret == 0
    history = pytester.path / ".roofline" / "history" / KEY
    for path in history.glob("*.json"):
        path.write_text("{")
    monkeypatch.setenv("ROOFLINE_TEST_K", "2")  # twice the work: only a blind gate would pass it
    result = run_roofline(machine, "--roofline-baseline", ".roofline/history")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([("*roofline: exit status 1: the baseline could not be read: all 3 history "
                                 "object(s) listed were refused*")])


# --- 3. retention deletes real history -------------------------------------------------------------------------

def test_retention_keeps_every_real_session_past_22_forged_names(store: HistoryStore) -> None:
    for index in range(5):
        put(store, name(index), document(index))
    for index in range(22):  # named to sort last; half hold garbage, half a copy of a real session
        put(store, f"{KEY}/99990101T000000Z-x-{index:04d}.json", "{" if index % 2 else document(4))
    removed = prune_folder(store, KEY, Keep(sessions=3), protect=1)
    left = {e.name for e in store.entries(folder=KEY)}
    assert removed == [name(1), name(0)]  # the two oldest real sessions beyond the newest 3, nothing forged
    assert {name(i) for i in range(2, 5)} <= left
    assert sum(n.startswith(f"{KEY}/99990101") for n in left) == 22  # never removed what it could not parse


def test_retention_orders_by_the_parsed_start_not_the_name(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "history")
    for index in range(5):  # names in the opposite order of the starts
        put(store, f"{KEY}/2026112{9 - index}T000000Z-0123456789ab-000{index}.json", document(index))
    for path in (tmp_path / "history" / KEY).iterdir():
        os.utime(path, (0, 0))  # the write times say nothing newer than the starts
    removed = prune_folder(store, KEY, Keep(sessions=3), protect=1)
    assert sorted(removed) == [f"{KEY}/20261128T000000Z-0123456789ab-0001.json",
                               f"{KEY}/20261129T000000Z-0123456789ab-0000.json"]


def test_retention_keeps_working_past_a_name_git_refuses(tmp_path: Path) -> None:
    clone = bare_clone(tmp_path)
    store = open_store("git:roofline-history", root=clone)
    for index in range(5):
        put(store, name(index), document(index))
    git(clone, "fetch", "--quiet", "origin", "roofline-history")
    git(clone, "checkout", "--quiet", "-b", "by-hand", "FETCH_HEAD")
    (clone / KEY / "odd name.json").write_text(json.dumps(document(9)))
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "by hand")
    git(clone, "push", "--quiet", "origin", "HEAD:refs/heads/roofline-history")
    assert sorted(prune_folder(store, KEY, Keep(sessions=3), protect=1)) == [name(0), name(1)]
    assert f"{KEY}/odd name.json" in {e.name for e in store.entries(folder=KEY)}


# --- 4. credentials leak ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["s3://AKIAX:ab/cdSECRET@bucket/p", "s3://AKIAX@cdSECRET@bucket/p",
                                 "gs://x:cd/SECRET+x@bucket/p", "file://me:cdSECRET@/tmp/h",
                                 "s3://bucket/p?X-Amz-Signature=cdSECRET"])
def test_a_url_with_credentials_is_refused_and_never_printed(url: str) -> None:
    with pytest.raises(StoreSettingError) as info:
        open_store(url)
    assert "SECRET" not in str(info.value)


def test_git_errors_are_redacted(tmp_path: Path) -> None:
    clone = bare_clone(tmp_path)
    git(clone, "remote", "set-url", "origin", "https://user:cdSECRET@127.0.0.1:9/nothing.git")
    with pytest.raises(StoreError) as info:
        open_store("git:roofline-history", root=clone).entries()
    assert "SECRET" not in str(info.value) and "127.0.0.1:9/nothing.git" in str(info.value)


def test_redaction_masks_secrets_of_every_form() -> None:
    environ = {"AWS_SECRET_ACCESS_KEY": "ab/cd+SECRETKEY", "GITHUB_TOKEN": "ghp_SECRETTOKEN", "HOME": "/root"}
    text = ("s3://AKIAX:ab/cdSECRET@bucket/p failed; --token=SECRET1 -o api_key=SECRET2 saw ab/cd+SECRETKEY; "
            "Authorization: Bearer SECRET3; https://h/x?sig=SECRET4 ghp_SECRETTOKEN; /root stays")
    shown = redact(text, environ)
    assert "SECRET" not in shown
    assert shown == ("s3://***@bucket/p failed; --token=*** -o api_key=*** saw ***; Authorization: ***; "
                     "https://h/x?*** ***; /root stays")


def test_the_history_keeps_the_roofline_options_and_the_selection_only(
        pytester: pytest.Pytester, write_machine: Callable[..., Path],
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_step=TEST)
    machine = write_machine(MACHINE)
    result = run_roofline(machine, "-o", "cache_dir=.cdSECRET", "-k", "step", "test_step.py",
                          "--roofline-max-time", "0.05")
    assert result.ret == 0
    (entry,) = (pytester.path / ".roofline" / "history" / KEY).glob("*.json")
    args = json.loads(entry.read_text())["session"]["pytest_args"]
    assert "SECRET" not in entry.read_text()
    assert "test_step.py" in args and args[-2:] == ["-k", "step"]
    assert args[args.index("--roofline-max-time") + 1] == "0.05" and "-o" not in args


# --- 5. one record crashes report and history chain ------------------------------------------------------------

def test_history_chain_and_report_run_past_records_that_overflowed_them(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.commands import main

    store = DirectoryStore(tmp_path / "history")
    for index in range(3):
        put(store, name(index), document(index))
    forged = document(3)
    forged["tests"][0]["compare"] = {"verdict": "steady", "commit": REAL[1], "changes": {
        "time": {"now": 1e-3, "reference": 1e-3, "ratio": 1e300, "ci": [1e300, 1e300]}}}
    put(store, name(3), forged)
    put(store, name(4), document(4, start="9999-12-31T23:59:59-01:00"))
    assert main(["history", "chain", str(tmp_path / "history")]) in (0, 1)
    err = capsys.readouterr().err
    assert "compare.changes.time.ratio: 1e+300 is not a finite number in [1e-06, 1e+06]" in err
    pytest.importorskip("ruptures", reason="the site needs pytest-roofline[site]")
    assert main(["report", str(tmp_path / "history"), "--out", str(tmp_path / "site")]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert "9999-12-31T23:59:59-01:00" in index  # the refused start is named on the page


if sys.platform == "win32":  # FIFOs and bare git repositories as used here are POSIX tools
    pytestmark = pytest.mark.skip(reason="POSIX only")
