"""The paper's reading of a step and the counters' agreement, on records an H100 run left
(tests/fixtures/gpu-h100, PROVENANCE.md): no GPU needed. Figures derived by hand from the fixture's kernels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.counters.agreement import agreement, markdown
from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.output.artifacts import kernel_rows
from pytest_roofline.output.kernel_view import shares
from pytest_roofline.record.tests import TestRecord

FIXTURES = Path(__file__).parent / "fixtures" / "gpu-h100"
GEMM = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x64x32"


def record(name: str) -> tuple[Machine, dict[str, Any]]:
    document = json.loads((FIXTURES / name).read_text())
    return Machine.from_dict(document["machine"]), document["tests"][0]


def kernels_of(test: dict[str, Any]) -> list[KernelSample]:
    return [KernelSample(k["name"], k["flops"], k["bytes"], k["time_s"], k["launches"]) for k in test["kernels"]]


def test_the_conv_step_read_kernel_by_kernel() -> None:
    machine, test = record("conv2d_forward_fp32_ncu.results.json")
    kernels = kernels_of(test)
    # FLOPs: layout change 1,642,496 + 1,622,016; implicit GEMM 3,211,264 + 1,849,688,064 (2·8·64·64·9·56·56 on
    # TF32 Tensor Cores); bias add 3,211,264 + 12,845,056: 1,872,220,160 in all
    found = shares(kernels, machine)
    assert found.tensor_flops == pytest.approx(1_849_688_064 / 1_872_220_160)
    assert (found.no_flop_time, found.tensor_kernels, found.kernels) == (0.0, 1, 3)
    rows = kernel_rows(kernels, machine)
    assert rows[0]["name"].startswith(GEMM)  # the longest first: 22.4 of 40.6 µs
    total = 10.496e-6 + 22.432e-6 + 7.712e-6
    assert [r["time_share"] for r in rows] == pytest.approx([22.432e-6 / total, 10.496e-6 / total, 7.712e-6 / total])
    assert [r["tensor_core"] for r in rows] == [True, False, False]
    assert rows[0]["flops_tf32_tensor"] == 1_849_688_064 and rows[0]["ai_HBM"] == pytest.approx(
        (3_211_264 + 1_849_688_064) / 6_632_448)


def test_the_failure_chart_draws_each_kernel_in_its_colour_at_every_level(tmp_path: Path) -> None:
    from pytest_roofline.output.chart import KERNEL_COLOURS, roofline_figure, save

    machine, test = record("conv2d_forward_fp32_ncu.results.json")
    kernels = kernels_of(test)
    figure = roofline_figure(machine, kernels, title="test_conv2d_forward[fp32]")
    ax = figure.axes[0]
    drawn = [c for c in ax.collections if len(c.get_offsets())]
    assert len(drawn) == 9  # three kernels, each at its L1, L2 and HBM intensity
    faces = {tuple(round(v, 3) for v in c.get_facecolors()[0][:3]) for c in drawn}
    assert len(faces) == 3  # one colour per kernel
    black_edged = [c for c in drawn if tuple(c.get_edgecolors()[0][:3]) == (0.0, 0.0, 0.0)]
    assert len(black_edged) == 3  # the Tensor Core kernel's three markers
    gemm_colour = tuple(int(KERNEL_COLOURS[0][i:i + 2], 16) / 255 for i in (1, 3, 5))
    assert all(tuple(c.get_facecolors()[0][:3]) == pytest.approx(gemm_colour) for c in black_edged)  # longest first
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"kernel at its L1 intensity", "kernel at its L2 intensity", "kernel at its HBM intensity",
            "black edge: Tensor Core kernel"} <= set(labels)
    assert "0% of kernel time in kernels with no FLOPs; 99% of FLOPs on Tensor Cores (1 of 3 kernels)" in \
        ax.get_title()
    assert save(figure, tmp_path / "conv.png").stat().st_size > 10_000


def test_the_two_counters_of_the_recorded_h100_run_are_compared() -> None:
    """At e11b275 the analytic counter called cuDNN's TF32 convolution fp32 (it counts tf32 now, while
    torch.backends.cudnn.allow_tf32 is on): the FLOPs agree within 1.3 %, the precision and so the bound do not;
    the kernels whose work is in another precision are named."""
    _, analytic = record("conv2d_forward_fp32_analytic.results.json")
    _, ncu = record("conv2d_forward_fp32_ncu.results.json")
    found = agreement(TestRecord.from_dict(analytic), TestRecord.from_dict(ncu))
    assert found.analytic_flops == 1_849_688_064 and found.ncu_flops == 1_872_220_160
    assert found.ratio == pytest.approx(1_872_220_160 / 1_849_688_064) and found.flops_agree()
    assert (found.analytic_precision, found.ncu_precision) == ("fp32", "tf32_tensor") and not found.same_precision
    assert (found.analytic_bound, found.ncu_bound) == ("compute:fp32", "memory:L1") and not found.agrees()
    # the kernels whose work is in a precision the analytic counter did not count: the TF32 GEMM itself, and
    # the fp16 work ncu counts in the layout change and the bias add
    assert [round(f) for _, f in found.extra_kernels] == [1_849_688_064, 12_845_056, 1_622_016]
    assert found.extra_kernels[0][0].startswith(GEMM)
    text = found.describe()
    assert text.startswith("precision: analytic fp32, ncu tf32_tensor; bound: analytic compute:fp32, ncu memory:L1")
    assert "test_conv2d_forward[fp32]` | fp32 / tf32_tensor | compute:fp32 / memory:L1 | 1.012 |" in markdown([found])


def test_counters_that_agree_say_so() -> None:
    analytic = {"nodeid": "t::gemm", "flops_by_precision": {"tf32": 2e9}, "bound": "compute:tf32_tensor"}
    ncu = {"nodeid": "t::gemm", "flops_by_precision": {"tf32_tensor": 2.041e9, "fp32": 1e6},
           "bound": "compute:tf32_tensor", "kernels": [{"name": "gemm", "flops": {"tf32_tensor": 2.041e9}}]}
    found = agreement(TestRecord.from_dict(analytic), TestRecord.from_dict(ncu))
    assert found.agrees() and found.extra_kernels == []
    assert found.describe() == "the counters agree: tf32_tensor, compute:tf32_tensor, ncu/analytic FLOPs 1.021"
    more = TestRecord.from_dict({**ncu, "flops_by_precision": {"tf32_tensor": 2.2e9}})
    assert not agreement(TestRecord.from_dict(analytic), more).flops_agree()


def test_counters_agree_command_reads_two_results_files(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.commands import main

    files = [str(FIXTURES / f"conv2d_forward_fp32_{c}.results.json") for c in ("analytic", "ncu")]
    assert main(["counters-agree", *files]) == 1  # they differ: exit 1
    out = capsys.readouterr().out
    assert out.startswith("example_suite/test_conv2d.py::test_conv2d_forward[fp32]: precision: analytic fp32, ncu "
                          "tf32_tensor;")
    assert "in a precision the analytic counter did not count: sm80_xmma_fprop_implicit_gemm_tf32f32" in out
    assert main(["counters-agree", "--markdown", *files]) == 1
    assert capsys.readouterr().out.startswith("| test | precision (analytic / ncu) |")


def test_the_history_site_shows_the_kernels_at_every_level(tmp_path: Path) -> None:
    pytest.importorskip("ruptures", reason="the site needs pytest-roofline[site]")
    from pytest_roofline.history.writer import write_history
    from pytest_roofline.record.sessions import GitState, SessionInfo, SessionRecord
    from pytest_roofline.site.generate import build_site

    results = json.loads((FIXTURES / "conv2d_forward_fp32_ncu.results.json").read_text())
    meta = SessionInfo.from_dict(results["session"])
    document = SessionRecord.of_results(results, SessionInfo(
        id=meta.id, start=meta.start, end=meta.end, exit_status=meta.exit_status,
        git=GitState("e11b275" + "0" * 33, "main", False), pytest_args=("--roofline",), counter="ncu"))
    write_history(tmp_path / "history", document)
    build_site(tmp_path / "history", tmp_path / "site")
    (page,) = [p for p in (tmp_path / "site").rglob("*.html") if "/t/" in p.as_posix()]
    html = page.read_text()
    assert "Kernels of the latest session" in html
    assert "0% of kernel time in kernels with no FLOPs; 99% of FLOPs on Tensor Cores (1 of 3 kernels)" in html
    for level in ("L1", "L2", "HBM"):
        assert f'"name": "latest kernels at {level}"' in html or f'"name":"latest kernels at {level}"' in html
    assert html.index("sm80_xmma_fprop_implicit_gemm") < html.index("nchwToNhwcKernel")  # longest first


def test_a_kernel_in_a_precision_the_roofs_lack_leaves_the_site_standing() -> None:
    """A record's kernels are placed against its judged roofs; one in a precision or at a level those roofs do
    not have is placed on what it has (here: its L2 bytes only), never an error that stops the site."""
    from pytest_roofline.site import charts
    from pytest_roofline.site.generate import _kernel_view

    roofs = charts.Roofs({"fp32": 1e12}, {"L2": 1e12, "HBM": 1e11})
    record = TestRecord("t", kernels=({"name": "gemm", "flops": {"fp32": 1e9, "fp8_tensor": 5e9},
                                       "bytes": {"L2": 1e8, "L9": 5e7}, "time_s": 2e-3, "launches": 1},
                                      {"name": "cast", "flops": {}, "bytes": {"HBM": 1e8}, "time_s": 1e-3,
                                       "launches": 1}))
    points, table = _kernel_view(record, roofs)
    assert [(p.level, p.ai, p.share) for p in points] == [("L2", 10.0, pytest.approx(2 / 3))]
    assert "33% of kernel time in kernels with no FLOPs" in table
