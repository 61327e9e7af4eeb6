"""One memory hierarchy and one set of roofs per device (issue 32, items 2-4), on a CUDA fake: fake tensors on a
"cuda" device (torch's FakeTensor needs no GPU), and a GPU record from the first H100 run.

``fixtures/h100_characterize.json`` is ``../shared/gpu-h100/characterize.json`` (``pytest-roofline characterize
--device cuda --json`` on one NVIDIA H100 80GB HBM3, 2026-11-26, main at e11b275), without the runner's last
line (``--- rc=0 after 30 s``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from pytest_roofline.counters import CounterBase
from pytest_roofline.counters.analytic import AnalyticCounter
from pytest_roofline.counters.declared import DeclaredCounter
from pytest_roofline.counters.ncu import metrics as ncu_metrics
from pytest_roofline.measure.regions import Recorder
from pytest_roofline.measure.timing import TimingPolicy
from pytest_roofline.model import KernelSample, Machine, sum_maps
from pytest_roofline.output.session_output import failure_report
from pytest_roofline.record.tests import TestRecord
from pytest_roofline.session.settings import MarkerOptions, SettingError

H100 = Path(__file__).parent / "fixtures" / "h100_characterize.json"
MiB = 2**20
CONV_FLOPS = 2 * 8 * 64 * 64 * 9 * 56 * 56  # N*K*C*R*S*P*Q, stride 1, padding 1: the H100 ncu count too


def h100() -> Machine:
    record = json.loads(H100.read_text())
    return Machine(record["name"], record["compute"], record["bandwidth"],
                   info={"device": record["device"], "method": record["method"],
                         "fingerprint": {"l2_bytes": 50 * MiB}})


CPU = Machine("host", {"fp32": 200e9, "fp64": 100e9}, {"L3": 400e9, "DRAM": 50e9},
              info={"capacities": {"L3": 32 * MiB}})


@pytest.fixture
def fake() -> Iterator[FakeTensorMode]:
    yield FakeTensorMode(allow_non_fake_inputs=True)


def on_cuda(mode: FakeTensorMode, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return FakeTensor(mode, torch.empty(*shape, dtype=dtype, device="meta"), torch.device("cuda"))


def count_in(mode: FakeTensorMode, fn: Callable[[], Any]) -> tuple[AnalyticCounter, list[KernelSample]]:
    counter = AnalyticCounter()
    with mode:
        _, kernels = counter.count(fn, (), {})
    return counter, kernels


def flops_of(kernels: list[KernelSample]) -> dict[str, float]:
    return sum_maps(k.flops for k in kernels)


@pytest.fixture
def tf32_flags() -> Iterator[None]:
    conv, matmul = torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
    yield
    torch.backends.cudnn.allow_tf32 = conv
    torch.set_float32_matmul_precision(matmul)


# --- 1. the analytic counter's levels on CUDA are the GPU record's ------------------------------------------

def test_cuda_bytes_are_counted_at_hbm_and_every_level_is_one_the_record_and_ncu_have(fake: FakeTensorMode) -> None:
    x, w = on_cuda(fake, 8, 64, 56, 56), on_cuda(fake, 64, 64, 3, 3)
    counter, kernels = count_in(fake, lambda: torch.nn.functional.conv2d(x, w, padding=1).relu())
    levels = {level for k in kernels for level in k.bytes}
    assert levels == {"HBM"} and counter.device == "cuda"
    record = h100()
    assert levels <= set(record.bandwidth) and "DRAM" not in record.bandwidth
    assert levels <= {ncu_metrics.LEVEL_L1, ncu_metrics.LEVEL_L2, ncu_metrics.LEVEL_HBM}
    # conv: input, weight read, output written (fp32): no write-allocate charge on a GPU
    conv = next(k for k in kernels if k.name.startswith("aten.convolution"))
    assert conv.bytes["HBM"] == 4 * (2 * 8 * 64 * 56 * 56 + 64 * 64 * 9)


def test_host_tensors_stay_at_dram_in_the_same_count() -> None:
    counter = AnalyticCounter()
    _, kernels = counter.count(lambda: torch.ones(1000) * 2, (), {})
    assert {level for k in kernels for level in k.bytes} == {"DRAM"} and counter.device == "cpu"


def test_a_gpu_working_set_that_fits_its_l2_is_judged_at_l2(fake: FakeTensorMode) -> None:
    kernels = [KernelSample("copy", {}, {"HBM": 3e9})]
    small, _ = Recorder.placed_kernels(_Footprint(10 * MiB), kernels, h100())
    assert small[0].bytes == {"L2": 3e9}  # 10 MiB <= 0.75 x 50 MiB
    big, _ = Recorder.placed_kernels(_Footprint(200 * MiB), kernels, h100())
    assert big[0].bytes == {"HBM": 3e9}
    host, _ = Recorder.placed_kernels(_Footprint(10 * MiB), [KernelSample("copy", {}, {"DRAM": 3e9})], CPU)
    assert host[0].bytes == {"L3": 3e9}


class _Footprint(CounterBase):
    name = "fake"

    def __init__(self, footprint: float, device: str | None = None) -> None:
        self.footprint_bytes, self.device = footprint, device


# --- 3. TF32 as PyTorch decides it ---------------------------------------------------------------------------

def test_an_fp32_conv_on_cuda_counts_as_tf32_while_cudnn_allows_it(fake: FakeTensorMode, tf32_flags: None) -> None:
    x, w = on_cuda(fake, 8, 64, 56, 56), on_cuda(fake, 64, 64, 3, 3)
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default
    _, kernels = count_in(fake, lambda: torch.nn.functional.conv2d(x, w, padding=1))
    assert flops_of(kernels) == {"tf32_tensor": CONV_FLOPS} and CONV_FLOPS == 1_849_688_064
    assert h100().peak_for("tf32") == pytest.approx(411.02e12, rel=1e-4)  # the record's tf32_tensor GEMM
    torch.backends.cudnn.allow_tf32 = False
    _, kernels = count_in(fake, lambda: torch.nn.functional.conv2d(x, w, padding=1))
    assert flops_of(kernels) == {"fp32": CONV_FLOPS}


def test_on_the_host_the_flag_changes_nothing(tf32_flags: None) -> None:
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    x, w = torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3)
    _, kernels = AnalyticCounter().count(lambda: torch.nn.functional.conv2d(x, w, padding=1) @ torch.randn(8, 8),
                                         (), {})
    assert set(flops_of(kernels)) == {"fp32"}


def test_fp32_matmuls_on_cuda_follow_the_float32_matmul_precision(fake: FakeTensorMode, tf32_flags: None) -> None:
    a, b = on_cuda(fake, 256, 512), on_cuda(fake, 512, 128)
    torch.set_float32_matmul_precision("highest")  # PyTorch's default
    _, kernels = count_in(fake, lambda: a @ b)
    assert flops_of(kernels) == {"fp32": 2 * 256 * 512 * 128}
    torch.set_float32_matmul_precision("high")
    _, kernels = count_in(fake, lambda: a @ b)
    assert flops_of(kernels) == {"tf32_tensor": 2 * 256 * 512 * 128}


def test_half_precision_gemms_on_cuda_count_on_the_tensor_core_roof(fake: FakeTensorMode) -> None:
    x, w = on_cuda(fake, 8, 64, 56, 56, dtype=torch.float16), on_cuda(fake, 64, 64, 3, 3, dtype=torch.float16)
    _, kernels = count_in(fake, lambda: torch.nn.functional.conv2d(x, w, padding=1).relu())
    assert flops_of(kernels) == {"fp16_tensor": CONV_FLOPS, "fp16": 8 * 64 * 56 * 56}  # relu: CUDA cores
    cuda_cores = Machine("no tensor cores", {"fp16": 30e12}, {"HBM": 1e12})
    assert cuda_cores.peak_for("fp16_tensor") == 30e12  # a record without a Tensor Core roof: the plain one


# --- 2. and 4. each call judged on its device's roofs; messages quote what results.json records ------------

def _record(recorder: Recorder) -> TestRecord:
    """The record of a failed test of these call sites, as the plugin builds it."""
    return TestRecord.of(recorder.measured(), nodeid="test_x", outcome="failed", min_fraction=0.9, artifacts=[],
                         nothing_counted=None, fields={})


def recorder(session: Machine, host: Machine | None = None) -> Recorder:
    r = Recorder(enabled=True, machine=lambda: session, counter=AnalyticCounter,
                 policy=TimingPolicy(max_time_s=0.05, min_rounds=3, max_rounds=5, first_batch=3, min_warmup=1,
                                     quiet_warmup=1))
    r.probe_mode = "live"
    if host is not None:
        r.machine_for_device = lambda device, count: host if device == "cpu" else session
    return r


def test_host_code_in_a_cuda_session_is_judged_on_the_cpus_roofs(tmp_path: Path) -> None:
    r = recorder(h100(), CPU)
    r.declare(flops={"fp64": 2 * 256**3}).measure(lambda: None)  # numpy's GEMM, declared: host code
    region = r.regions[0]
    assert region.device == "cpu" and r.device() == "cpu" and r.judged_machine() is CPU
    assert region.verdict.t_min == pytest.approx(2 * 256**3 / 100e9)  # the host's fp64, not the H100's 64.6 T
    record = _record(r).to_dict()
    assert record["device"] == "cpu" and record["judged_roofs"]["peak_flops"] == dict(CPU.peak_flops)
    r.declare(bytes=3e9, device="cuda").measure(lambda: None)  # a CuPy kernel, declared on the GPU
    assert r.regions[1].device == "cuda" and r.regions[1].kernels[0].bytes == {"HBM": 3e9}
    assert r.regions[1].verdict.t_min == pytest.approx(3e9 / h100().bandwidth["HBM"])
    assert r.device() == "cuda" and _record(r).device == "cpu+cuda"


def test_without_another_devices_roofs_everything_is_judged_on_the_sessions() -> None:
    r = recorder(CPU)
    r.declare(flops=1e9).measure(lambda: None)
    assert r.regions[0].device == "cpu" and r.regions[0].verdict.t_min == pytest.approx(1e9 / 200e9)


def test_every_roof_a_gpu_failure_quotes_is_the_one_results_json_records(tmp_path: Path) -> None:
    r = recorder(h100(), CPU)
    r.declare(flops={"tf32": 4e9}, bytes=4e9, device="cuda").measure(lambda: None)
    r.declare(bytes={"HBM": 4e8}, device="cuda").measure(lambda: None)
    record = _record(r).to_dict()
    judged = record["judged_roofs"]
    verdict = r.verdict()
    assert verdict is not None
    message, _ = failure_report(tmp_path, "test_x", r.judged_machine(), r.regions, verdict, 0.9)
    quoted = re.findall(r"of a ([0-9.e+]+) (GFLOP|GB)/s roof(?: at (\w+))?", message)
    assert [(unit, level) for _, unit, level in quoted] == [("GFLOP", ""), ("GB", "HBM")]
    (flop_roof, _, _), (byte_roof, _, _) = quoted
    assert float(flop_roof) * 1e9 == pytest.approx(judged["peak_flops"]["tf32"], rel=5e-3)
    assert float(byte_roof) * 1e9 == pytest.approx(judged["bandwidth"]["HBM"], rel=5e-3)
    assert r.regions[0].probe is None  # GPU work: no live probe, the record's roofs


# --- 5. the marker's threshold per device ---------------------------------------------------------------------

def test_min_fraction_per_device_is_chosen_by_where_the_work_ran() -> None:
    options = MarkerOptions.from_marker((), {"min_fraction": {"cpu": 0.2, "cuda": 0.5}})
    assert options.min_fraction is None and options.min_fraction_by_device == {"cpu": 0.2, "cuda": 0.5}
    assert options.fraction_for("cuda") == 0.5 and options.fraction_for("cpu") == 0.2
    only_gpu = MarkerOptions.from_marker((), {"min_fraction": {"cuda": 0.5}})
    assert only_gpu.fraction_for("cpu") is None  # not gated on the host
    assert MarkerOptions.from_marker((), {"min_fraction": 0.3}).fraction_for("cuda") == 0.3


@pytest.mark.parametrize(("value", "said"), [
    ({"gpu": 0.5}, "unknown key(s) 'gpu'"),
    ({}, "an empty mapping"),
    ({"cuda": 1.5}, "min_fraction={'cuda': ...}) must be a number in (0, 1]"),
    ({"cpu": "0.2"}, "min_fraction={'cpu': ...}) must be a number in (0, 1]"),
])
def test_a_bad_per_device_threshold_names_min_fraction_and_the_keys(value: Mapping[str, Any], said: str) -> None:
    with pytest.raises(SettingError) as error:
        MarkerOptions.from_marker((), {"min_fraction": value})
    assert "min_fraction" in str(error.value) and said in str(error.value)
    if "key" in said or "empty" in said:
        assert "'cpu', 'cuda'" in str(error.value)


def test_a_bad_per_device_threshold_is_a_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.roofline(min_fraction={"gpu": 0.5})
        def test_x(roofline):
            roofline.measure(lambda: None)
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*min_fraction={...}) takes one number in (0, 1] per device, keys 'cpu', 'cuda'*"])


def test_the_gate_applies_the_threshold_of_the_device_the_test_ran_on(tmp_path: Path) -> None:
    from pytest_roofline.gates.judge import judge, keep
    from pytest_roofline.session.settings import Settings
    from pytest_roofline.session.state import RooflineState, TestEntry

    machine_file = tmp_path / "machine.json"
    machine_file.write_text(json.dumps(CPU.to_dict()))
    state = RooflineState(Settings(enabled=True, directory=tmp_path / "out", machine_file=machine_file,
                                   counter="auto", device="cpu", max_time_s=0.05, recharacterize=False,
                                   malloc="default", confirm="off"))
    options = MarkerOptions.from_marker((), {"min_fraction": {"cpu": 1.0, "cuda": 1e-9}})
    for device, fails in (("cuda", False), ("cpu", True)):
        r = recorder(state.machine(), CPU)
        r.declare(flops=1e4, device=device).measure(lambda: sum(range(10_000)))  # 50 ns of work in ~100 us
        entry = TestEntry(f"test_{device}", None, r)
        outcome = judge(state, entry, entry.recorder.measured(), options, xfail=False)
        keep(entry, outcome)
        assert entry.min_fraction == (1.0 if device == "cpu" else 1e-9)
        assert (outcome.failure is not None) is fails
        assert entry.extra["min_fraction_by_device"] == {"cpu": 1.0, "cuda": 1e-9}


def test_declared_work_names_its_device() -> None:
    assert DeclaredCounter.from_user(flops=1.0).device == "cpu"
    assert DeclaredCounter.from_user(bytes=1.0, device="cuda").bytes == {"HBM": 1.0}
    with pytest.raises(ValueError, match=r"declare\(device=\.\.\.\) must be one of cpu, cuda, got 'gpu'"):
        DeclaredCounter.from_user(flops=1.0, device="gpu")


def test_a_cuda_session_characterizes_the_cpu_once_when_host_code_first_needs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.characterize import machine as machine_mod
    from pytest_roofline.host import cores
    from pytest_roofline.session.settings import Settings
    from pytest_roofline.session.state import RooflineState

    made: list[tuple[str, int | None]] = []

    def characterize(device: str, cores: int | None = None, **_: Any) -> Machine:
        made.append((device, cores))
        return h100() if device == "cuda" else CPU

    monkeypatch.setattr(machine_mod, "characterize", characterize)
    monkeypatch.setattr(cores, "base_affinity", lambda: [0, 1])
    state = RooflineState(Settings(enabled=True, directory=tmp_path, machine_file=None, counter="auto",
                                   device="cuda", max_time_s=0.05, recharacterize=False, malloc="default"))
    assert state.machine().name == h100().name and state.host_machine is None
    assert state.machine_for_device("cpu") is CPU and state.machine_for_device("cpu", 2) is CPU
    assert state.machine_for_device("cuda").name == h100().name
    assert made == [("cuda", None), ("cpu", None)] and state.host_machine is CPU


# --- 7. ops whose pointwise tag older torch builds lack ---------------------------------------------------------

@pytest.mark.parametrize("op", ["leaky_relu", "leaky_relu_", "_conj_physical"])
def test_activations_without_the_pointwise_tag_are_still_pointwise(op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.11 (the H100 runner's) does not tag aten.leaky_relu pointwise; 2.13 does. Counted either way."""
    from pytest_roofline.counters import op_schema

    monkeypatch.setattr(op_schema, "_has_tag", lambda func, tag: False)  # as on a build without the tag
    kind, _, _ = op_schema._classify(getattr(torch.ops.aten, op).default)
    assert kind == "pointwise"


class _Deferred(CounterBase):
    """ncu's parent side: runs the call, counts nothing here."""

    name, deferred = "ncu", True

    def count(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> tuple[Any, list[KernelSample]]:
        return fn(*args, **kwargs), []


def test_pending_copies_counted_analytically_carry_the_reason() -> None:
    """ncu saw no kernel (a copy is a cudaMemcpy): the pending region is counted analytically, with the note."""
    r = Recorder(enabled=True, machine=lambda: CPU, counter=_Deferred,
                 policy=TimingPolicy(max_time_s=0.05, min_rounds=3, max_rounds=5, first_batch=3, min_warmup=1,
                                     quiet_warmup=1))
    n = 1 << 16
    src, dst = torch.ones(n), torch.empty(n)
    r.measure(dst.copy_, src)
    assert len(r.pending) == 1 and r.regions == []
    r.count_pending(AnalyticCounter(), "counted by the analytic counter")
    (region,) = r.regions
    assert region.counter == "analytic" and region.notes[-1] == "counted by the analytic counter"
    assert sum(sum(k.bytes.values()) for k in region.kernels) == 2 * 4 * n  # read src, write dst: fp32
