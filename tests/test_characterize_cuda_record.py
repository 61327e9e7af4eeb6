"""The CUDA consistency rules against the recorded H100 characterization (issue 32), and a clean CUDA record
kept on the first try and loaded by the next call (a fake measurement: no GPU here)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.characterize import validate
from pytest_roofline.characterize.pinned import load_machine_file
from pytest_roofline.errors import DisturbedCharacterizationWarning
from pytest_roofline.model import Machine

RECORD = Path(__file__).parent / "fixtures" / "gpu-h100" / "characterize.json"  # see PROVENANCE.md there
TERA = 1e12


def _record() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def _fresh_h100() -> Machine:
    """The record as characterize_cuda returned it before the old rules reconciled it: the CUDA-core FMA peaks
    the GEMM replaced are in its sources ('gemm (above ert-fma 3.197e+04 GFLOP/s)'), the GEMMs in the tensor
    roofs."""
    data = _record()
    compute = dict(data["compute"])
    for precision in ("fp64", "fp16", "bf16"):
        found = re.search(r"above ert-fma ([0-9.e+]+) GFLOP/s", data["sources"][f"peak_flops.{precision}"])
        assert found is not None, precision
        compute[precision] = float(found.group(1)) * 1e9
    gemm = {p: compute[f"{p}_tensor"] for p in ("fp64", "tf32", "fp16", "bf16", "fp8")}
    sources = {key: ("ert-fma" if key in ("peak_flops.fp64", "peak_flops.fp16", "peak_flops.bf16") else value)
               for key, value in data["sources"].items()}
    return Machine(name=data["name"], peak_flops=compute, bandwidth=data["bandwidth"],
                   info={"device": "cuda:0", "method": "ert-cuda", "gemm_flops": gemm, "sources": sources})


def test_the_recorded_h100_measurement_is_consistent_and_keeps_cuda_core_roofs_apart() -> None:
    fresh = _fresh_h100()
    assert fresh.peak_flops["fp16"] == pytest.approx(63.46 * TERA)  # from the record's sources, by hand
    assert fresh.peak_flops["fp64"] == pytest.approx(31.97 * TERA)
    assert validate.check_machine(fresh) == []
    reconciled = validate.reconcile(fresh, native={"fp16", "bf16"})
    # CUDA-core roofs stay what the FMA kernels read; each GEMM sets only its Tensor Core roof.
    assert reconciled.peak_flops["fp16"] == pytest.approx(63.46 * TERA)
    assert reconciled.peak_flops["bf16"] == pytest.approx(63.57 * TERA)
    assert reconciled.peak_flops["fp64"] == pytest.approx(31.97 * TERA)
    assert reconciled.peak_flops["fp32"] == pytest.approx(62.176848393457 * TERA)
    assert reconciled.peak_flops["fp16_tensor"] == pytest.approx(749.427189244 * TERA)
    assert reconciled.peak_flops["fp64_tensor"] == pytest.approx(64.564128002 * TERA)
    assert reconciled.peak_flops["tf32_tensor"] == reconciled.peak_flops["tf32"]  # TF32 exists only there
    assert "emulated" not in reconciled.info


def test_the_recorded_h100_file_pins_as_it_is() -> None:
    machine = load_machine_file(RECORD)  # raises on any inconsistency
    assert machine.bandwidth_for("HBM") == pytest.approx(2.817383055 * TERA)
    assert validate.check_machine(machine) == []
    assert machine.info["pinned_from"]["sources"]["bandwidth.HBM"] == "ert-update-fp64"
    assert "kept" not in machine.info["pinned_from"]


def test_the_same_h100_record_under_the_cpu_rule_would_be_inconsistent() -> None:
    # The rule the record was refused by (a GEMM held to the FMA roof of its precision) still holds on a CPU.
    fresh = _fresh_h100()
    as_cpu = Machine(name="cpu", peak_flops={k: v for k, v in fresh.peak_flops.items() if "_tensor" not in k},
                     bandwidth=fresh.bandwidth, info={**fresh.info, "device": "cpu", "method": "ert"})
    assert sorted(p.key for p in validate.check_gemm(as_cpu)) == ["peak_flops.bf16", "peak_flops.fp16",
                                                                   "peak_flops.fp64"]


def test_a_gpu_gemm_far_above_its_tensor_roof_is_still_inconsistent() -> None:
    fresh = _fresh_h100()
    low = Machine(name=fresh.name, peak_flops={**fresh.peak_flops, "bf16_tensor": 300 * TERA},
                  bandwidth=fresh.bandwidth, info=fresh.info)
    problems = validate.check_gemm(low)
    assert [p.key for p in problems] == ["peak_flops.bf16_tensor"]
    assert "783.5" in problems[0].message or "7.835e+05" in problems[0].message


def test_gemm_roof_names_per_device() -> None:
    fresh = _fresh_h100()
    assert validate.gemm_roof_name(fresh, "fp16") == "fp16_tensor"
    assert validate.gemm_roof_name(fresh, "tf32_tensor") == "tf32_tensor"
    cpu = Machine(name="cpu", peak_flops={"fp32": 1e12}, bandwidth={"DRAM": 1e11}, info={"device": "cpu"})
    assert validate.gemm_roof_name(cpu, "fp32") == "fp32"


def test_the_names_match_the_ncu_counter() -> None:
    from pytest_roofline.counters.ncu.metrics import tensor_precision
    from pytest_roofline.model import TENSOR_SUFFIX

    assert tensor_precision("src_bf16_dst_fp32") == "bf16" + TENSOR_SUFFIX == "bf16_tensor"
    names = set(_record()["compute"])
    for path in ("src_tf32_dst_fp32", "src_fp16_dst_fp32", "src_bf16_dst_fp32", "src_fp64", "src_fp8_dst_fp32"):
        assert tensor_precision(path) in names, path


# --- cached on the first try -----------------------------------------------------------------------------

CUDA_FIELDS = {"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """characterize('cuda') measures the recorded H100 numbers through a fake characterize_cuda."""
    from pytest_roofline.characterize import cuda

    calls: list[int] = []

    def measure(index: int, fields: dict[str, Any], progress: Any) -> Machine:
        calls.append(index)
        return _fresh_h100()

    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    monkeypatch.setattr(machine_api, "fingerprint", lambda device="cpu": dict(CUDA_FIELDS))
    monkeypatch.setattr(cuda, "characterize_cuda", measure)
    return calls


def test_a_clean_cuda_record_is_cached_on_the_first_try_and_loaded_next(tmp_path: Path,
                                                                         fake_cuda: list[int]) -> None:
    lines: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DisturbedCharacterizationWarning)
        first = machine_api.characterize("cuda", cache_dir=tmp_path, progress=lines.append)
    assert fake_cuda == [0]  # one attempt, no second measurement
    assert not any("not clean" in line or "not kept" in line for line in lines), lines
    assert [p.name for p in tmp_path.glob("machine-cuda-*.json")] != []
    assert "inconsistent" not in first.info and "not_kept" not in first.info
    assert first.peak_flops["fp16"] == pytest.approx(63.46 * TERA)
    second = machine_api.characterize("cuda", cache_dir=tmp_path)  # the next session
    assert fake_cuda == [0]
    assert second.peak_flops == first.peak_flops and second.bandwidth == first.bandwidth
