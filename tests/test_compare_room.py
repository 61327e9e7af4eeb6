"""The pool's memory guard (compare.room): a pair is added only where the host (and the GPU) has room for it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_roofline.compare.room import GIB, device_text, host_shortfall, private_bytes

ROLLUP = """00400000-7ffd0000 ---p 00000000 00:00 0                          [rollup]
Rss:             {rss} kB
Pss:             {pss} kB
Private_Clean:       {clean} kB
Private_Dirty:     {dirty} kB
Swap:                {swap} kB
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
    assert private_bytes(7, proc) == (1024 + 2048 + 512) * 1024  # not the 9 GB resident (torch, shared)
    assert private_bytes(8, proc) is None


def test_the_host_has_room_for_a_pair_only_with_twice_the_biggest_twin_for_each_of_its_two(tmp_path: Path) -> None:
    gib_kib = 1024 * 1024
    twins = {11: (0, gib_kib // 2, 0), 12: (0, gib_kib, 0)}  # the biggest holds 1 GiB
    short = host_shortfall([11, 12], fake_proc(tmp_path / "a", 3 * gib_kib, twins))
    assert short is not None  # a pair needs 2 twins x 2 x 1 GiB = 4 GiB; 3 GiB available
    assert "3.0 GiB available" in short and "about 4.0 GiB" in short and "1.0 GiB the biggest twin" in short
    assert host_shortfall([11, 12], fake_proc(tmp_path / "b", 4 * gib_kib, twins)) is None
    assert host_shortfall([11, 12], fake_proc(tmp_path / "c", None, twins)) is None  # no meminfo: cannot tell
    assert host_shortfall([13], fake_proc(tmp_path / "d", 1, {})) is None  # no twin readable: cannot tell


def test_the_gpu_has_room_for_a_pair_only_with_twice_a_process_share_for_each_of_its_two() -> None:
    # 6 twins and this process hold 70 GiB of 80: 10 GiB each; a pair needs 40 GiB, 10 GiB are free
    short = device_text(10 * GIB, 80 * GIB, 6)
    assert short is not None and "10.0 GiB free" in short and "about 40.0 GiB" in short
    assert device_text(60 * GIB, 80 * GIB, 6) is None  # 20 GiB in use over 7 processes: a pair needs 11.4 GiB


def test_a_pool_without_room_stays_at_its_pairs_says_why_and_grows_once_there_is_room(tmp_path: Path) -> None:
    from pytest_roofline.compare.pool import TwinPool

    def twin(pid: int) -> Any:
        return SimpleNamespace(nodeids={"t.py::a"}, error=None, log=tmp_path / "twin.log",
                               process=SimpleNamespace(pid=pid))

    started: list[int] = []
    asked: list[list[int]] = []
    answers = ["the host has 1.0 GiB available", None]

    def room(pids: Sequence[int]) -> str | None:
        asked.append(list(pids))
        return answers.pop(0)

    def starter(number: int) -> Any:
        started.append(number)
        return (twin(10 * number), twin(10 * number + 1))

    pool = TwinPool([(twin(2 * n), twin(2 * n + 1)) for n in range(3)], starter=starter, limit=5, room=room)
    assert not pool.grow() and started == [] and len(pool.pairs) == 3
    assert asked == [[0, 1, 2, 3, 4, 5]]  # every twin's process is weighed
    assert pool.grow_error == "the pool stayed at 3 pairs: the host has 1.0 GiB available"
    assert pool.limit == 5  # a later test, holding less, may grow it
    assert pool.grow() and started == [3] and len(pool.pairs) == 4
