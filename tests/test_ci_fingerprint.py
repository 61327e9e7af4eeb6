"""The fingerprint as CI sees it: printed without measuring (the cache key of the workflow in docs/), and per
GPU model, so xdist workers that each see another GPU of the same model share one characterization."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.characterize import fingerprint as fp_module
from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.commands import main


def test_cli_prints_the_cache_key_without_measuring(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(machine_api, "_measure", lambda *a, **k: pytest.fail("--fingerprint must not measure"))
    assert main(["characterize", "--fingerprint", "--cache-dir", str(tmp_path)]) == 0
    digest = capsys.readouterr().out.strip()
    assert machine_api.cache_file_for("cpu", tmp_path).name == f"machine-cpu-{digest}.json"
    assert list(tmp_path.iterdir()) == []


def _fake_cupy(monkeypatch: pytest.MonkeyPatch, names: dict[int, str]) -> None:
    def properties(index: int) -> dict[str, Any]:
        return {"name": names[index].encode(), "major": 9, "minor": 0, "multiProcessorCount": 132,
                "clockRate": 1980000, "memoryClockRate": 2619000, "totalGlobalMem": 80 << 30, "l2CacheSize": 50 << 20}

    runtime = types.SimpleNamespace(getDeviceProperties=properties, driverGetVersion=lambda: 12080,
                                    runtimeGetVersion=lambda: 12060)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))


def test_cuda_fingerprint_is_per_gpu_model(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cupy(monkeypatch, {0: "NVIDIA H100 80GB HBM3"})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    worker0 = fp_module.fingerprint("cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another H100, seen by another worker as its device 0
    worker1 = fp_module.fingerprint("cuda")
    assert worker0["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert fp_module.fingerprint_hash(worker0) == fp_module.fingerprint_hash(worker1)
    _fake_cupy(monkeypatch, {0: "NVIDIA A100-SXM4-80GB"})  # a worker on a GPU of another model
    other_model = fp_module.fingerprint("cuda")
    assert fp_module.fingerprint_hash(other_model) != fp_module.fingerprint_hash(worker0)
