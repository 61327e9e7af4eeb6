"""The pool's memory guard (ab.room): a pair is added only where the host (and the GPU) has room for it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_roofline.ab.room import (
    GIB,
    cgroup_room,
    device_shortfall,
    device_text,
    host_shortfall,
    private_bytes,
)

ROLLUP = """00400000-7ffd0000 ---p 00000000 00:00 0                          [rollup]
Rss:             {rss} kB
Pss:             {pss} kB
Private_Clean:       {clean} kB
Private_Dirty:     {dirty} kB
Swap:                {swap} kB
SwapPss:             {swap} kB
"""


def fake_proc(root: Path, available_kib: int | None, twins: dict[int, tuple[int, int, int]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if available_kib is not None:
        (root / "meminfo").write_text(f"MemTotal:       25165824 kB\nMemAvailable:   {available_kib} kB\n")
    for pid, (clean, dirty, swap) in twins.items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "smaps_rollup").write_text(ROLLUP.format(rss=9_000_000, pss=clean + dirty,
                                                                    clean=clean, dirty=dirty, swap=swap))
    return root


def test_a_twin_holds_its_private_pages_and_swap_not_the_imports_it_shares(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 1, {7: (1024, 2048, 512)})
    assert private_bytes(7, proc) == (1024 + 2048 + 512) * 1024  # not the 9 GB resident (torch, shared); swap once
    assert private_bytes(8, proc) is None


def test_the_host_has_room_for_a_pair_only_with_twice_the_biggest_twin_for_each_of_its_two(tmp_path: Path) -> None:
    gib_kib = 1024 * 1024
    twins = {11: (0, gib_kib // 2, 0), 12: (0, gib_kib, 0)}  # the biggest holds 1 GiB
    short = host_shortfall([11, 12], fake_proc(tmp_path / "a", 3 * gib_kib, twins), tmp_path / "no-cgroup")
    assert short is not None  # a pair needs 2 twins x 2 x 1 GiB = 4 GiB; 3 GiB available
    assert "3.0 GiB available" in short and "about 4.0 GiB" in short and "1.0 GiB the biggest twin" in short
    assert short.startswith("the host has")
    none = tmp_path / "no-cgroup"
    assert host_shortfall([11, 12], fake_proc(tmp_path / "b", 4 * gib_kib, twins), none) is None
    assert host_shortfall([11, 12], fake_proc(tmp_path / "c", None, twins), none) is None  # no meminfo: cannot tell
    assert host_shortfall([13], fake_proc(tmp_path / "d", 1, {}), none) is None  # no twin readable: cannot tell


def test_a_container_memory_limit_is_the_room_where_it_is_tighter_than_the_host(tmp_path: Path) -> None:
    """cgroup v2: the job's slice allows 8 GiB and uses 7 GiB, 0.5 GiB of it inactive page cache (reclaimed
    first): 1.5 GiB of room, whatever the host has; a parent without a limit ("max") does not count."""
    gib = 1024 ** 3
    proc = fake_proc(tmp_path / "proc", 200 * 1024 * 1024, {21: (0, 512 * 1024, 0)})  # 200 GiB, a 0.5 GiB twin
    (proc / "self").mkdir()
    (proc / "self" / "cgroup").write_text("0::/ci.slice/job-7\n")
    fs = tmp_path / "cgroup"
    job = fs / "ci.slice" / "job-7"
    job.mkdir(parents=True)
    (fs / "ci.slice" / "memory.max").write_text("max\n")
    (fs / "ci.slice" / "memory.current").write_text(str(9 * gib))
    (job / "memory.max").write_text(f"{8 * gib}\n")
    (job / "memory.current").write_text(f"{7 * gib}\n")
    (job / "memory.stat").write_text(f"anon {6 * gib}\ninactive_file {gib // 2}\n")
    assert cgroup_room(proc, fs) == 3 * gib // 2
    short = host_shortfall([21], proc, fs)  # a pair needs 2 x 2 x 0.5 GiB = 2 GiB
    assert short is not None and short.startswith("this job's memory cgroup allows 1.5 GiB available")
    (job / "memory.max").write_text("max\n")  # no limit anywhere: the host's 200 GiB
    assert cgroup_room(proc, fs) is None and host_shortfall([21], proc, fs) is None
    (proc / "self" / "cgroup").write_text("4:memory:/job\n")  # cgroup v1
    v1 = fs / "memory" / "job"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(str(4 * gib))
    (v1 / "memory.usage_in_bytes").write_text(str(3 * gib))
    assert cgroup_room(proc, fs) == gib
    (v1 / "memory.limit_in_bytes").write_text(str(2 ** 63 - 4096))  # v1's "no limit"
    assert cgroup_room(proc, fs) is None


def test_the_gpu_has_room_for_a_pair_only_with_twice_a_process_share_for_each_of_its_two() -> None:
    # 70 GiB of 80 in use, 10 of them this process's own reserve: 6 twins hold at most 10 GiB each; a pair needs
    # 40 GiB, 10 GiB are free
    short = device_text(10 * GIB, 80 * GIB, 10 * GIB, 6)
    assert short is not None and "10.0 GiB free" in short and "up to 40.0 GiB" in short
    assert device_text(60 * GIB, 80 * GIB, 2 * GIB, 6) is None  # 18 GiB over 6 twins: a pair needs 12 GiB


def test_the_gpu_is_asked_only_through_a_torch_this_session_imported_and_initialized(
        monkeypatch: Any) -> None:
    import sys

    cuda = SimpleNamespace(is_initialized=lambda: False, mem_get_info=lambda: (1, 80 * GIB),
                           memory_reserved=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    assert device_shortfall(6) is None  # CUDA not initialized here: the session does not use the GPU
    cuda.is_initialized = lambda: True
    short = device_shortfall(6)  # 1 byte free of 80 GiB
    assert short is not None and "GPU has 0.0 GiB free" in short

    def broken() -> tuple[int, int]:
        raise RuntimeError("CUDA error: unknown error")

    cuda.mem_get_info = broken
    assert device_shortfall(6) is None  # no answer: the pool grows as asked
    monkeypatch.delitem(sys.modules, "torch")
    assert device_shortfall(6) is None


def test_a_pool_without_room_stays_at_its_pairs_says_why_and_grows_once_there_is_room(tmp_path: Path) -> None:
    from pytest_roofline.ab.pool import TwinPool

    def twin(pid: int, ended: bool = False) -> Any:
        return SimpleNamespace(nodeids={"t.py::a"}, error=None, log=tmp_path / "twin.log",
                               process=SimpleNamespace(pid=pid, poll=lambda: 0 if ended else None))

    started: list[int] = []
    asked: list[list[int]] = []
    answers: list[str | None] = ["the host has 1.0 GiB available", None]

    def room(pids: Sequence[int]) -> str | None:
        asked.append(list(pids))
        return answers.pop(0)

    def starter(number: int) -> Any:
        started.append(number)
        return (twin(10 * number), twin(10 * number + 1))

    pairs = [(twin(0), twin(1)), (twin(2), twin(3, ended=True)), (twin(4), twin(5))]
    pool = TwinPool(pairs, starter=starter, limit=5, room=room)
    assert not pool.grow() and started == [] and len(pool.pairs) == 3
    assert asked == [[0, 1, 2, 4, 5]]  # every running twin's process is weighed; an ended one's pid is not its
    assert pool.room_note == "a call site stayed at 3 pairs: the host has 1.0 GiB available"
    assert pool.grow_error is None and pool.limit == 5  # a later test, holding less, may grow it
    assert not pool.grow() and len(asked) == 1  # just refused: not weighed again at once
    pool.refused_until = 0.0  # time passes
    assert pool.grow() and started == [3] and len(pool.pairs) == 4 and len(asked) == 2
    assert pool.room_note is not None  # the call site that stayed smaller is still reported


def test_a_guard_that_fails_never_stops_the_pool(tmp_path: Path) -> None:
    from pytest_roofline.ab.pool import TwinPool

    def twin(pid: int) -> Any:
        return SimpleNamespace(nodeids={"t.py::a"}, error=None, log=tmp_path / "twin.log",
                               process=SimpleNamespace(pid=pid, poll=lambda: None))

    def room(pids: Sequence[int]) -> str | None:
        raise PermissionError("/proc/7/smaps_rollup")

    pool = TwinPool([(twin(0), twin(1))], starter=lambda number: (twin(2), twin(3)), limit=2, room=room)
    assert pool.grow() and len(pool.pairs) == 2 and pool.room_note is None
