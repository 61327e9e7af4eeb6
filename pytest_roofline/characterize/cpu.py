"""CPU characterization: the ERT kernel when a C compiler is present, libraries alone otherwise."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_roofline.characterize import (
    arch,
    blas_probe,
    cache_samples,
    clean,
    cpu_ert,
    dram_samples,
    plateaus,
)
from pytest_roofline.characterize.build import BuildError, find_compiler
from pytest_roofline.characterize.cache_sizes import os_cache_sharing, os_cache_sizes
from pytest_roofline.characterize.fingerprint import count_field, isa_flags
from pytest_roofline.model import Machine

SMALLEST_PER_THREAD = 4 * 1024      # well inside any L1
MAIN_MEMORY_FACTOR = 8               # sweep up to 8x the last-level cache (DRAM's window starts at 4x) ...
MIN_LARGEST = 256 * 1024**2          # ... and never less than this
SIZES_PER_OCTAVE = 4
PEAK_FLOPS = 512                     # FLOPs per element where every width is compute bound
DISTURBED_SHARE = 0.2                # more disturbed sweep points than this: say the roofs may be low
# Of the GEMM budget, spent before the sweeps (the rest between their two passes). None: the first pass of
# every sweep, the FMA sweep and the first DRAM moments come first, then all the GEMMs (about 20 s with the
# first call of every candidate, most of it emulated bf16/fp16), then the second passes and a second look at
# the FMA peaks. At 0.5 the GEMMs' first calls came first and both passes fell in the last 5 s of the run: on
# the 2-vCPU Zen 3 VM, whose roofs switch between levels ~25 % apart for seconds to minutes (fp64 once at the
# 1-core value for a whole record), both passes then saw the same moment.
GEMM_FIRST_SHARE = 0.0


def characterize_cpu(fingerprint_fields: Mapping[str, object], progress: Callable[[str], None],
                     build_dir: Path | None = None, *, largest_bytes: int | None = None) -> Machine:
    start = time.perf_counter()
    threads = count_field(fingerprint_fields, "threads", 1)
    # The record's info while it is built: its nested tables are read back here (Machine.info is as loose).
    info: dict[str, Any] = {"threads": threads, "torch_threads": fingerprint_fields.get("torch_threads"),
                            "cache_sizes": fingerprint_fields.get("cache_sizes")}
    sources: dict[str, str] = {}
    bandwidth: dict[str, float] = {}
    peak_flops: dict[str, float] = {}

    # GEMM is probed between the sweeps' two passes (GEMM_FIRST_SHARE before them): the host's speed drifts over
    # seconds, so the passes, the DRAM moments and the GEMM calls spread over the whole run see more of it.
    ert_possible = find_compiler() is not None
    shares = blas_probe.ERT_GEMM_SECONDS if ert_possible else blas_probe.GEMM_SHARES
    gemm_budget = sum(shares.values()) if ert_possible else blas_probe.GEMM_BUDGET_S
    gemm_probe = blas_probe.GemmProbe(candidates=blas_probe.ERT_GEMM_CANDIDATES if ert_possible else None,
                                      shares=shares)
    gemm_seconds = _gemm_half(gemm_probe, GEMM_FIRST_SHARE * gemm_budget, progress) if GEMM_FIRST_SHARE else 0.0
    gemm_done = False

    compiled = False
    if not ert_possible:
        info["method"] = "blas-fallback"
        info["fallback_reason"] = "no C compiler found"
    else:
        def second_gemm_half() -> None:  # between the two sweep passes: spreads them over the whole run
            nonlocal gemm_seconds, gemm_done
            gemm_seconds += _gemm_half(gemm_probe, (1 - GEMM_FIRST_SHARE) * gemm_budget, progress)
            gemm_done = True

        try:
            _ert(fingerprint_fields, threads, progress, build_dir, largest_bytes, bandwidth, peak_flops, sources,
                 info, second_gemm_half)
            compiled = True
            # No native tuning flag accepted: generic code, recorded so a low roof has its explanation.
            info["method"] = "ert" if info["kernel"]["arch_flags"] else "ert-generic"
        except BuildError as error:
            info["method"] = "blas-fallback"
            info["fallback_reason"] = f"kernel build failed: {str(error)[-500:]}"
            progress(f"ERT kernel unavailable, falling back to numpy/BLAS: {str(error).splitlines()[0]}")
    if not compiled:
        caches = os_cache_sizes()
        triad = blas_probe.dram_triad(caches[max(caches)] if caches else 32 * 1024**2, progress)
        bandwidth["DRAM"] = triad.value
        sources["bandwidth.DRAM"] = triad.source

    if ert_possible and not compiled:  # the build failed: GEMM sets the fp64/fp32 roofs too, with the full budget
        gemm_probe.shares = blas_probe.GEMM_SHARES
        gemm_budget = blas_probe.GEMM_BUDGET_S - GEMM_FIRST_SHARE * gemm_budget
        gemm_seconds += _gemm_half(gemm_probe, gemm_budget, progress)
    elif not gemm_done:
        gemm_seconds += _gemm_half(gemm_probe, (1 - GEMM_FIRST_SHARE) * gemm_budget, progress)
    gemm = gemm_probe.roofs(progress)
    info.setdefault("phase_seconds", {})["GEMM"] = round(gemm_seconds, 3)
    info["gemm_flops"] = {precision: roof.value for precision, roof in gemm.items()}
    info["gemm"] = {precision: {"source": roof.source, **roof.detail} for precision, roof in gemm.items()}
    for precision, roof in gemm.items():
        if precision not in peak_flops:  # the FMA kernel is the vector-unit roof; GEMM fills in the rest
            peak_flops[precision] = roof.value
            sources[f"peak_flops.{precision}"] = roof.source
    info["sources"] = sources
    info["measure_seconds"] = time.perf_counter() - start
    name = f"{fingerprint_fields.get('cpu_model', 'cpu')} ({fingerprint_fields.get('core_count', '?')} cores)"
    return Machine(name=name, peak_flops=peak_flops, bandwidth=bandwidth, info=info)


def _gemm_half(probe: blas_probe.GemmProbe, budget_s: float, progress: Callable[[str], None]) -> float:
    progress(f"GEMM: {budget_s:.1f} s of numpy/torch calls, all precisions taking turns")
    start = time.perf_counter()
    probe.run(budget_s)
    return time.perf_counter() - start


def _ert(fields: Mapping[str, object], threads: int, progress: Callable[[str], None], build_dir: Path | None,
         largest_bytes: int | None, bandwidth: dict[str, float], peak_flops: dict[str, float],
         sources: dict[str, str], info: dict[str, Any], between: Callable[[], None] = lambda: None) -> None:
    isa = isa_flags(fields)
    arch_flags = _arch_flags(fields)
    widths = list(arch_flags.widths)
    widest = max(widths)
    capacities = plateaus.aggregate_capacities(os_cache_sizes(), os_cache_sharing(), threads)
    last_cache = capacities[max(capacities)] if capacities else 32 * 1024**2
    largest = largest_bytes or max(MAIN_MEMORY_FACTOR * last_cache, MIN_LARGEST)
    memory = count_field(fields, "memory_bytes")
    if memory:
        largest = min(largest, memory // 8)  # never crowd out the tests that run next

    phases: dict[str, float] = {}
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(now - clock, 3)
        clock = now

    progress("compiling the ERT kernel (cached after the first build)")
    chains = cpu_ert.chains_for(isa)
    library = cpu_ert.ErtLibrary.build(build_dir or _default_build_dir(), chains, threads,
                                       _round_up(largest, 3 * threads * chains * 64), widths, arch_flags.flags)
    phase("build and allocate")
    granularity = library.granularity_bytes()
    sizes = cpu_ert.working_set_sizes(SMALLEST_PER_THREAD * threads, library.max_bytes, SIZES_PER_OCTAVE,
                                      granularity)
    info["kernel"] = {"libraries": {str(w * 8): str(p) for w, p in library.paths.items()}, "chains": chains,
                      "vector_bits": [w * 8 for w in widths],
                      "threads": threads, "flops_per_element": list(cpu_ert.ERT_FLOPS),
                      "arch_flags": list(arch_flags.flags), "vector_source": arch_flags.vector_source,
                      "huge_pages": library.huge_pages}

    windows = plateaus.level_windows(capacities, sizes[0], sizes[-1])
    # What ran beside each level's part of a sweep pass, and beside each moment of DRAM samples (clean.py).
    guard = clean.PassGuard.for_cores()

    def segment_of(size: int) -> str:
        return next((level for level, (low, high) in windows.items() if low <= size <= high), "between")

    dram_size = dram_samples.sample_size(sizes, windows.get("DRAM"), last_cache, 6 * granularity)  # 3 and 2 arrays
    dram = (dram_samples.DramSampler(cpu_ert.KernelRates(library, widest), dram_size, guard=guard)
            if dram_size is not None else None)

    cache_sizes = cache_samples.sample_sizes(sizes, windows)
    rates = cpu_ert.KernelRates(library, widest)
    nearest = f"L{min(capacities)}" if capacities else None  # no write-allocate read there: a copy is not 3 words
    caches = cache_samples.CacheSampler(lambda size: cpu_ert.measure(
        library, "fp64", widest, 1, size, target_seconds=0.001, repeats=3), cache_sizes, guard=guard,
        copy=rates.copy_rate, copy_levels=tuple(level for level in cache_sizes if level != nearest),
        copy_source=rates.copy_source)

    def sample_dram() -> None:  # a few DRAM and cache samples at each of 8 moments spread over the whole run
        if dram is not None:
            dram.take()
        caches.take()

    progress(f"bandwidth sweep: {len(sizes)} working sets, {sizes[0] // 1024} KiB .. "
             f"{sizes[-1] / 2**20:.0f} MiB, {threads} threads, {widest * 8}-bit vectors")
    sample_dram()
    # Two passes of each bandwidth sweep, the FLOP sweep and half the GEMMs apart, each size's faster one kept: a
    # disturbance of the host lasting a second or so (seen here: every L1 triad point 25-45 % slow in one
    # characterization of ten, all of them "clean" by CPU time) then costs one pass, not the roof.
    update_pass = cpu_ert.bandwidth_sweep(library, sizes, widest, progress, guard=guard, segment_of=segment_of)
    checks = {"update sweep": library.check_fixed_point("fp64", library.max_bytes)}
    sample_dram()
    triad_pass = cpu_ert.triad_sweep(library, sizes, widest, progress, guard=guard, segment_of=segment_of)
    sample_dram()
    phase("update and triad sweeps, first pass")
    compute_size = max(granularity, (capacities.get(1, 32 * 1024) // 4) // granularity * granularity)
    progress(f"FLOP sweep at {compute_size // 1024} KiB: fp64/fp32 x {[w * 8 for w in widths]}-bit")
    flop_points: list[cpu_ert.SweepPoint] = []
    for precision in ("fp64", "fp32"):
        flop_points += cpu_ert.flops_sweep(library, precision, widest, compute_size, cpu_ert.ERT_FLOPS)
        for width in widths:
            if width != widest:
                flop_points += cpu_ert.flops_sweep(library, precision, width, compute_size, (PEAK_FLOPS,))
        checks[f"{precision} FLOP sweep"] = library.check_fixed_point(precision, compute_size)
        sample_dram()
    phase("FLOP sweep")
    between()  # seconds of GEMM: the second pass sees the host some time after the first
    phase("GEMM, between the passes")
    sample_dram()
    update_points = cpu_ert.faster_of(update_pass, cpu_ert.bandwidth_sweep(
        library, sizes, widest, progress, guard=guard, segment_of=segment_of))
    checks["update sweep, second pass"] = library.check_fixed_point("fp64", library.max_bytes)
    sample_dram()
    triad_points = cpu_ert.faster_of(triad_pass, cpu_ert.triad_sweep(
        library, sizes, widest, progress, guard=guard, segment_of=segment_of))
    sample_dram()
    phase("update and triad sweeps, second pass")
    # The FMA peaks looked at once more, the GEMMs after the first look: a moment in which the host shares our
    # cores' FMA units costs one look, not the roof (isa_peaks keeps the faster).
    for precision in ("fp64", "fp32"):
        flop_points += cpu_ert.flops_sweep(library, precision, widest, compute_size, (PEAK_FLOPS,))
    phase("FMA peaks, second look")

    update_plateaus = _plateaus([*update_points, *caches.points()], windows)
    triad_plateaus = plateaus.with_write_allocate(_plateaus(triad_points, windows))
    levels: dict[str, dict[str, object]] = {}
    for level in windows:
        candidates = [(p, kernel) for p, kernel in ((update_plateaus.get(level), "ert-update"),
                                                    (triad_plateaus.get(level), "ert-triad")) if p is not None]
        if not candidates:
            continue
        best, kernel = max(candidates, key=lambda c: c[0].bytes_per_s)
        extra: dict[str, object] = {}
        where = f"{best.first_bytes / 1024:.0f}-{best.last_bytes / 1024:.0f} KiB"
        sampled = dram.roof() if dram is not None and level == "DRAM" else None
        if sampled is not None and dram is not None:  # the median of samples spread over the run, not a plateau
            extra = {"samples": dram.to_info(), "sweep_plateau_bytes_per_s": best.bytes_per_s}
            where = (f"median of {len(dram.update)} samples at {dram.working_set_bytes / 2**20:.0f} MiB "
                     f"spread over the run")
            best = replace(best, bytes_per_s=sampled[0], first_bytes=dram.working_set_bytes,
                           last_bytes=dram.working_set_bytes)
            kernel = sampled[1]
        if dram is not None and level == "DRAM" and sampled is None:  # every pass left out: say so
            extra = {"samples": dram.to_info(), "sweep_plateau_bytes_per_s": best.bytes_per_s}
        if caches.to_info(level) is not None:
            extra = {"cache_samples": caches.to_info(level)}
        copied = caches.beats(level, best.bytes_per_s)
        if copied is not None:  # an independent kernel beat the roof: the roof is what is wrong
            progress(f"warning: {level}: {caches.copy_source} reached {copied / 1e9:.1f} GB/s, above the "
                     f"{kernel} roof {best.bytes_per_s / 1e9:.1f}: the roof is raised to it")
            extra["beaten"] = {"kernel": kernel, "bytes_per_s": best.bytes_per_s, "by": caches.copy_source}
            best = replace(best, bytes_per_s=copied)
            kernel = caches.copy_source or "copy"
        bandwidth[level] = best.bytes_per_s
        sources[f"bandwidth.{level}"] = kernel
        levels[level] = {"kernel": kernel, "window_bytes": list(best.window), "points": best.points,
                         "plateau_bytes": [best.first_bytes, best.last_bytes],
                         "update_bytes_per_s": update_plateaus[level].bytes_per_s if level in update_plateaus
                         else None,
                         "triad_bytes_per_s": triad_plateaus[level].bytes_per_s if level in triad_plateaus
                         else None, **extra}
        progress(f"{level:>4}: {best.bytes_per_s / 1e9:7.1f} GB/s ({kernel}, {where})")
    disturbed = sum(not p.clean for p in update_points) + sum(not p.clean for p in triad_points) + sum(
        not p.clean for p in flop_points)
    if disturbed:
        progress(f"warning: {disturbed} sweep points never got a call free of other work on this machine")
    if guard.reasons:
        progress(f"warning: other work ran beside {len(guard.reasons)} watched spans of the sweeps and DRAM "
                 f"samples ({guard.reasons[0]})")

    isa_peaks: dict[str, dict[str, float]] = {}
    for point in flop_points:
        by_width = isa_peaks.setdefault(point.precision, {})
        key = str(point.vector_bits)
        by_width[key] = max(by_width.get(key, 0.0), point.flop_rate)
    for precision, by_width in isa_peaks.items():
        bits, value = max(by_width.items(), key=lambda kv: kv[1])
        peak_flops[precision] = value
        sources[f"peak_flops.{precision}"] = f"ert-fma-{bits}bit"
        progress(f"{precision}: {value / 1e9:7.1f} GFLOP/s peak "
                 f"({', '.join(f'{b}-bit {v / 1e9:.1f}' for b, v in sorted(by_width.items()))})")

    info["levels"] = levels
    info["phase_seconds"] = phases
    info["disturbed_points"] = disturbed
    info["disturbed_spans"] = list(guard.reasons)
    info["watched_spans"] = guard.spans
    total_points = len(update_points) + len(triad_points) + len(flop_points)
    if disturbed > DISTURBED_SHARE * total_points:
        info["disturbed"] = f"{disturbed} of {total_points} sweep points had no undisturbed call"
    info["capacities"] = {f"L{k}": v for k, v in capacities.items()}
    info["isa_peaks"] = isa_peaks
    failed = [name for name, ok in checks.items() if not ok]
    # Every element must still hold exactly 1 after the update kernel: otherwise it skipped work.
    info["kernel_check"] = "ok" if not failed else f"values left the fixed point x = 1 in: {', '.join(failed)}"
    info["sweep"] = {"update": [p.to_row() for p in update_points], "triad": [p.to_row() for p in triad_points],
                     "flops": [p.to_row() for p in flop_points]}


def _plateaus(points: Sequence[cpu_ert.SweepPoint] | Sequence[cpu_ert.TriadPoint],
              windows: dict[str, tuple[float, float]]) -> dict[str, plateaus.Plateau]:
    """Each level's plateau from its undisturbed points when it has enough of them (clean.MIN_WINDOW_POINTS),
    else from all its points (the record is then not kept: clean.window_reasons)."""
    found: dict[str, plateaus.Plateau] = {}
    for level, (low, high) in windows.items():
        inside = [p for p in points if low <= p.working_set_bytes <= high]
        calm = [p for p in inside if cpu_ert.undisturbed(p)]
        use = calm if len(calm) >= clean.MIN_WINDOW_POINTS else inside
        found.update(plateaus.extract_plateaus([p.working_set_bytes for p in use], [p.bandwidth for p in use],
                                               {level: (low, high)}))
    return found


def _arch_flags(fields: Mapping[str, object]) -> arch.ArchFlags:
    """Tuning flags and vector widths for this CPU and compiler (see characterize/arch.py)."""
    from pytest_roofline.characterize.build import accepts_flag

    compiler = find_compiler() or "cc"
    return arch.select(str(fields.get("machine", "")), isa_flags(fields),
                       lambda flag: accepts_flag(compiler, flag), arch.sve_vector_bytes())


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _default_build_dir() -> Path:
    from pytest_roofline.characterize.ceiling_cache import default_cache_dir

    return default_cache_dir() / "build"
