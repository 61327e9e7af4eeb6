"""Per-op GPU times from a Kineto trace: kernels joined to their launching ops by correlation id.

The trace is constructed (``fixtures/kineto/README.md``): two ``roofline.call`` ranges of
``torch.relu(x @ w).sum()`` with Kineto's event shapes; every expected number below follows from its
timestamps by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_roofline.measure.ops.join import join
from pytest_roofline.measure.ops.kineto import calls_from_trace
from pytest_roofline.model.op_trace import TracedOp

TRACE = json.loads((Path(__file__).parent / "fixtures" / "kineto" / "relu_mm_sum_two_calls.json").read_text())
US = 1e-6


def test_each_op_gets_the_gpu_time_of_the_kernels_it_launched() -> None:
    first, _ = calls_from_trace(TRACE)  # the device-side gpu_user_annotation is not a third call
    matmul, relu, total = first.roots
    assert [e.name for e in first.roots] == ["aten::matmul", "aten::relu", "aten::sum"]
    assert matmul.time_s == pytest.approx(8 * US)  # the sgemm, launched by aten::mm inside aten::matmul
    mm, = matmul.children
    assert mm.time_s == pytest.approx(8 * US)
    empty, = mm.children
    assert empty.name == "aten::empty" and empty.time_s == pytest.approx(1 * US)  # no kernel: its host time
    assert relu.time_s == pytest.approx(2 * US) and relu.children[0].name == "aten::clamp_min"
    assert total.time_s == pytest.approx(3 * US)
    assert matmul.shapes == ((64, 64), (64, 64)) or matmul.shapes == ([64, 64], [64, 64])


def test_call_totals_idle_share_and_launch_cost() -> None:
    first, second = calls_from_trace(TRACE)
    assert first.wall_s == pytest.approx(100 * US)
    assert first.kernel_s == pytest.approx(13 * US) and first.busy_s == pytest.approx(13 * US)
    assert first.idle_share == pytest.approx(0.87)
    assert first.launches == 3 and first.launch_s == pytest.approx(13 * US)  # the sync call has no kernel
    # Second call: the clamp kernel overlaps the GEMM by 2 us on another stream; the union counts it once.
    assert second.kernel_s == pytest.approx(15 * US) and second.busy_s == pytest.approx(13 * US)
    assert second.idle_share == pytest.approx(1 - 13 / 50)
    assert second.launch_s == pytest.approx(7 * US)


def test_the_counted_ops_join_to_the_kernel_times() -> None:
    trace = [TracedOp("aten::mm", ((64, 64), (64, 64)), "mm"),
             TracedOp("aten::clamp_min", ((64, 64),), "relu"),
             TracedOp("aten::sum", ((64, 64),), "sum")]
    for call, expected in zip(calls_from_trace(TRACE), ([8, 2, 3], [8, 4, 3])):
        times = join(trace, call.roots)
        assert times == pytest.approx([t * US for t in expected])


def test_a_kernel_without_its_launch_call_joins_through_the_external_id() -> None:
    events = [e for e in TRACE["traceEvents"] if not (e["cat"] == "cuda_runtime" and e["args"].get("correlation")
                                                    == 13)]
    first, _ = calls_from_trace(events)
    assert first.roots[2].time_s == pytest.approx(3 * US)  # aten::sum by External id 7
    assert first.launches == 3 and first.kernel_s == pytest.approx(13 * US)  # the kernel still counts
    assert first.launch_s == pytest.approx(9 * US)  # host time of the two launch calls left


def test_the_report_leads_with_the_gpu_idle_share_and_the_launch_cost() -> None:
    from pytest_roofline.measure.ops.join import kernel_times
    from pytest_roofline.measure.ops.times import build_report
    from pytest_roofline.model import KernelSample, Machine

    trace = [TracedOp("aten::mm", ((64, 64), (64, 64)), "mm"),
             TracedOp("aten::clamp_min", ((64, 64),), "relu"),
             TracedOp("aten::sum", ((64, 64),), "sum")]
    kernels = [KernelSample("mm", {"fp32": 2 * 64**3}, {"DRAM": 3 * 64 * 64 * 4}),
               KernelSample("relu", {"fp32": 64 * 64}, {"DRAM": 2 * 64 * 64 * 4}),
               KernelSample("sum", {"fp32": 64 * 64}, {"DRAM": 64 * 64 * 4})]
    calls = calls_from_trace(TRACE)
    joined = kernel_times(trace, [c.roots for c in calls])
    assert joined.matched == joined.total == 3
    machine = Machine("h100-like", {"fp32": 60e12}, {"DRAM": 3e12})
    _, report = build_report(kernels, joined, machine, region_s=80 * US, walls=[100 * US, 50 * US], device="cuda",
                             dispatch_s=15 * US, bare=[80 * US, 70 * US], gpu_calls=calls)
    gpu = report.gpu
    assert gpu is not None
    assert gpu.kernel_s == pytest.approx(14 * US) and gpu.idle_share == pytest.approx((0.87 + 0.74) / 2)
    assert gpu.launch_s == pytest.approx((13 / 3 + 7 / 3) / 2 * US) and gpu.launches == 3
    # Op times are the kernels' GPU times: medians per op over the two calls, 8 + 3 + 3 us of a 75 us call.
    assert report.coverage == pytest.approx(14 / 75)
    assert report.diagnostics[0].startswith("the GPU is idle 8") and "launch-bound" in report.diagnostics[0]
    rows = report.gpu_rows()
    assert rows[0].startswith("GPU idle 8") and "14 us of 75 us per call = 0.19 of the region time;" in rows[0]
    assert rows[1].startswith("launch/dispatch: 3 kernels per call, 3.33 us host time per launch; 15 us")
    assert report.to_dict()["gpu"]["kernel_coverage"] == pytest.approx(14 / 75)
    # Every kernel was joined to an op: the ops hold all of the kernels' time (medians 8 + 3 + 3 of 14 us).
    assert report.to_dict()["gpu"]["ops_share_of_kernel_time"] == pytest.approx(1.0)
    assert rows[0].endswith("; the timed ops hold 1.00 of the kernels' time")


def test_ops_of_autograds_device_thread_belong_to_the_call() -> None:
    def x(cat: str, name: str, ts: float, dur: float, tid: int, **args: object) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    events = [x("user_annotation", "roofline.call", 0, 100, 1),
              x("cpu_op", "aten::mm", 5, 10, 1, **{"Input Dims": [[8, 8], [8, 8]]}),
              x("cuda_runtime", "cudaLaunchKernel", 7, 2, 1, correlation=1),
              x("cpu_op", "MmBackward0", 40, 30, 2),  # autograd's thread for the device
              x("cpu_op", "aten::mm", 45, 10, 2, **{"Input Dims": [[8, 8], [8, 8]]}),
              x("cuda_runtime", "cudaLaunchKernel", 47, 3, 2, correlation=2),
              x("kernel", "gemm", 20, 6, 9, correlation=1), x("kernel", "gemm", 60, 7, 9, correlation=2)]
    call, = calls_from_trace(events)
    assert [(e.name, e.time_s) for e in call.roots] == [("aten::mm", pytest.approx(6 * US)),
                                                        ("MmBackward0", pytest.approx(7 * US))]
    assert call.launches == 2 and call.kernel_s == pytest.approx(13 * US) and call.launch_s == pytest.approx(5 * US)


def test_ops_that_start_together_and_a_launch_outside_every_op() -> None:
    # One call range [0, 100] us on thread 1: aten::outer [10, 60] holds aten::inner, which starts with it and
    # ends first [10, 40]; each launches a kernel. A third launch at 80 us lies in no op (a kernel its
    # External id does not place either): it belongs to the call, to no op. Every number follows by hand.
    def op(name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": 1, "args": {}}

    def launch(ts: float, correlation: int) -> dict:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2.0, "tid": 1,
                "args": {"correlation": correlation}}

    def kernel(ts: float, dur: float, correlation: int) -> dict:
        return {"ph": "X", "cat": "kernel", "name": f"k{correlation}", "ts": ts, "dur": dur, "tid": 7,
                "args": {"correlation": correlation}}

    events = [{"ph": "X", "cat": "user_annotation", "name": "roofline.call", "ts": 0.0, "dur": 100.0, "tid": 1},
              op("aten::outer", 10.0, 50.0), op("aten::inner", 10.0, 30.0),
              launch(20.0, 1), kernel(30.0, 5.0, 1),  # inside both: the inner one, the latest to start, owns it
              launch(50.0, 2), kernel(55.0, 7.0, 2),  # the inner one has ended: the outer one owns it
              launch(80.0, 3), kernel(85.0, 11.0, 3),  # in no op
              launch(150.0, 4), kernel(152.0, 13.0, 4)]  # after the call: not its kernel
    call, = calls_from_trace(events)
    outer, = call.roots
    inner, = outer.children
    assert inner.time_s == pytest.approx(5 * US) and outer.time_s == pytest.approx((5 + 7) * US)
    assert call.kernel_s == pytest.approx((5 + 7 + 11) * US) and call.launches == 3
    assert call.launch_s == pytest.approx(3 * 2 * US) and call.busy_s == pytest.approx(23 * US)
