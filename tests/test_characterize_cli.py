"""``python -m pytest_roofline characterize``: JSON layout, table, plot, errors (measurement faked)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline import commands as cli
from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.model import Machine

MACHINE = Machine(
    "Test CPU (2 cores)",
    {"fp64": 120e9, "fp32": 240e9, "bf16": 900e9},
    {"L1": 400e9, "L2": 140e9, "L3": 70e9, "DRAM": 25e9},
    {"device": "cpu", "fingerprint_hash": "abc123", "seconds": 9.5, "date": "2026-01-01T00:00:00+00:00",
     "method": "ert", "threads": 2, "sources": {"bandwidth.L1": "ert-update", "peak_flops.fp64": "ert-fma-512bit"}},
)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def fake(device: str = "cpu", **kwargs: Any) -> Machine:
        seen.append({"device": device, **kwargs})
        if kwargs.get("progress"):
            kwargs["progress"]("measuring")
        return MACHINE

    monkeypatch.setattr(machine_api, "characterize", fake)
    return seen


def test_json_output_has_the_documented_keys(calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["characterize", "--json", "--recharacterize", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["device"] == "cpu" and document["fingerprint"] == "abc123" and document["seconds"] == 9.5
    assert document["bandwidth"] == {"L1": 400e9, "L2": 140e9, "L3": 70e9, "DRAM": 25e9}
    assert document["compute"] == {"fp64": 120e9, "fp32": 240e9, "bf16": 900e9}
    assert calls[0]["fresh"] is True and calls[0]["device"] == "cpu"
    assert "[characterize] measuring" in captured.err  # progress goes to stderr, JSON stays clean
    assert document["kept"] is True and document["not_kept"] is None


def test_a_record_that_is_not_kept_says_so_in_json_and_table(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    reasons = ["other work beside 30 of 40 watched spans (at most 10%; ...)", "DRAM: 4 undisturbed update passes"]
    busy = Machine(MACHINE.name, dict(MACHINE.peak_flops), dict(MACHINE.bandwidth),
                   {**MACHINE.info, "not_kept": "; ".join(reasons), "not_kept_reasons": reasons})
    monkeypatch.setattr(machine_api, "characterize", lambda device="cpu", **kwargs: busy)
    assert cli.main(["characterize", "--json", "--quiet"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kept"] is False and document["not_kept"] == reasons
    assert cli.main(["characterize", "--quiet"]) == 0
    table = capsys.readouterr().out
    assert "NOT KEPT (used by this run only, not cached" in table and "    - DRAM: 4 undisturbed update passes" in table


def test_table_output_and_quiet(calls: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["characterize", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "L1" in captured.out and "400.0 GB/s" in captured.out and "(ert-fma-512bit)" in captured.out
    assert captured.err == "" and calls[0]["progress"] is None


def test_plot_writes_an_image(calls: list[dict[str, Any]], tmp_path: Path) -> None:
    target = tmp_path / "roofline.png"
    assert cli.main(["characterize", "--quiet", "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_errors_become_exit_code_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(device: str = "cpu", **kwargs: Any) -> Machine:
        raise ValueError("unknown device 'tpu': use 'cpu', 'cuda' or 'cuda:N'")

    monkeypatch.setattr(machine_api, "characterize", broken)
    assert cli.main(["characterize", "--device", "tpu"]) == 2
    assert "unknown device" in capsys.readouterr().err


def test_cuda_without_a_gpu_says_there_is_none() -> None:
    from pytest_roofline.commands.characterize import device_problem

    error = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")
    text = device_problem("cuda", error, gpus=0)
    assert text.startswith("--device cuda: there is no usable NVIDIA GPU on this machine")
    assert text.endswith("[cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version]")
    assert device_problem("cuda:1", error, gpus=2) == str(error)  # a GPU is there: the runtime's words say more
    assert device_problem("cpu", ValueError("x"), gpus=0) == "x"
