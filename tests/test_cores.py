"""Cores of its own: /proc/stat parsing, the choice of cores, pinning, xdist shares, roofs per core count."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.host import cores
from pytest_roofline.model import Machine

# Two readings of /proc/stat, 100 ticks apart per core: cpu0 busy 97 of 100 (user 90 + system 5 + steal 2),
# cpu1 busy 10 of 100 (iowait counts as idle).
STAT_BEFORE = """cpu  2000 0 600 9000 40 0 0 0 0 0
cpu0 1000 0 300 4500 20 0 0 0 0 0
cpu1 1000 0 300 4500 20 0 0 0 0 0
intr 12345
ctxt 999
"""
STAT_AFTER = """cpu  2100 0 610 9085 45 0 0 2 0 0
cpu0 1090 0 305 4503 20 0 0 2 0 0
cpu1 1005 0 305 4585 25 0 0 0 0 0
intr 12400
"""


def test_parse_proc_stat_counts_idle_and_iowait_as_idle() -> None:
    parsed = cores.parse_proc_stat(STAT_BEFORE)
    assert parsed == {0: (1300, 5820), 1: (1300, 5820)}


def test_busy_shares_from_two_readings() -> None:
    shares = cores.busy_shares(cores.parse_proc_stat(STAT_BEFORE), cores.parse_proc_stat(STAT_AFTER))
    assert shares[0] == pytest.approx(97 / 100)
    assert shares[1] == pytest.approx(10 / 100)


def test_sample_load_reads_twice_a_window_apart() -> None:
    readings = iter([STAT_BEFORE, STAT_AFTER])
    slept: list[float] = []
    load = cores.sample_load(0.25, read=lambda: next(readings), sleep=slept.append, read_own=dict)
    assert slept == [cores.SETTLE_S, 0.25]
    assert load == pytest.approx({0: 0.97, 1: 0.10})
    assert cores.sample_load(read=lambda: None, sleep=lambda _: None, read_own=dict) is None


def task_stat(tid: int, name: str, utime: int, stime: int, core: int) -> str:
    """A /proc/<pid>/task/<tid>/stat line: utime and stime are fields 14 and 15, the last core field 39."""
    after_name = ["S", *["0"] * 10, str(utime), str(stime), *["0"] * 23, str(core), *["0"] * 12]
    return f"{tid} ({name}) " + " ".join(after_name) + "\n"


def test_own_threads_are_left_out_of_the_load() -> None:
    # An OpenBLAS thread of ours (its name has a space and a parenthesis) spun 80 of the 97 busy ticks on
    # core 0; another thread of ours ran 3 ticks on core 1; a thread that started in the window counts from 0.
    own_before = {1: task_stat(1, "python", 500, 20, 1), 2: task_stat(2, "blas (x) 1", 900, 0, 0)}
    own_after = {1: task_stat(1, "python", 502, 21, 1), 2: task_stat(2, "blas (x) 1", 980, 0, 0),
                 3: task_stat(3, "new", 0, 0, 1)}
    assert cores.parse_task_stat(own_after[2]) == (980, 0)
    assert cores.own_ticks(own_before, own_after) == {0: 80, 1: 3}
    readings, own = iter([STAT_BEFORE, STAT_AFTER]), iter([own_before, own_after])
    load = cores.sample_load(0.1, read=lambda: next(readings), sleep=lambda _: None, read_own=lambda: next(own))
    assert load == pytest.approx({0: 0.17, 1: 0.07})


@pytest.mark.parametrize(("text", "expected"), [
    ("auto", cores.CoresSetting("auto")),
    (" ALL ", cores.CoresSetting("all")),
    ("3", cores.CoresSetting("count", count=3)),
    ("0,2", cores.CoresSetting("list", cores=(0, 2))),
    ("4-6,1,5", cores.CoresSetting("list", cores=(1, 4, 5, 6))),
])
def test_parse_cores_accepts(text: str, expected: cores.CoresSetting) -> None:
    assert cores.parse_cores(text) == expected


@pytest.mark.parametrize("text", ["0", "many", "3-1", "1,,2", "-1", "1.5"])
def test_parse_cores_rejects_with_the_option_named(text: str) -> None:
    with pytest.raises(cores.CoresSettingError, match=r"--roofline-cores must be auto, all"):
        cores.parse_cores(text)


def test_auto_takes_half_the_machine_the_least_loaded_and_records_the_load_beside() -> None:
    placement = cores.choose(cores.CoresSetting("auto"), [0, 1, 2, 3], {0: 0.98, 1: 0.05, 2: 0.6, 3: 0.0})
    assert placement.used == (1, 3)
    assert not placement.contended
    assert placement.load_beside == 0.98
    assert placement.marker() == "cores 1,3 of 4, 98% busy beside"
    assert placement.to_dict()["load"] == {"0": 0.98, "1": 0.05, "2": 0.6, "3": 0.0}


@pytest.mark.parametrize(("machine", "allowed", "expected"), [
    (1, 1, 1), (2, 2, 1), (3, 3, 1), (4, 4, 2), (16, 16, 8),
    (4, 2, 2),   # an xdist worker's share of 2 on a 4-core machine: its whole share
    (16, 4, 4),
    (2, 1, 1),
])
def test_auto_count_is_half_the_machine_within_the_share(machine: int, allowed: int, expected: int) -> None:
    assert cores.auto_count(machine, allowed) == expected


def test_auto_count_does_not_change_with_the_load() -> None:
    quiet = cores.choose(cores.CoresSetting("auto"), [0, 1], {0: 0.1, 1: 0.0})
    loaded = cores.choose(cores.CoresSetting("auto"), [0, 1], {0: 1.0, 1: 0.0})
    assert quiet.count == loaded.count == 1
    assert quiet.used == (1,)   # equal load: the highest id (core 0 takes the interrupts)
    assert loaded.used == (1,)
    assert quiet.marker() == ""  # the usual case: said once in the summary, not on every row
    assert loaded.marker() == "core 1 of 2, 100% busy beside"
    other = cores.choose(cores.CoresSetting("auto"), [0, 1], {0: 0.0, 1: 0.9})
    assert other.used == (0,) and not other.contended


def test_auto_in_a_worker_share_uses_the_machine_count() -> None:
    placement = cores.choose(cores.CoresSetting("auto"), [2, 3], {2: 0.0, 3: 0.0}, machine_cores=4)
    assert placement.used == (2, 3)


def test_auto_without_a_free_core_is_contended() -> None:
    placement = cores.choose(cores.CoresSetting("auto"), [0, 1], {0: 0.9, 1: 1.0})
    assert placement.used == (0,)
    assert placement.contended
    assert placement.marker() == "contended, load 90%; core 0 of 2, 100% busy beside"
    four = cores.choose(cores.CoresSetting("auto"), [0, 1, 2, 3], {0: 0.9, 1: 1.0, 2: 0.0, 3: 0.7})
    assert four.used == (2, 3) and four.contended  # only one free core for a count of 2


def test_count_takes_the_least_loaded_and_list_takes_exactly_those() -> None:
    load = {0: 0.9, 1: 0.2, 2: 0.1, 3: 0.5}
    assert cores.choose(cores.CoresSetting("count", count=2), [0, 1, 2, 3], load).used == (1, 2)
    listed = cores.choose(cores.CoresSetting("list", cores=(0,)), [0, 1, 2, 3], load)
    assert listed.used == (0,) and not listed.contended  # the user's choice: measured as asked
    with pytest.raises(cores.CoresSettingError, match="core.s. 7 are not available"):
        cores.choose(cores.CoresSetting("list", cores=(0, 7)), [0, 1, 2, 3], load)
    with pytest.raises(cores.CoresSettingError, match="5 cores asked for"):
        cores.choose(cores.CoresSetting("count", count=5), [0, 1, 2, 3], load)


def test_unknown_load_means_free() -> None:
    placement = cores.choose(cores.CoresSetting("auto"), [0, 1], None)
    assert placement.used == (1,) and not placement.contended


@pytest.mark.parametrize(("index", "workers", "expected"), [
    (0, 2, [0, 1]), (1, 2, [2, 3]), (0, 3, [0]), (1, 3, [1]), (2, 3, [2, 3]), (0, 1, [0, 1, 2, 3]),
    (5, 6, [1]),  # more workers than cores: single cores, shared round-robin
])
def test_worker_shares_are_disjoint_slices(index: int, workers: int, expected: list[int]) -> None:
    assert cores.worker_share([3, 2, 1, 0], index, workers) == expected


def test_xdist_worker_from_environment() -> None:
    assert cores.xdist_worker({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}) == (1, 2)
    assert cores.xdist_worker({}) is None
    assert cores.xdist_worker({"PYTEST_XDIST_WORKER": "master", "PYTEST_XDIST_WORKER_COUNT": "2"}) is None


class FakeProcess:
    """Three threads on cores 0-3, torch at 4 threads."""

    def __init__(self) -> None:
        self.masks = {10: {0, 1, 2, 3}, 11: {0, 1, 2, 3}, 12: {0, 1}}
        self.threads_now = 4
        self.calls: list[tuple[str, object]] = []

    def affinity(self) -> cores.Affinity:
        def set_mask(tid: int, mask: set[int]) -> None:
            if tid == 12 and mask == {9}:
                raise OSError("gone")
            self.masks[tid] = set(mask)

        return cores.Affinity(lambda: sorted(self.masks), lambda tid: set(self.masks[tid]), set_mask)

    def pools(self) -> cores.ThreadPools:
        def set_threads(count: int) -> str:
            self.calls.append(("set", count))
            self.threads_now = count
            return "limits"

        def restore(state: object) -> None:
            self.calls.append(("restore", state))
            self.threads_now = state[0]  # type: ignore[index]

        return cores.ThreadPools(lambda: self.threads_now, set_threads, restore)


def test_pinned_moves_every_thread_and_restores_each_mask() -> None:
    fake = FakeProcess()
    with cores.pinned([2], fake.affinity(), fake.pools()):
        assert fake.masks == {10: {2}, 11: {2}, 12: {2}}
        assert fake.threads_now == 1
    assert fake.masks == {10: {0, 1, 2, 3}, 11: {0, 1, 2, 3}, 12: {0, 1}}
    assert fake.threads_now == 4
    assert fake.calls == [("set", 1), ("restore", (4, "limits"))]


def test_pinned_restores_after_an_exception() -> None:
    fake = FakeProcess()
    with pytest.raises(RuntimeError), cores.pinned([1, 3], fake.affinity(), fake.pools()):
        raise RuntimeError("test body failed")
    assert fake.masks[10] == {0, 1, 2, 3} and fake.threads_now == 4


def test_planner_pins_only_when_fewer_than_all_cores() -> None:
    fake = FakeProcess()
    loads = iter([{0: 1.0, 1: 0.0}, {0: 0.0, 1: 0.0}])
    planner = cores.Planner(cores.CoresSetting("auto"), [0, 1], sampler=lambda: next(loads),
                            affinity=fake.affinity(), pools=fake.pools())
    with planner.scope() as placement:
        assert placement.used == (1,)
        assert fake.masks[10] == {1} and fake.threads_now == 1
    all_cores = cores.Planner(cores.CoresSetting("all"), [0, 1], sampler=lambda: next(loads),
                              affinity=fake.affinity(), pools=fake.pools())
    with all_cores.scope() as placement:
        assert placement.used == (0, 1)
        assert fake.masks[10] == {0, 1, 2, 3} and fake.threads_now == 4  # untouched
    assert fake.calls == [("set", 1), ("restore", (4, "limits"))]


def test_counts_to_measure_and_brackets() -> None:
    assert cores.counts_to_measure(1) == [1]
    assert cores.counts_to_measure(2) == [1, 2]
    assert cores.counts_to_measure(12) == [1, 2, 4, 8, 12]
    assert cores.bracket(3, 12) == (2, 4)
    assert cores.bracket(10, 12) == (8, 12)
    assert cores.bracket(4, 12) == (4, 4)


def machine(count: int, fp32: float, dram: float, **extra: float) -> Machine:
    return Machine(f"cpu ({count} cores)", {"fp32": fp32, **extra}, {"DRAM": dram}, {"core_count": count})


def test_interpolate_is_linear_in_the_core_count() -> None:
    # 8 cores: 800 GFLOP/s, 40 GB/s; 12 cores: 1200 GFLOP/s, 44 GB/s. 10 cores lie halfway.
    machines = {8: machine(8, 800e9, 40e9, bf16=1e12), 12: machine(12, 1200e9, 44e9)}
    mid = cores.interpolate(machines, 10)
    assert mid.peak_flops["fp32"] == pytest.approx(1000e9)
    assert mid.bandwidth["DRAM"] == pytest.approx(42e9)
    assert mid.peak_flops["bf16"] == 1e12  # known at one end only: taken as is
    assert mid.info["interpolated_from"] == [8, 12] and mid.info["core_count"] == 10
    assert cores.interpolate(machines, 8) is machines[8]
    # a quarter of the way from 1 to 2 cores of 3: 9/4 of the 1-core FLOP rate
    assert cores.interpolate({1: machine(1, 100e9, 10e9), 2: machine(2, 200e9, 20e9)}, 1).peak_flops["fp32"] \
        == 100e9


def test_core_count_fingerprint_differs_per_count_but_not_per_core() -> None:
    base = {"device": "cpu", "cores": [0], "core_count": 1, "threads": 1, "torch_threads": 1, "isa": ["avx2"]}
    one = cores.core_count_fingerprint(base, 1, [0, 1, 2, 3])
    assert one["cores"] == [0, 1, 2, 3] and one["core_count"] == 1 and one["threads"] == 1
    two = cores.core_count_fingerprint({**base, "cores": [2]}, 2, [0, 1, 2, 3])
    assert two["threads"] == 2 and two["torch_threads"] == 2
    assert cores.core_count_fingerprint({**base, "cores": [3]}, 1, [0, 1, 2, 3]) == one


class FakeNvml:
    class Process:
        def __init__(self, pid: int, memory: int) -> None:
            self.pid, self.usedGpuMemory = pid, memory

    def __init__(self) -> None:
        self.shut = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Process]:
        return [self.Process(100, 2**30), self.Process(4242, 2**20)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: str) -> list[Process]:
        return [self.Process(100, 2**30), self.Process(7, 0)]


def test_gpu_processes_lists_the_others_from_nvml() -> None:
    nvml = FakeNvml()
    found = cores.gpu_processes(0, nvml, own_pid=4242)
    assert found == [{"pid": 100, "kind": "compute", "memory_bytes": 2**30},
                     {"pid": 7, "kind": "graphics", "memory_bytes": 0}]
    assert nvml.shut
    placement = cores.Placement((0, 1), (0, 1), {}, False, "auto", tuple(found))
    assert placement.marker() == "2 other process(es) on the GPU"
    assert placement.to_dict()["gpu_processes"][0]["pid"] == 100
    assert cores.Placement.from_dict(placement.to_dict()).gpu_processes == tuple(found)  # read back the same
    forged = {**placement.to_dict(), "gpu_processes": [{"pid": "100; rm"}, {"pid": 9, "memory_bytes": "lots"}]}
    assert cores.Placement.from_dict(forged).gpu_processes == ({"pid": 9, "kind": "", "memory_bytes": None},)


def test_gpu_processes_without_a_driver_is_empty() -> None:
    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    assert cores.gpu_processes(0, Broken()) == []


def test_the_summary_shows_the_roofs_of_fewer_cores_that_were_used(tmp_path: Path) -> None:
    from pytest_roofline.output.summary import SummaryContext, summary_lines

    full = Machine("box (2 cores)", {"fp32": 200e9}, {"DRAM": 100e9}, info={"method": "ert"})
    one = Machine("box (1 cores)", {"fp32": 100e9}, {"DRAM": 55e9}, info={"method": "ert"})
    lines = summary_lines([], SummaryContext([full], {1: one}, tmp_path, verbose=True))
    assert lines[0].startswith("machine: box (2 cores) (ert): fp32 200 GFLOP/s")
    assert lines[1].startswith("1-core roofs (call sites on 1 core): fp32 100 GFLOP/s")
    assert "box (1 cores)" not in lines[1]  # the machine is named once, on the line above
    assert "DRAM 55 GB/s" in lines[1]
