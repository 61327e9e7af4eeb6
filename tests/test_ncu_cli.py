"""``python -m pytest_roofline import-ncu`` on self-written fixtures (and on one shared sample when present)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_roofline.commands import main
from pytest_roofline.model import Machine

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
MIXED = FIXTURES / "details_stdout_mixed.csv"
SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "ncu-samples"
GEMM = "void gemm<float, 2, true>(float const*, float const*, float*, int, int, int)"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["import-ncu", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_sums_launches_per_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, str(MIXED))
    kernels = {k["name"]: k for k in document["kernels"]}
    gemm = kernels[GEMM]
    assert gemm["launches"] == 2
    assert gemm["time_s"] == pytest.approx(4e-3)
    assert gemm["flops"] == {"fp32": 4_006_000.0}
    assert gemm["bytes"] == {"HBM": 100_000.0}
    assert gemm["ai"] == {"HBM": pytest.approx(40.06)}
    assert "fraction" not in gemm
    assert document["totals"]["time_s"] == pytest.approx(4e-3 + 5e-7)
    assert document["format"] == "details"
    assert document["definitions"]["time"] == "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second"
    assert document["diagnostics"]["top_kernels"][0]["name"] == GEMM


def test_json_with_machine_adds_fraction_and_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(Machine("toy", {"fp32": 1e12}, {"HBM": 1e11}).to_dict()))
    document = run_json(capsys, str(MIXED), "--machine-file", str(roofs))
    kernels = {k["name"]: k for k in document["kernels"]}
    # gemm: 4,006,000 FLOP / 1e12 = 4.006 us of compute vs 100,000 B / 1e11 = 1 us of HBM; measured 4 ms.
    assert kernels[GEMM]["bound"] == "compute:fp32"
    assert kernels[GEMM]["fraction"] == pytest.approx(4.006e-6 / 4e-3)
    # saxpy: 49,152 B / 1e11 = 0.49152 us vs 8,192 FLOP / 1e12; measured 0.5 us.
    saxpy = kernels["saxpy_kernel(float, float const*, float*)"]
    assert saxpy["bound"] == "memory:HBM" and saxpy["fraction"] == pytest.approx(0.98304)
    assert document["machine"] == "toy"


def test_missing_ceiling_is_reported_per_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(Machine("fp64 only", {"fp64": 1e12}, {"HBM": 1e11}).to_dict()))
    document = run_json(capsys, str(MIXED), "--machine-file", str(roofs))
    gemm = next(k for k in document["kernels"] if k["name"] == GEMM)
    assert gemm["fraction"] is None and "no compute ceiling for precision 'fp32'" in gemm["error"]


def test_table_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(Machine("toy", {"fp32": 1e12}, {"HBM": 1e11}).to_dict()))
    assert main(["import-ncu", str(MIXED), "--machine-file", str(roofs)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"report: {MIXED} (details; 3 launches, 2 kernels)")
    header = next(line for line in lines if line.lstrip().startswith("time"))
    assert "AI HBM" in header and "fraction" in header and header.endswith("kernel")
    row = next(line for line in lines if line.endswith("gemm<float, 2, true>(float const*, float const*, float*, "
                                                        "int, int, int)"))
    assert "4 ms" in row and "0.001" in row and "compute:fp32" in row
    assert "top kernels by time:" in out


def test_plot_writes_an_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(Machine("toy", {"fp32": 1e12}, {"L1": 1e12, "HBM": 1e11}).to_dict()))
    chart = tmp_path / "roofline.png"
    assert main(["import-ncu", str(FIXTURES / "raw_page.csv"), "--plot", str(chart), "--machine-file", str(roofs)]) == 0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bare = tmp_path / "bare.svg"
    assert main(["import-ncu", str(MIXED), "--plot", str(bare)]) == 0
    assert b"<svg" in bare.read_bytes()[:2000]
    assert "roofline chart:" in capsys.readouterr().out


def test_errors_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-ncu", str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["import-ncu", str(FIXTURES / "no_kernels.txt")]) == 2
    assert "No kernels were profiled" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["import-ncu", str(MIXED), "--machine-file", str(bad)]) == 2
    assert "cannot read machine file" in capsys.readouterr().err


def test_cc_option_reaches_the_tensor_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "a100.csv"
    text = MIXED.read_text().replace('"sm__sass_thread_inst_executed_op_ffma_pred_on.sum","inst","4,096"',
                                     '"sm__inst_executed_pipe_tensor.sum","inst","4,096"')
    report.write_text(text)
    unknown = run_json(capsys, str(report))
    saxpy = next(k for k in unknown["kernels"] if k["name"].startswith("saxpy"))
    assert saxpy["flops"]["fp16_tensor"] == 512 * 4096  # CC unknown: the Volta convention, with a warning
    assert saxpy["warnings"]
    ampere = run_json(capsys, str(report), "--cc", "8.0")
    saxpy = next(k for k in ampere["kernels"] if k["name"].startswith("saxpy"))
    assert "fp16_tensor" not in saxpy["flops"] and saxpy["tensor_flops"] is None


def test_module_entry_point_runs_in_a_subprocess() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_roofline", "import-ncu", str(MIXED), "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kernels"][0]["launches"] == 2


@pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"shared ncu samples not found at {SAMPLES}")
def test_shared_sample_06_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, str(next(SAMPLES.glob("06_*.csv"))))
    (gemm,) = document["kernels"]
    # sm__ops_path_tensor_src_bf16_dst_fp32.sum 1,275,068,416; gpu__time_duration.sum 23.42 us;
    # dram__bytes_read.sum 3.35 Mbyte + dram__bytes_write.sum 0.
    assert gemm["flops"] == {"bf16_tensor": 1_275_068_416.0}
    assert gemm["time_s"] == pytest.approx(23.42e-6)
    assert gemm["bytes"] == {"HBM": 3_350_000.0}
    assert gemm["ai"]["HBM"] == pytest.approx(1_275_068_416 / 3_350_000)
    assert document["compute_capabilities"] == ["12.0"]
