"""The compiled CPU ERT kernel and the CPU characterization, on tiny sweeps (numbers are not asserted)."""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pytest_roofline.characterize import blas_probe, build, cpu, cpu_ert
from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.characterize.fingerprint import cpu_fingerprint
from pytest_roofline.model import Machine

needs_compiler = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")


@functools.cache
def _library(build_dir: str) -> cpu_ert.ErtLibrary:
    fields = cpu_fingerprint()
    widths = cpu_ert.vector_widths_for(fields["isa"], fields["machine"])
    return cpu_ert.ErtLibrary.build(Path(build_dir), chains=8, threads=2, max_bytes=3 * 2 * 8 * 64 * 64,
                                    widths=widths)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> cpu_ert.ErtLibrary:
    if build.find_compiler() is None:
        pytest.skip("no C compiler on this machine")
    return _library(str(tmp_path_factory.mktemp("ert-build")))


class _FakeGemm:
    """Stands in for blas_probe.GemmProbe; records the budgets it was run with."""

    budgets: ClassVar[list[float]] = []

    def __init__(self, *args: Any, candidates: Any = None, shares: dict[str, float] | None = None) -> None:
        _FakeGemm.budgets = []
        self.shares = shares

    def run(self, budget_s: float) -> None:
        _FakeGemm.budgets.append(budget_s)

    def roofs(self, progress: Any) -> dict[str, blas_probe.Roof]:
        return {precision: blas_probe.Roof(value, "fake-gemm", {"n": 64})
                for precision, value in {"fp64": 50e9, "fp32": 100e9, "bf16": 400e9, "fp16": 90e9}.items()}


# --- build -------------------------------------------------------------------------------------------------

@needs_compiler
def test_build_is_cached_by_source_compiler_and_flags(library: cpu_ert.ErtLibrary, tmp_path: Path) -> None:
    built = library.paths[16]
    defines: dict[str, str | int] = {"ERT_CHAINS": 8, "ERT_WIDTH": 16, "ERT_FULL_SWEEP": int(library.widths == [16])}
    again = build.build_shared_library(cpu_ert.KERNEL_SOURCE, defines, ("-march=native",), built.parent)
    assert again == built  # same inputs, same file: nothing recompiled
    other = build.build_shared_library(cpu_ert.KERNEL_SOURCE, {**defines, "ERT_CHAINS": 4}, (), tmp_path)
    assert other.name != built.name
    assert len(set(library.paths.values())) == len(library.paths)  # one library per vector width


def test_flags_keep_trials_as_separate_memory_passes() -> None:
    assert "-fno-loop-unroll-and-jam" in build.BASE_FLAGS  # gcc would otherwise fuse two trials into one pass
    assert "-fopenmp" in build.BASE_FLAGS  # the -march/-mcpu tuning flag comes from arch.select


def test_missing_compiler_is_a_build_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(build, "find_compiler", lambda: None)
    with pytest.raises(build.BuildError, match="no C compiler"):
        build.build_shared_libraries(cpu_ert.KERNEL_SOURCE, [{}], (), tmp_path)


# --- kernel ------------------------------------------------------------------------------------------------

@needs_compiler
@pytest.mark.parametrize("precision", ["fp64", "fp32"])
@pytest.mark.parametrize("flops", [1, 2, 7 + 1, 512])
def test_kernel_keeps_the_fixed_point(library: cpu_ert.ErtLibrary, precision: str, flops: int) -> None:
    size = library.granularity_bytes() * 2
    for width in library.widths:
        if flops not in library.flops_values(width):
            continue
        seconds, share = library.run(precision, width, flops, size, trials=3)
        assert seconds > 0 and 0 < share <= 1.5
        # x = 1 stays 1 exactly only if every multiply and FMA ran with the run-time constants.
        assert library.check_fixed_point(precision, size)


@needs_compiler
def test_triad_runs_and_rejects_bad_sizes(library: cpu_ert.ErtLibrary) -> None:
    size = 3 * library.granularity_bytes()
    seconds, _ = library.run_triad(16, size, trials=2)
    assert seconds > 0
    with pytest.raises(ValueError, match="triad working set"):
        library.run_triad(16, size + 8, trials=1)
    with pytest.raises(ValueError, match="not a multiple"):
        library.run("fp64", 16, 1, library.granularity_bytes() + 64, trials=1)


@needs_compiler
def test_scale_copies_one_array_into_the_other_and_rejects_bad_sizes(library: cpu_ert.ErtLibrary) -> None:
    size = 2 * library.granularity_bytes()
    library.fill("fp64")
    b, a = library.buffer[:size // 2].view("float64"), library.buffer[size // 2:size].view("float64")
    a[:] = 3.0  # the second array is the source
    seconds, share = library.run_scale(16, size, trials=1)
    assert seconds > 0 and 0 < share <= 1.5
    copied = b
    assert (copied == 3.0).all()  # b = 1 * a, element for element
    with pytest.raises(ValueError, match="scale working set"):
        library.run_scale(16, size + 8, trials=1)


def test_kernel_rates_are_single_clean_passes(library: cpu_ert.ErtLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    rates = cpu_ert.KernelRates(library, 16)
    size = 3 * library.granularity_bytes()
    monkeypatch.setattr(library, "run", lambda *args: (0.002, 1.0))  # (seconds, smallest CPU-time share)
    assert rates.update_rate(size) == pytest.approx(2 * size / 0.002)  # read + write of every element
    monkeypatch.setattr(library, "run", lambda *args: (0.002, 0.5))  # a thread ran half the time
    assert rates.update_rate(size) is None
    monkeypatch.undo()
    rate = rates.triad_rate(size)  # the real kernel: 3 words per element over the whole working set
    assert rate is None or rate > 0
    with pytest.raises(ValueError, match="triad working set"):
        rates.triad_rate(size + 8)
    half = size // 2
    library.buffer[:half].view("float64")[:] = 7.0
    assert rates.copy_rate(size) > 0  # the library's copy: the first half into the second
    assert (library.buffer[half:size].view("float64") == 7.0).all()
    assert rates.copy_source in ("torch-copy", "numpy-copy")
    library.fill("fp64")  # the buffer was overwritten from outside: the fill runs again
    assert library.check_fixed_point("fp64", size)


def test_sweep_point_counts_bytes_and_flops_by_hand() -> None:
    point = cpu_ert.SweepPoint("fp32", 512, 8, working_set_bytes=4096, trials=10, seconds=0.5)
    assert point.bytes_moved == 2 * 4096 * 10          # one read + one write per element and trial
    assert point.flops == 8 * (4096 / 4) * 10           # 1024 fp32 elements x 8 FLOPs x 10 trials
    assert point.bandwidth == 2 * 4096 * 10 / 0.5
    triad = cpu_ert.TriadPoint(512, working_set_bytes=3 * 4096, trials=4, seconds=0.25)
    assert triad.bandwidth == 3 * 4096 * 4 / 0.25


def test_best_time_discards_disturbed_calls() -> None:
    # Calibration (2 calls) takes 1 ms for 128 trials; target 1 ms keeps 128 trials. Then a disturbed fast
    # call (share 0.5) must lose to the clean ones.
    script = iter([(1e-3, 1.0), (1e-3, 1.0), (0.2e-3 * 5, 0.5), (1.2e-3, 1.0), (1.1e-3, 0.95), (1.3e-3, 1.0)])
    timing = cpu_ert.best_time(lambda trials: next(script), bytes_per_trial=8192, target_seconds=1e-3, repeats=3)
    assert (timing.trials, timing.seconds, timing.clean, timing.calls) == (128, 1.1e-3, 3, 4)


def test_best_time_falls_back_to_disturbed_calls_and_says_so() -> None:
    timing = cpu_ert.best_time(lambda trials: (2e-3, 0.4), bytes_per_trial=1 << 20, target_seconds=2e-3,
                               repeats=2, max_calls=5)
    assert timing.clean == 0 and timing.calls == 5 and timing.seconds == 2e-3


def test_working_set_sizes_by_hand() -> None:
    assert cpu_ert.working_set_sizes(1024, 16384, 1, 1024) == [1024, 2048, 4096, 8192, 16384]
    # Rounded to the granularity, never repeated, never below it.
    assert cpu_ert.working_set_sizes(100, 400, 4, 256) == [256, 512]


def test_vector_widths_and_chains() -> None:
    assert cpu_ert.vector_widths_for(["sse2", "avx", "avx2", "avx512f"], "x86_64") == [16, 32, 64]
    assert cpu_ert.vector_widths_for(["sse2", "avx2", "avx"], "x86_64") == [16, 32]
    assert cpu_ert.vector_widths_for(["asimd"], "aarch64") == [16]
    assert cpu_ert.chains_for(["avx512f"]) == 16 and cpu_ert.chains_for(["avx2"]) == 8


# --- whole characterization ---------------------------------------------------------------------------------

@needs_compiler
def test_characterize_cpu_with_a_tiny_sweep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(blas_probe, "GemmProbe", _FakeGemm)
    messages: list[str] = []
    fields = cpu_fingerprint()
    result = cpu.characterize_cpu(fields, messages.append, tmp_path, largest_bytes=6 * 2**20)
    info = result.info
    assert info["method"] == "ert"
    assert "L1" in result.bandwidth and all(v > 0 for v in result.bandwidth.values())
    assert set(result.peak_flops) == {"fp64", "fp32", "bf16", "fp16"}
    assert info["sources"]["peak_flops.fp64"].startswith("ert-fma-")
    assert info["sources"]["peak_flops.bf16"] == "fake-gemm"
    assert info["gemm_flops"]["fp64"] == 50e9
    assert info["gemm"]["bf16"] == {"source": "fake-gemm", "n": 64}
    # All the GEMM between the sweeps' two passes (the first pass comes first, so the two are ~20 s apart on a
    # real machine); fp64/fp32 come from the FMA sweep, so the short budget.
    assert len(_FakeGemm.budgets) == 1
    assert sum(_FakeGemm.budgets) == pytest.approx(sum(blas_probe.ERT_GEMM_SECONDS.values()))
    first_gemm = next(i for i, m in enumerate(messages) if m.startswith("GEMM"))
    sweeps = [i for i, m in enumerate(messages) if "sweep" in m]
    assert sweeps[0] < first_gemm < sweeps[-1]
    # The FMA peaks are looked at twice: PEAK_FLOPS rows of the widest vectors, before and after the GEMMs.
    widest = max(row["vector_bits"] for row in info["sweep"]["flops"])
    peak_rows = [row for row in info["sweep"]["flops"] if row["flops_per_element"] == cpu.PEAK_FLOPS
                 and row["vector_bits"] == widest and row["precision"] == "fp64"]
    assert len(peak_rows) == 2
    assert "FMA peaks, second look" in info["phase_seconds"]
    assert info["kernel_check"] == "ok"
    assert {row["flops_per_element"] for row in info["sweep"]["flops"]} >= set(cpu_ert.ERT_FLOPS)
    assert info["sweep"]["update"] and info["sweep"]["triad"]
    assert any("bandwidth sweep" in m for m in messages)


def test_without_a_compiler_it_falls_back_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "find_compiler", lambda: None)
    monkeypatch.setattr(blas_probe, "GemmProbe", _FakeGemm)
    monkeypatch.setattr(blas_probe, "dram_triad", lambda llc, progress: blas_probe.Roof(20e9, "numpy-add"))
    result = cpu.characterize_cpu({"threads": 2, "cpu_model": "x", "core_count": 2}, lambda m: None)
    assert sum(_FakeGemm.budgets) == pytest.approx(blas_probe.GEMM_BUDGET_S)
    assert result.info["method"] == "blas-fallback"
    assert result.info["fallback_reason"] == "no C compiler found"
    assert dict(result.bandwidth) == {"DRAM": 20e9}
    assert result.peak_flops["fp64"] == 50e9 and result.info["sources"]["peak_flops.fp64"] == "fake-gemm"


def test_a_failed_build_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Path:
        raise build.BuildError("cc: error: unrecognized option")

    monkeypatch.setattr(cpu, "find_compiler", lambda: "/usr/bin/cc")
    monkeypatch.setattr(cpu_ert, "build_shared_libraries", broken)
    monkeypatch.setattr(blas_probe, "GemmProbe", _FakeGemm)
    monkeypatch.setattr(blas_probe, "dram_triad", lambda llc, progress: blas_probe.Roof(20e9, "numpy-add"))
    result = cpu.characterize_cpu({"threads": 1, "isa": [], "machine": "x86_64"}, lambda m: None)
    assert result.info["method"] == "blas-fallback"
    assert "unrecognized option" in result.info["fallback_reason"]
    # GEMM now sets every roof: topped up to the whole budget after the short first half
    assert sum(_FakeGemm.budgets) == pytest.approx(blas_probe.GEMM_BUDGET_S)


# --- disturbed characterizations are reused only briefly ------------------------------------------------

def _disturbed(age_seconds: float) -> Machine:
    date = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=age_seconds)
    return Machine("m", {"fp64": 1e9}, {"DRAM": 1e9}, {"disturbed": "5 of 10", "date": date.isoformat()})


def test_disturbed_characterization_is_reused_only_by_its_own_test_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[int] = []

    def measure(kind: str, index: int, fields: dict[str, Any], digest: str, report: Any, cache_dir: Path) -> Machine:
        calls.append(1)
        return _disturbed(0)

    monkeypatch.setattr(machine_api, "fingerprint", lambda device="cpu": {"device": "cpu", "x": 1})
    monkeypatch.setattr(machine_api, "_measure", measure)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-1")
    with pytest.warns(machine_api.DisturbedCharacterizationWarning, match="not clean"):
        first = machine_api.characterize(cache_dir=tmp_path)
    assert len(calls) == machine_api.MAX_ATTEMPTS  # disturbed: measured once more, then kept flagged
    assert first.info["disturbed"] and len(first.info["attempts"]) == machine_api.MAX_ATTEMPTS
    messages: list[str] = []
    machine_api.characterize(cache_dir=tmp_path, progress=messages.append)  # another worker of the same run
    assert len(calls) == machine_api.MAX_ATTEMPTS
    assert any("not clean" in m for m in messages)  # reuse of a flagged record is said
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-2")  # the next session measures again
    with pytest.warns(machine_api.DisturbedCharacterizationWarning):
        machine_api.characterize(cache_dir=tmp_path)
    assert len(calls) == 2 * machine_api.MAX_ATTEMPTS
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID")
    assert not machine_api._still_usable(_disturbed(10), lambda m: None)  # no xdist: never reused


def test_a_cache_roof_that_the_library_copy_beats_is_raised_and_said(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """A roof bounds every call: a copy counted 3 words at 1 PB/s as timed (1.5 PB/s counted) beats any cache
    roof, so every level copied at (all but L1, where stores hit and a copy is not 3 words) takes its value."""
    monkeypatch.setattr(blas_probe, "GemmProbe", _FakeGemm)
    monkeypatch.setattr(cpu_ert.KernelRates, "copy_rate", lambda self, working_set_bytes: 1e15)
    messages: list[str] = []
    result = cpu.characterize_cpu(cpu_fingerprint(), messages.append, tmp_path, largest_bytes=6 * 2**20)
    levels = result.info["levels"]
    copied = [level for level, entry in levels.items() if "copy_source" in (entry.get("cache_samples") or {})]
    assert copied and "L1" not in copied
    for level in copied:
        entry = levels[level]
        assert result.bandwidth[level] == pytest.approx(1.5e15)
        assert result.info["sources"][f"bandwidth.{level}"] == entry["cache_samples"]["copy_source"]
        assert entry["beaten"]["kernel"].startswith("ert-") and entry["beaten"]["bytes_per_s"] < 1e14
        assert any(m.startswith(f"warning: {level}: ") and "the roof is raised to it" in m for m in messages)
    assert result.bandwidth["L1"] < 1e14


# --- the spot check with the real kernel library ---------------------------------------------------------------

@needs_compiler
def test_the_spot_check_refuses_roofs_far_below_this_machine_busy_or_quiet(
        library: cpu_ert.ErtLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    """Roofs of 0.05 GFLOP/s and 0.1 GB/s are far more than 10x below any CPU's vector units and caches, and stay
    more than ``clean.LOW_ROOF_FACTOR`` x below a probe slowed down by other work on a busy 2-core host: the
    assertion holds whatever this host's speed and load (the quiet comparison is not asserted)."""
    from pytest_roofline.characterize import ceiling_cache, clean, spot_check

    width = max(library.widths)
    size = 16 * library.granularity_bytes()
    rows = [{"working_set_bytes": size * k, "bytes_per_s": 1e8} for k in (1, 2, 4)]
    flops = [{"precision": p, "vector_bits": width * 8, "flops_per_element": cpu.PEAK_FLOPS,
              "working_set_bytes": size, "flop_per_s": 5e7} for p in ("fp64", "fp32")]
    info: dict[str, Any] = {
        "method": "ert", "threads": library.threads,
        "kernel": {"libraries": {str(width * 8): str(library.paths[width])}, "chains": library.chains},
        "levels": {"L1": {"kernel": "ert-update", "window_bytes": [size, 4 * size], "update_bytes_per_s": 1e8},
                   "DRAM": {"kernel": "ert-update", "window_bytes": [16 * size, 64 * size],
                            "samples": {"working_set_bytes": 16 * size, "update_bytes_per_s": 1e8,
                                        "update_samples": [1e8] * 16}}},
        "sweep": {"update": rows, "triad": [], "flops": flops},
        "isa_peaks": {"fp64": {str(width * 8): 5e7}, "fp32": {str(width * 8): 5e7}}}
    machine = Machine("far below", {"fp64": 5e7, "fp32": 5e7}, {"L1": 1e8, "DRAM": 1e8}, info)
    verdict = spot_check.run(dict(info), peak_flops=machine.peak_flops, bandwidth=machine.bandwidth)
    assert {reason.split(":")[0] for reason in verdict.low_roofs} == {"L1", "DRAM", "fp64", "fp32"}, verdict
    # Through the loader's check: refused on its first try, with the warning a refused record gets.
    monkeypatch.setattr(clean.PassGuard, "for_cores", classmethod(
        lambda cls, cores=None: cls(lambda: None, [])))  # as if the load watch saw nothing either way
    messages: list[str] = []
    with pytest.warns(ceiling_cache.CacheWarning, match="far below what this machine does now"):
        assert machine_api._spot_check_holds(machine, messages.append) is False
    assert len(messages) == 1 and "measuring again" in messages[0]
