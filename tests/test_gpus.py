"""One GPU per xdist worker: the mapping from worker id to CUDA_VISIBLE_DEVICES, and counting GPUs without
torch. No GPU here: the driver's /proc folder and nvidia-smi are faked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.host import gpus


@pytest.mark.parametrize(("worker", "count", "visible", "expected"), [
    ("gw0", 4, None, "0"),
    ("gw3", 4, None, "3"),
    ("gw5", 4, None, "1"),  # more workers than GPUs: round-robin, 5 mod 4
    ("gw1", 2, None, "1"),
    ("gw1", 1, None, None),  # one GPU: nothing to choose
    ("gw1", 0, None, None),  # no GPU
    ("gw1", 4, "2,3", None),  # the user's choice wins
    ("gw1", 4, "", None),  # set but empty (no GPU wanted) is a choice too
    ("master", 4, None, None),
    (None, 4, None, None),
])
def test_gpu_for_worker(worker: str | None, count: int, visible: str | None, expected: str | None) -> None:
    assert gpus.gpu_for_worker(worker, count, visible) == expected


def test_worker_index() -> None:
    assert gpus.worker_index("gw12") == 12
    assert gpus.worker_index("gw") is None
    assert gpus.worker_index("xgw1") is None


def test_assign_sets_the_variable_only_in_a_worker_without_one() -> None:
    counted: list[int] = []

    def four() -> int:
        counted.append(4)
        return 4

    env = {"PYTEST_XDIST_WORKER": "gw2"}
    assert gpus.assign_worker_gpu(env, four) == "2"
    assert env["CUDA_VISIBLE_DEVICES"] == "2"
    assert gpus.assignment_note(env, "2") == {"worker": "gw2", "cuda_visible_devices": "2",
                                              "gpu_set_by": "pytest-roofline"}
    mine = {"PYTEST_XDIST_WORKER": "gw2", "CUDA_VISIBLE_DEVICES": "7"}
    assert gpus.assign_worker_gpu(mine, four) is None
    assert mine["CUDA_VISIBLE_DEVICES"] == "7"
    serial: dict[str, str] = {}
    assert gpus.assign_worker_gpu(serial, four) is None
    assert serial == {}
    assert counted == [4]  # GPUs are counted only in the worker that may get one


def test_count_gpus_from_the_driver_folder(tmp_path: Path) -> None:
    for address in ("0000:17:00.0", "0000:65:00.0", "0000:ca:00.0"):
        (tmp_path / address).mkdir()
    assert gpus.count_gpus(tmp_path, smi=lambda: pytest.fail("nvidia-smi is not asked when /proc answers")) == 3


def test_count_gpus_from_nvidia_smi_when_the_folder_is_missing(tmp_path: Path) -> None:
    listing = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
               "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n"
               "  MIG 1g.10gb Device 0: (UUID: MIG-3)\n")
    assert gpus.count_gpus(tmp_path / "absent", smi=lambda: listing) == 2
    assert gpus.count_gpus(tmp_path / "absent", smi=lambda: None) == 0
