"""Per-op times on the analytic path (issue 12): the join of profiler events to counted ops, the per-op
numbers, the diagnostics, and a module of known ops whose join is exact, autograd's backward included.

No assertion here depends on how fast anything ran: times enter only as hand-made numbers or as "present".
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from pytest_roofline.counters.analytic import AnalyticCounter
from pytest_roofline.measure.ops import profile as op_profile
from pytest_roofline.measure.ops.findings import (
    OpRow,
    fp32_fallback,
    no_flop_share,
    outside_ops,
    too_small,
    would_fit_faster_level,
)
from pytest_roofline.measure.ops.join import flat_shapes, join, kernel_times, preorder
from pytest_roofline.measure.ops.times import build_report
from pytest_roofline.model import KernelSample, Machine
from pytest_roofline.model.op_trace import ProfiledEvent, TracedOp, profiler_op_name
from pytest_roofline.output.text import op_lines

MACHINE = Machine("m", {"fp32": 100e9, "bf16": 400e9}, {"DRAM": 10e9, "L2": 100e9},
                  info={"capacities": {"L2": 4_000_000, "DRAM": 1e12}})


def ev(name: str, shapes: tuple = (), time_s: float = 1.0, *children: ProfiledEvent) -> ProfiledEvent:
    return ProfiledEvent(name, shapes, time_s, tuple(children))


# ---- names and shapes --------------------------------------------------------------------------------
def test_profiler_op_name_drops_the_overload() -> None:
    assert profiler_op_name("aten.add.Tensor") == "aten::add"
    assert profiler_op_name("aten.relu_.default") == "aten::relu_"
    assert profiler_op_name("aten._to_copy.default") == "aten::_to_copy"


def test_flat_shapes_keeps_tensor_shapes_only() -> None:
    # conv: input, weight, bias, then stride/padding lists (recorded as []); cat's tensor list as nested lists
    assert flat_shapes([[2, 4, 8, 8], [8, 4, 3, 3], [8], [], [], []]) == ((2, 4, 8, 8), (8, 4, 3, 3), (8,))
    assert flat_shapes([[[2, 3], [2, 5]], []]) == ()  # a tensor list: left out, as the counter does
    assert flat_shapes([[], [], []]) == ()


def test_preorder_gives_each_event_the_end_of_its_subtree() -> None:
    tree = [ev("a", (), 3.0, ev("b", (), 1.0, ev("c")), ev("d")), ev("e")]
    flat = preorder(tree)
    assert [(f.name, f.end) for f in flat] == [("a", 4), ("b", 3), ("c", 3), ("d", 4), ("e", 5)]


# ---- the join ----------------------------------------------------------------------------------------
MM = TracedOp("aten::mm", ((32, 64), (64, 16)), "mm")
RELU = TracedOp("aten::relu", ((32, 16),), "relu")


def test_a_matmul_joins_to_the_mm_inside_its_wrapper_with_its_inclusive_time() -> None:
    # aten::matmul (not counted: it decomposes above the dispatch key) > aten::mm > aten::empty
    calls = [ev("aten::matmul", ([32, 64], [64, 16]), 5e-3,
                ev("aten::mm", ([32, 64], [64, 16]), 4e-3, ev("aten::empty", ([], []), 1e-5))),
             ev("aten::relu", ([32, 16],), 2e-5, ev("aten::clamp_min", ([32, 16], []), 1e-5))]
    assert join([MM, RELU], calls) == [4e-3, 2e-5]


def test_shapes_must_agree() -> None:
    calls = [ev("aten::mm", ([32, 64], [64, 8]), 1e-3), ev("aten::mm", ([32, 64], [64, 16]), 2e-3)]
    assert join([MM], calls) == [2e-3]


def test_nothing_inside_a_match_matches_a_later_op() -> None:
    # relu_ runs a relu inside (made up): the counted relu that follows must get the outer one, not it
    inner = ev("aten::relu", ([32, 16],), 1.0)
    calls = [ev("aten::mm", ([32, 64], [64, 16]), 3.0, inner), ev("aten::relu", ([32, 16],), 7.0)]
    assert join([MM, RELU], calls) == [3.0, 7.0]


def test_an_op_missing_from_the_profile_does_not_swallow_the_rest() -> None:
    # the first mm has no event; a later mm of the same shapes must not be taken for it (that would skip relu)
    trace = [MM, RELU, MM]
    calls = [ev("aten::relu", ([32, 16],), 1.0), ev("aten::mm", ([32, 64], [64, 16]), 2.0)]
    assert join(trace, calls) == [None, 1.0, 2.0]


def test_a_wrapper_named_like_the_next_op_is_not_taken_for_it() -> None:
    # autocast's cat: aten::cat (autocast) > aten::to > aten::_to_copy, then the real aten::cat
    cast = TracedOp("aten::_to_copy", ((1, 8),), "cast")
    cat = TracedOp("aten::cat", (), "cat")
    calls = [ev("aten::cat", ([], []), 9.0, ev("aten::to", ([1, 8],), 4.0, ev("aten::_to_copy", ([1, 8],), 3.0)),
                ev("aten::cat", ([], []), 5.0))]
    assert join([cast, cat], calls) == [3.0, 5.0]


def test_an_out_of_place_op_matches_its_in_place_twin_when_nothing_else_does() -> None:
    add = TracedOp("aten::add", ((32, 16), (32, 16)), "add")
    calls = [ev("aten::relu", ([32, 16],), 1.0), ev("aten::add_", ([32, 16], [32, 16], []), 3.0)]
    assert join([RELU, add], calls) == [1.0, 3.0]
    exact = [ev("aten::add_", ([32, 16], [32, 16], []), 3.0), ev("aten::add", ([32, 16], [32, 16], []), 5.0)]
    assert join([add], exact) == [5.0]  # the exact name wins


def test_kernel_times_sum_launches_take_the_median_call_and_extrapolate_partial_matches() -> None:
    trace = [MM, RELU, MM, TracedOp("aten::empty", (), None)]
    call = [ev("aten::mm", ([32, 64], [64, 16]), 1.0), ev("aten::relu", ([32, 16],), 0.5),
            ev("aten::mm", ([32, 64], [64, 16]), 2.0), ev("aten::empty", (), 0.25)]
    slow = [ev("aten::mm", ([32, 64], [64, 16]), 4.0), ev("aten::relu", ([32, 16],), 0.5),
            ev("aten::mm", ([32, 64], [64, 16]), 5.0), ev("aten::empty", (), 0.25)]
    times = kernel_times(trace, [call, call, slow])
    assert times.per_kernel == {"mm": 3.0, "relu": 0.5}  # median of 3, 3, 9
    assert (times.matched, times.total, times.other_s) == (4, 4, 0.25)
    partial = kernel_times(trace, [[ev("aten::mm", ([32, 64], [64, 16]), 1.0), ev("aten::relu", ([32, 16],), 0.5)]])
    assert partial.per_kernel["mm"] == 2.0  # one of two launches matched, at 1.0: scaled by 2 / 1
    assert partial.partial == {"mm": (1, 2)}
    assert partial.unmatched == {"aten::mm": 1, "aten::empty": 1}


# ---- per-op numbers ----------------------------------------------------------------------------------
def test_report_numbers_by_hand() -> None:
    m, n, k = 256, 128, 512
    flops = 2 * m * n * k  # 33.554432 MFLOP: 0.33554432 ms at 100 GFLOP/s
    mm = KernelSample("mm", {"fp32": flops}, {"DRAM": 4 * (m * k + k * n + m * n)})  # 917,504 B: 91.75 us
    copy = KernelSample("copy", {}, {"DRAM": 1_000_000})  # 0.1 ms at 10 GB/s
    joined = kernel_times([TracedOp("aten::mm", (), "mm"), TracedOp("aten::copy_", (), "copy")],
                          [[ev("aten::mm", (), 1e-3), ev("aten::copy_", (), 4e-4)]])
    kernels, report = build_report([mm, copy], joined, MACHINE, region_s=1.6e-3, walls=[2e-3], device="cpu",
                                   dispatch_s=1e-6)
    assert [k.time_s for k in kernels] == [1e-3, 4e-4]
    row = report.row("mm")
    assert row.bound == "compute:fp32"
    assert row.t_min_s == pytest.approx(flops / 100e9)
    assert row.fraction == pytest.approx(0.33554432)
    assert row.lost_s == pytest.approx(1e-3 - 3.3554432e-4)
    assert report.row("copy").fraction == pytest.approx(0.25)
    assert report.coverage == pytest.approx(1.4e-3 / 1.6e-3)
    assert report.overhead == pytest.approx(0.25)  # 2 ms profiled / 1.6 ms bare
    assert [r.name for r in report.top_lost()] == ["mm", "copy"]
    assert report.to_dict()["ops_timed"] == 2
    # with bare calls beside the profiled ones, those are the reference: median 1.75 ms
    _, beside = build_report([mm, copy], joined, MACHINE, region_s=1.6e-3, walls=[2e-3], device="cpu",
                             dispatch_s=1e-6, bare=[2.5e-3, 1e-3, 1.75e-3])
    assert beside.coverage == pytest.approx(0.8)
    assert beside.overhead == pytest.approx(2 / 1.75 - 1)
    assert beside.to_dict()["coverage_of_timed_median"] == pytest.approx(1.4e-3 / 1.6e-3)


def test_failure_lines_name_the_ops_that_lose_most_with_their_fractions() -> None:
    rows = [OpRow(f"op{i}", 1, t, 1e-4, "memory:DRAM", {}, {"DRAM": 1e6})
            for i, t in enumerate([1e-3, 5e-3, 2e-3, 4e-3])]
    report = SimpleNamespace(coverage=0.9, overhead=0.05, calls=3, unmatched={}, total=4, diagnostics=["x"],
                             top_lost=lambda: sorted(rows, key=lambda r: -r.lost_s)[:3])
    lines = op_lines([SimpleNamespace(label="step", ops=report)])
    assert lines[0].startswith("ops:        coverage 0.90 of the region time, profiler overhead +5% (3 profiled")
    assert lines[1] == "lost most:  op1: 4.9 ms lost of 5 ms (fraction 0.02, memory:DRAM)"
    assert [line.split(":")[0].strip() for line in lines[2:4]] == ["op3", "op2"]
    assert lines[4] == "op note:    x"


# ---- diagnostics -------------------------------------------------------------------------------------
def row(name: str, time_s: float | None, t_min: float, bound: str = "memory:DRAM", flops: dict | None = None,
        moved: float = 1e6, launches: int = 1) -> OpRow:
    return OpRow(name, launches, time_s, t_min, bound, flops or {}, {bound.split(":")[1] if "memory" in bound
                                                                      else "DRAM": moved})


def test_time_outside_the_ops_is_said_when_the_profiler_did_not_inflate_them() -> None:
    (line,) = outside_ops(0.25, 0.1)
    assert line.startswith("the ops account for 25% of the region's time")
    assert outside_ops(0.75, 0.1) == [] and outside_ops(0.25, 1.5) == []


def test_no_flop_share() -> None:
    rows = [row("cat", 3e-3, 1e-4), row("conv", 7e-3, 6e-3, "compute:fp32", {"fp32": 6e8})]
    assert no_flop_share(rows) == ["30% of the op time is in 1 ops with no FLOPs (data movement: cat)"]
    assert no_flop_share([row("cat", 0.5e-3, 1e-4), row("conv", 9.5e-3, 6e-3, "compute:fp32", {"fp32": 1})]) == []


def test_too_small_compares_the_time_at_the_roof_per_call_with_the_dispatch_cost() -> None:
    # 0.8 us at its roof over 2 calls: 0.4 us per call, under a 1 us dispatch; 9 us measured: fraction 0.09
    rows = [row("add", 9e-6, 8e-7, launches=2), row("big", 9.1e-5, 1e-5)]
    (line,) = too_small(rows, dispatch_s=1e-6)
    assert line.startswith("1 ops would need less than the 1 us an op costs to dispatch per call even at their "
                           "roof (9% of the op time: add)")
    assert too_small(rows, dispatch_s=1e-7) == []
    assert too_small([rows[0], row("big", 1e-2, 1e-3)], dispatch_s=1e-6) == []  # 0.09 % of the time: not said


def test_fp32_fallback_only_in_a_reduced_precision_region() -> None:
    rows = [row("aten.convolution.default[1x8]", 2e-3, 1e-3, "compute:fp32", {"fp32": 1e8}),
            row("aten.convolution.default[1x16]", 2e-3, 1e-3, "compute:bf16", {"bf16": 4e8})]
    (line,) = fp32_fallback(rows)
    assert line.startswith("aten.convolution.default[1x8] computed in fp32 in a region that computes in bf16, "
                           "50% of the op time")
    assert fp32_fallback(rows[:1]) == []


def test_a_memory_bound_op_whose_bytes_would_fit_a_faster_level() -> None:
    fits = row("bn", 1e-3, 2e-4, moved=2e6)  # 2 MB per call <= 0.75 x 4 MB of L2; fraction 0.2
    too_big = row("big", 1e-2, 1e-3, moved=1e7)
    good = row("fast", 1e-4, 0.9e-4, moved=9e5)  # fraction 0.9: nothing to gain
    tiny = row("ones", 1e-5, 1e-9, moved=8)  # loses 10 us of 9.8 ms lost in all: under 2 %
    (line,) = would_fit_faster_level([fits, too_big, good, tiny], MACHINE)
    assert line.startswith("bn: memory-bound at DRAM, but its 2 MB per call would fit L2 (4 MB)")
    assert line.endswith("(10.0x DRAM)")


# ---- the CUDA path, offline ---------------------------------------------------------------------------
def fake(name: str, start: float, cpu_us: float, device_us: float, children: list | None = None,
         parent: object = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, input_shapes=[[4, 4]], cpu_time_total=cpu_us, device_time_total=device_us,
                           time_range=SimpleNamespace(start=start), cpu_children=children or [], cpu_parent=parent)


def test_call_trees_take_device_time_on_cuda_and_cpu_time_on_the_cpu() -> None:
    mm = fake("aten::mm", 2.0, 30.0, 12.0)
    relu = fake("aten::relu", 1.0, 10.0, 3.0)
    call = fake(op_profile.CALL_RANGE, 0.0, 100.0, 15.0, [mm, relu])
    setup = fake("aten::zero_", -1.0, 5.0, 1.0)
    (cuda,) = op_profile.call_trees([setup, call, mm, relu], "cuda")
    assert [(e.name, e.time_s) for e in cuda] == [("aten::relu", pytest.approx(3e-6)),
                                                  ("aten::mm", pytest.approx(12e-6))]
    (cpu,) = op_profile.call_trees([call], "cpu")
    assert [e.time_s for e in cpu] == [pytest.approx(10e-6), pytest.approx(30e-6)]


def test_calls_for_fits_half_the_budget() -> None:
    assert op_profile.calls_for(0.01, 1.0) == 5
    assert op_profile.calls_for(0.05, 1.0) == 5  # 0.5 s / (2 x 50 ms)
    assert op_profile.calls_for(0.1, 1.0) == 3  # 2 fit: at least 3
    assert op_profile.calls_for(0.4, 1.0) == 3  # a pair fits the budget: still 3
    assert op_profile.calls_for(0.6, 1.0) == 1  # a pair outlasts the budget: one profiled call, bounded
    assert op_profile.calls_for(2.0, 1.0) == 1


# ---- a module of known ops: the join is exact --------------------------------------------------------
def test_known_ops_forward_and_backward_join_exactly_in_order() -> None:
    m, k, n = 32, 64, 16
    x = torch.randn(m, k, requires_grad=True)
    w = torch.randn(k, n, requires_grad=True)

    def step() -> None:
        x.grad = None
        w.grad = None
        torch.relu(x @ w).sum().backward()

    counter = AnalyticCounter()
    _, kernels = counter.count(step, (), {})
    # forward: mm, relu, sum; backward: the seed gradient, relu's, then mm for w's gradient and for x's
    assert [(op.op, op.shapes) for op in counter.trace] == [
        ("aten::mm", ((m, k), (k, n))), ("aten::relu", ((m, n),)), ("aten::sum", ((m, n),)),
        ("aten::ones_like", ((),)), ("aten::threshold_backward", ((m, n), (m, n))),
        ("aten::mm", ((k, m), (m, n))), ("aten::mm", ((m, n), (n, k))),
    ]
    profiled = op_profile.profile_calls(step, (), {}, calls=2, prepare=lambda: ((), {}), synchronize=lambda: None)
    assert len(profiled.calls) == 2
    for call in profiled.calls:
        times = join(counter.trace, call)
        assert all(t is not None and t > 0 for t in times), times  # every op matched once, in order
    joined = kernel_times(counter.trace, profiled.calls)
    assert joined.matched == joined.total == 7
    forward_mm = next(s for s in kernels if s.name == "aten.mm.default[32x64,64x16]")
    assert forward_mm.flops == {"fp32": 2 * m * n * k}  # 65,536 FLOPs joined to the profiler's aten::mm
    assert joined.per_kernel[forward_mm.name] > 0
    assert set(joined.per_kernel) == {s.name for s in kernels}


# ---- the recorder's pass -----------------------------------------------------------------------------
def test_recorder_times_ops_on_request_and_a_failing_pass_becomes_a_note() -> None:
    from pytest_roofline.measure.regions import Recorder
    from pytest_roofline.measure.timing import TimingPolicy

    x = torch.randn(16, 16)
    broken = {"now": False}

    def step() -> torch.Tensor:
        if broken["now"]:
            raise RuntimeError("gone")
        return torch.relu(x @ x)

    recorder = Recorder(enabled=True, machine=lambda: MACHINE, counter=AnalyticCounter,
                        policy=TimingPolicy(max_time_s=0.05))
    recorder.measure(step)
    recorder.time_ops()  # ops_mode "off" (the default outside the plugin): nothing
    assert recorder.regions[0].ops is None
    recorder.ops_mode = "failed"
    recorder.time_ops()
    region = recorder.regions[0]
    assert region.ops is not None and region.ops.matched == region.ops.total == 2
    assert all(k.time_s for k in region.kernels)
    assert {"time_s", "t_min_s", "bound", "fraction", "lost_s"} <= set(region.to_dict()["kernels"][0])
    assert region.to_dict()["ops"]["profiled_calls"] == 5  # a call of microseconds: 5 pairs fit the budget
    recorder.measure(step)
    broken["now"] = True
    recorder.time_ops()
    assert recorder.regions[0].ops is region.ops  # timed once only
    assert recorder.regions[1].ops is None
    assert recorder.regions[1].notes[-1] == "per-op timing failed: RuntimeError('gone')"
