"""The GEMM probe's schedule with a fake clock (no timed assertions), and one tiny real run."""

from __future__ import annotations

import itertools

import pytest

from pytest_roofline.characterize import blas_probe


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[str] = []

    def __call__(self) -> float:
        return self.now


def _fake_candidate(clock: FakeClock, precision: str, backend: str, n: int,
                    seconds: list[float]) -> blas_probe._Candidate:
    """A candidate whose calls take ``seconds[i]`` of fake time (the last entry repeats)."""
    calls = [0]

    def run() -> None:
        clock.now += seconds[min(calls[0], len(seconds) - 1)]
        clock.log.append(f"{precision} {backend} {n}")
        calls[0] += 1

    return blas_probe._Candidate(precision, backend, n, run)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(blas_probe, "_clock", fake)
    return fake


def _use(monkeypatch: pytest.MonkeyPatch, table: dict[str, list[blas_probe._Candidate]],
         scouts: dict[str, blas_probe._Candidate] | None = None) -> None:
    monkeypatch.setattr(blas_probe, "_candidates", lambda precision, specs: table[precision])
    monkeypatch.setattr(blas_probe, "_scout", lambda precision: (scouts or {}).get(precision))


def test_the_roof_is_the_fastest_call_of_any_candidate(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    flops = 2.0 * 100**3
    # A slow first call (JIT), then one fast call among slow ones: the fastest call is the roof.
    a = _fake_candidate(clock, "fp64", "torch", 100, [1.0, flops / 2e9, flops / 5e9, flops / 2e9])
    b = _fake_candidate(clock, "fp64", "torch", 200, [8 * flops / 3e9])
    _use(monkeypatch, {"fp64": [a, b]})
    roofs = blas_probe.gemm_roofs(lambda m: None, ("fp64",), budget_s=3.0)
    roof = roofs["fp64"]
    assert roof.value == pytest.approx(5e9)
    assert roof.source == "torch-gemm" and roof.detail["n"] == 100
    assert roof.detail["candidates"] == {"torch n=100": pytest.approx(5e9), "torch n=200": pytest.approx(3e9)}
    assert roof.detail["calls"] == a.calls + b.calls


def test_precisions_take_turns_by_share_and_sizes_share_time(clock: FakeClock,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fp64 = [_fake_candidate(clock, "fp64", "torch", 2048, [0.2]), _fake_candidate(clock, "fp64", "torch", 3072, [0.6])]
    bf16 = [_fake_candidate(clock, "bf16", "torch", 1280, [0.002]),
            _fake_candidate(clock, "bf16", "torch", 768, [0.001])]
    _use(monkeypatch, {"fp64": fp64, "bf16": bf16})
    monkeypatch.setattr(blas_probe, "GEMM_SHARES", {"fp64": 2.0, "bf16": 1.0})
    blas_probe.gemm_roofs(lambda m: None, ("fp64", "bf16"), budget_s=12.0)
    fp64_time = sum(c.seconds for c in fp64)
    bf16_time = sum(c.seconds for c in bf16)
    assert fp64_time + bf16_time == pytest.approx(12.0, abs=1.0)
    assert fp64_time / bf16_time == pytest.approx(2.0, rel=0.2)
    # Every size of a precision gets about the same time, however long its calls are.
    assert fp64[0].seconds == pytest.approx(fp64[1].seconds, rel=0.25)
    assert bf16[0].seconds == pytest.approx(bf16[1].seconds, rel=0.25)
    # The cheap precision's calls are spread over the whole phase: bf16 runs between most pairs of fp64 calls.
    order = [entry.split()[0] for entry in clock.log]
    fp64_positions = [i for i, p in enumerate(order) if p == "fp64"]
    gaps_with_bf16 = sum("bf16" in order[i + 1:j] for i, j in itertools.pairwise(fp64_positions))
    assert gaps_with_bf16 >= 0.8 * (len(fp64_positions) - 1)


def test_a_library_clearly_behind_is_dropped_but_no_size_is(clock: FakeClock,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    torch_big = _fake_candidate(clock, "fp32", "torch", 64, [0.01])
    torch_small = _fake_candidate(clock, "fp32", "torch", 64, [0.025])  # a size far behind: kept
    numpy = _fake_candidate(clock, "fp32", "numpy", 64, [0.0125])  # a library 20 % behind: dropped
    _use(monkeypatch, {"fp32": [torch_big, torch_small, numpy]})
    blas_probe.gemm_roofs(lambda m: None, ("fp32",), budget_s=1.0)
    assert numpy.calls <= blas_probe.LIBRARY_CALLS + 2  # the first turn can hold several cheap calls
    assert torch_small.seconds == pytest.approx(torch_big.seconds, rel=0.25)


def test_runs_add_up_and_keep_the_shares(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    fp64 = [_fake_candidate(clock, "fp64", "torch", 2048, [0.2])]
    fp16 = [_fake_candidate(clock, "fp16", "torch", 512, [0.01])]
    _use(monkeypatch, {"fp64": fp64, "fp16": fp16})
    monkeypatch.setattr(blas_probe, "GEMM_SHARES", {"fp64": 3.0, "fp16": 1.0})
    probe = blas_probe.GemmProbe(("fp64", "fp16"))
    probe.run(2.0)
    first = fp64[0].calls + fp16[0].calls
    assert clock.now == pytest.approx(2.0, abs=0.25)
    probe.run(2.0)  # no new candidates: the second run goes on where the first stopped
    assert clock.now == pytest.approx(4.0, abs=0.25) and fp64[0].calls + fp16[0].calls > first
    assert fp64[0].seconds / fp16[0].seconds == pytest.approx(3.0, rel=0.15)
    assert set(probe.roofs(lambda m: None)) == {"fp64", "fp16"}


def test_a_dtype_without_a_kernel_is_skipped(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'')

    good = _fake_candidate(clock, "fp32", "torch", 64, [0.01])
    _use(monkeypatch, {"fp16": [blas_probe._Candidate("fp16", "torch", 64, broken)], "fp32": [good]})
    roofs = blas_probe.gemm_roofs(lambda m: None, ("fp16", "fp32"), budget_s=0.1)
    assert set(roofs) == {"fp32"}


def test_tiny_real_gemms_give_every_precision() -> None:
    pytest.importorskip("torch")
    messages: list[str] = []
    small = {"fp64": (("torch", 64), ("numpy", 64)), "fp32": (("torch", 64), ("numpy", 64)),
             "bf16": (("torch", 64),), "fp16": (("torch", 64),)}
    roofs = blas_probe.gemm_roofs(messages.append, budget_s=0.05, candidates=small)
    assert set(roofs) == {"fp64", "fp32", "bf16", "fp16"}
    assert all(roof.value > 0 and roof.detail["calls"] >= 1 for roof in roofs.values())
    assert set(roofs["fp64"].detail["candidates"]) == {"torch n=64", "numpy n=64"}
    assert len(messages) == 4 and all("GFLOP/s" in m for m in messages)
    single = blas_probe.gemm("fp32", lambda m: None, sizes=(32, 48), budget_s=0.02)
    assert single is not None and single.detail["n"] in (32, 48)


def test_the_candidates_cover_every_precision_with_a_known_backend() -> None:
    assert set(blas_probe.GEMM_CANDIDATES) == set(blas_probe.GEMM_PRECISIONS) == set(blas_probe.GEMM_SHARES)
    for specs in blas_probe.GEMM_CANDIDATES.values():
        assert specs and all(backend in ("torch", "numpy") and n >= 256 for backend, n in specs)


def test_a_size_whose_one_call_would_outlast_its_share_is_not_tried(clock: FakeClock,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # An emulated bf16 at 1 GFLOP/s: 2 x 768^3 = 0.906 GFLOP takes 0.906 s a call, 1536^3 would take 7.25 s.
    slow = [_fake_candidate(clock, "bf16", "torch", n, [2.0 * n**3 / 1e9]) for n in (1536, 768, 1280)]
    fast = [_fake_candidate(clock, "fp16", "torch", n, [2.0 * n**3 / 1e12]) for n in (1024, 512)]
    _use(monkeypatch, {"bf16": slow, "fp16": fast})
    monkeypatch.setattr(blas_probe, "GEMM_SHARES", {"bf16": 1.5, "fp16": 0.5})
    probe = blas_probe.GemmProbe(("bf16", "fp16"))
    probe.run(2.0)  # bf16: 1.5 s, at most 0.375 s a call
    big, small, middle = slow
    assert (big.calls, middle.calls) == (0, 0) and small.calls >= 1
    # Predicted from the 1 GFLOP/s the 768 reached: 2 x 1536^3 / 1e9 and 2 x 1280^3 / 1e9 seconds.
    assert probe.skipped["bf16"] == {"torch n=1536": pytest.approx(7.2478, rel=1e-4),
                                     "torch n=1280": pytest.approx(4.1943, rel=1e-4)}
    assert all(c.calls >= 1 for c in fast) and "fp16" not in probe.skipped  # 1 TFLOP/s: every size is short
    roof = probe.roofs(lambda m: None)["bf16"]
    assert roof.value == pytest.approx(1e9) and roof.detail["n"] == 768
    assert set(roof.detail["skipped_s"]) == {"torch n=1536", "torch n=1280"}


def test_the_scout_judges_the_first_size_and_a_long_call_is_judged_by_a_second(
        clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scout's first call is mostly JIT (0.2 s for 2 x 256^3 = 33.6 MFLOP), its second runs at 1 TFLOP/s.
    scout = _fake_candidate(clock, "bf16", "torch", 256, [0.2, 2.0 * 256**3 / 1e12])
    sizes = [_fake_candidate(clock, "bf16", "torch", n, [2.0 * n**3 / 1e12]) for n in (768, 1536)]
    _use(monkeypatch, {"bf16": sizes}, {"bf16": scout})
    monkeypatch.setattr(blas_probe, "GEMM_SHARES", {"bf16": 1.0})
    probe = blas_probe.GemmProbe(("bf16",))
    probe.run(0.1)  # at most 0.025 s a call: the first call's 0.17 GFLOP/s would put 768^3 at 5.4 s
    assert scout.calls >= 2 and all(c.calls >= 1 for c in sizes) and not probe.skipped
    assert probe.pools == {"bf16": sizes}  # the scout set no roof: its time counts, its rate does not
    assert probe.spent["bf16"] == pytest.approx(sum(c.seconds for c in [scout, *sizes]))


def test_an_emulated_precision_is_retired_after_its_first_turns(clock: FakeClock,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fp32 = [_fake_candidate(clock, "fp32", "torch", 1024, [2.0 * 1024**3 / 100e9])]  # 100 GFLOP/s
    scout = _fake_candidate(clock, "bf16", "torch", 256, [2.0 * 256**3 / 1e9])  # 1 GFLOP/s: 33.6 ms a call
    bf16 = [_fake_candidate(clock, "bf16", "torch", 768, [2.0 * 768**3 / 1e9])]  # would take 0.906 s a call
    _use(monkeypatch, {"fp32": fp32, "bf16": bf16}, {"bf16": scout})
    monkeypatch.setattr(blas_probe, "GEMM_SHARES", {"fp32": 1.0, "bf16": 1.5})
    probe = blas_probe.GemmProbe(("fp32", "bf16"))
    probe.run(2.5)  # bf16: 1.5 s, at most 0.375 s a call
    assert bf16[0].calls == 0 and probe.retired == {"bf16"}
    assert scout.calls == 2  # one turn (a 33.6 ms call, then a second within the 40 ms burst)
    # fp32 got its own 1 s; bf16's unspent share was not spent on anything.
    assert sum(c.seconds for c in fp32) == pytest.approx(1.0, abs=0.05)  # a turn may overshoot by a burst
    assert clock.now == pytest.approx(sum(c.seconds for c in fp32) + scout.seconds)
    roof = probe.roofs(lambda m: None)["bf16"]
    assert roof.value == pytest.approx(1e9) and roof.detail["n"] == 256 and "retired" in roof.detail
