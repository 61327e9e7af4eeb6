"""How close are the characterized roofs to what independent simple kernels reach, in the same run?

    python benchmarks/characterization_fidelity.py [--rounds 3] [--wait-quiet 120] [--likwid | --spread]

Runs a fresh CPU characterization (``pytest_roofline.characterize.machine.characterize``), then measures reference
numbers with code that shares nothing with the characterization kernels:

- bandwidth: a plain C triad loop ``a[i] = b[i] + s*c[i]`` (OpenMP, auto-vectorized by the compiler), at
  several working-set sizes inside each level's window; reference = median of the three fastest sizes;
- compute: a register-only loop of independent FMA accumulators (no memory traffic) per vector width and
  accumulator count; reference = the best;
- GEMM: the best of numpy.matmul and torch.mm over sizes 512 .. 3072 (4096 for bf16) per precision.

With ``--likwid`` (where ``likwid-bench`` is installed: ``apt-get install likwid``) the references are
likwid-bench's assembly kernels instead, per memory level and thread count (1 and all cores; ``--cores``):
its ``update`` kernel (1 load + 1 store per element, as ERT's update) against the record's update plateau, and
its ``stream`` triad (counted by likwid as 3 words, so x 4/3 beyond L1 for the write-allocate read the
record counts) against the record's triad plateau, each at the middle of the level's window, the best of
``--likwid-repeats`` runs. The kernel variant follows the CPU's flags (``_avx512``, ``_avx``/``_avx_fma``,
``_sse``), never assumed. A 1-core record is ``characterize(cores=1)``; each thread count is characterized
fresh in a scratch cache just before its likwid runs.

It prints roof / reference per ceiling and round, and the median over rounds (target >= 0.95). A ratio
above 1 means the roof is higher than the simple reference (the in-place update kernel beats the triad
from L1, L3 and DRAM on this machine). The host is shared and noisy, so every round repeats both the
characterization and the references, and calls where this process did not get all its CPUs are dropped.

With ``--spread`` there is no reference: ``--rounds`` fresh processes each characterize cold (``python -m
pytest_roofline characterize --recharacterize``, as a CI job on a fresh runner does; the compiled kernels are
shared through one cache, ``$ROOF_BENCH_CACHE`` when set), and it prints every roof's median, range, CV and
max ÷ min over them, and the time each took (the first round also compiles the kernels, and says so).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cv, wait_for_quiet

from pytest_roofline.characterize.machine import characterize
from pytest_roofline.model import Machine

REFERENCE_SOURCE = r"""
#include <omp.h>
#define BARRIER() __asm__ __volatile__("" ::: "memory")

double triad(double *restrict a, const double *restrict b, const double *restrict c, long n, long trials,
             int threads) {
  double start = 0, stop = 0;
  #pragma omp parallel num_threads(threads)
  {
    #pragma omp barrier
    #pragma omp master
    start = omp_get_wtime();
    for (long t = 0; t < trials; ++t) {
      #pragma omp for schedule(static) nowait
      for (long i = 0; i < n; ++i) a[i] = b[i] + 0.5 * c[i];
      BARRIER();
    }
    #pragma omp barrier
    #pragma omp master
    stop = omp_get_wtime();
  }
  return stop - start;
}

/* Register-only FMA throughput: ACC independent accumulators of W bytes, no loads or stores. */
#define PEAK(T, NAME, W, ACC)                                                             \
  double NAME(long iterations, int threads) {                                             \
    typedef T V __attribute__((vector_size(W)));                                          \
    double start = 0, stop = 0, sink = 0;                                                 \
    _Pragma("omp parallel num_threads(threads) reduction(+:sink)")                        \
    {                                                                                     \
      volatile T seed = (T)1e-3;                                                          \
      V acc[ACC], mul = (V){0} + (T)0.999999, add = (V){0} + seed;                        \
      for (int k = 0; k < ACC; ++k) acc[k] = (V){0} + (T)k;                               \
      _Pragma("omp barrier")                                                              \
      _Pragma("omp master") start = omp_get_wtime();                                      \
      for (long i = 0; i < iterations; ++i)                                               \
        for (int k = 0; k < ACC; ++k) acc[k] = acc[k] * mul + add;                        \
      _Pragma("omp barrier")                                                              \
      _Pragma("omp master") stop = omp_get_wtime();                                       \
      for (int k = 0; k < ACC; ++k) for (unsigned l = 0; l < W / sizeof(T); ++l) sink += acc[k][l]; \
    }                                                                                     \
    return sink == 12345.678 ? -1.0 : stop - start;                                       \
  }
PEAK(double, peak_fp64_256_12, 32, 12)
PEAK(double, peak_fp64_512_12, 64, 12)
PEAK(double, peak_fp64_512_24, 64, 24)
PEAK(float, peak_fp32_256_12, 32, 12)
PEAK(float, peak_fp32_512_12, 64, 12)
PEAK(float, peak_fp32_512_24, 64, 24)
"""
PEAK_KERNELS = {"fp64": ["peak_fp64_256_12", "peak_fp64_512_12", "peak_fp64_512_24"],
                "fp32": ["peak_fp32_256_12", "peak_fp32_512_12", "peak_fp32_512_24"]}
PEAK_LANES = {"peak_fp64_256_12": 4 * 12, "peak_fp64_512_12": 8 * 12, "peak_fp64_512_24": 8 * 24,
              "peak_fp32_256_12": 8 * 12, "peak_fp32_512_12": 16 * 12, "peak_fp32_512_24": 16 * 24}


# Half-octave steps between 1024 and 2048: oneDNN's AMX bf16 GEMM peaks there (n = 1280 runs ~1.7x faster than
# 2048 and 2x faster than 1024 on the Sapphire Rapids VM), and a power-of-two grid never saw that peak.
GEMM_REFERENCE_SIZES = (512, 768, 1024, 1280, 1536, 2048, 3072)


def build_reference(directory: Path) -> ctypes.CDLL:
    source = directory / "reference.c"
    source.write_text(REFERENCE_SOURCE)
    library = directory / "reference.so"
    subprocess.run(["cc", "-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fPIC", "-shared",
                    "-ffp-contract=fast", "-fno-loop-unroll-and-jam", str(source), "-o", str(library)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.triad.restype = ctypes.c_double
    lib.triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_long, ctypes.c_int]
    for names in PEAK_KERNELS.values():
        for name in names:
            getattr(lib, name).restype = ctypes.c_double
            getattr(lib, name).argtypes = [ctypes.c_long, ctypes.c_int]
    return lib


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def best_of(run: Any, work: float, threads: int, target_s: float = 0.003, repeats: int = 5,
            max_calls: int = 25) -> float:
    """Best rate (work per second) of ``repeats`` calls of about ``target_s`` each; run(k) -> seconds.

    A call counts only if this process got CPU time on all ``threads`` for the whole call (getrusage):
    the host is shared, and a call that waited for a CPU measures the other work, not the hardware.
    """
    k = 1
    while True:
        seconds = run(k)
        if seconds >= target_s / 4 or k > 1 << 30:
            break
        k *= 4
    k = max(1, math.ceil(k * target_s / max(seconds, 1e-9)))
    clean: list[float] = []
    dirty: list[float] = []
    while len(clean) < repeats and len(clean) + len(dirty) < max_calls:
        cpu_before, wall_before = cpu_seconds(), time.perf_counter()
        seconds = run(k)
        wall = time.perf_counter() - wall_before
        used = cpu_seconds() - cpu_before
        (clean if used >= 0.9 * threads * wall else dirty).append(work * k / seconds)
    return max(clean or dirty)


def reference_bandwidth(lib: ctypes.CDLL, threads: int, windows: dict[str, tuple[float, float]],
                        max_bytes: int) -> dict[str, list[tuple[int, float]]]:
    raw = np.ones(max_bytes // 8 + 64)
    base = raw[(-raw.ctypes.data % 64) // 8:]
    found: dict[str, list[tuple[int, float]]] = {}
    for level, (low, high) in windows.items():
        sizes = np.geomspace(low, min(high, max_bytes), 6)
        points = []
        for size in sizes:
            n = int(size // 24) // 64 * 64
            a, b, c = base[:n], base[n:2 * n], base[2 * n:3 * n]
            rate = best_of(lambda k, a=a, b=b, c=c, n=n: lib.triad(a.ctypes.data, b.ctypes.data, c.ctypes.data,
                                                                   n, k, threads), 24.0 * n, threads)
            points.append((24 * n, rate))
        found[level] = points
    return found


def reference_peaks(lib: ctypes.CDLL, threads: int) -> dict[str, tuple[float, str]]:
    best: dict[str, tuple[float, str]] = {}
    for precision, names in PEAK_KERNELS.items():
        for name in names:
            function = getattr(lib, name)
            flops = 2.0 * PEAK_LANES[name] * threads
            rate = best_of(lambda k, f=function: f(k, threads), flops, threads)
            if rate > best.get(precision, (0.0, ""))[0]:
                best[precision] = (rate, name)
    return best


def reference_gemm(threads: int) -> dict[str, tuple[float, str]]:
    best: dict[str, tuple[float, str]] = {}

    def consider(precision: str, rate: float, label: str) -> None:
        if rate > best.get(precision, (0.0, ""))[0]:
            best[precision] = (rate, label)

    def timed(run: Any) -> Any:
        def call(k: int) -> float:
            start = time.perf_counter()
            for _ in range(k):
                run()
            return time.perf_counter() - start
        return call

    for n in GEMM_REFERENCE_SIZES:
        for dtype, precision in ((np.float64, "fp64"), (np.float32, "fp32")):
            a = np.random.default_rng(1).random((n, n)).astype(dtype)
            out = np.empty_like(a)
            rate = best_of(timed(lambda a=a, out=out: np.matmul(a, a, out=out)), 2.0 * n**3, threads,
                           target_s=0.0, repeats=3, max_calls=8)
            consider(precision, rate, f"numpy n={n}")
    try:
        import torch
    except ImportError:
        return best
    for n in GEMM_REFERENCE_SIZES + (4096,):
        for dtype, precision in ((torch.float64, "fp64"), (torch.float32, "fp32"), (torch.bfloat16, "bf16"),
                                 (torch.float16, "fp16")):
            if n == 4096 and precision != "bf16":
                continue  # only AMX bf16 is fast enough for 4096 to be cheap
            t = torch.randn(n, n).to(dtype)
            out_t = torch.empty_like(t)
            torch.mm(t, t, out=out_t)
            rate = best_of(timed(lambda t=t, out_t=out_t: torch.mm(t, t, out=out_t)), 2.0 * n**3, threads,
                           target_s=0.0, repeats=3, max_calls=8)
            consider(precision, rate, f"torch n={n}")
    return best


def one_round(lib: ctypes.CDLL, cache_dir: Path) -> tuple[Machine, float, list[tuple[str, float, float, str, str]]]:
    """A fresh characterization, then the references; (machine, seconds, rows of name/roof/ref/source/how)."""
    start = time.perf_counter()
    machine: Machine = characterize("cpu", fresh=True, cache_dir=cache_dir,
                                    progress=lambda m: print(f"[characterize] {m}", file=sys.stderr))
    seconds = time.perf_counter() - start
    info = machine.info
    threads = int(info.get("threads") or 1)
    windows = {level: tuple(entry["window_bytes"]) for level, entry in info.get("levels", {}).items()}
    largest = int(max((hi for _, hi in windows.values()), default=64 * 2**20))
    sources = info.get("sources", {})
    rows: list[tuple[str, float, float, str, str]] = []
    for level, points in reference_bandwidth(lib, threads, windows, largest).items():
        reference = statistics.median(sorted((rate for _, rate in points), reverse=True)[:3])
        rows.append((f"bandwidth {level}", machine.bandwidth[level], reference,
                     sources.get(f"bandwidth.{level}", "?"), "plain triad, median of 3 fastest sizes"))
    for precision, (reference, name) in reference_peaks(lib, threads).items():
        rows.append((f"peak {precision}", machine.peak_flops[precision], reference,
                     sources.get(f"peak_flops.{precision}", "?"), f"register FMA ({name})"))
    for precision, (reference, label) in reference_gemm(threads).items():
        roof = info.get("gemm_flops", {}).get(precision)
        if roof:
            rows.append((f"GEMM {precision}", roof, reference, "characterization GEMM", f"best BLAS ({label})"))
    return machine, seconds, rows


# --- likwid-bench ---------------------------------------------------------------------------------------------

def likwid_kernels() -> dict[str, str] | None:
    """likwid-bench's update and stream kernels for this CPU's widest vectors; None without likwid-bench."""
    import shutil

    if shutil.which("likwid-bench") is None:
        return None
    listed = subprocess.run(["likwid-bench", "-a"], capture_output=True, text=True, check=False).stdout
    names = {line.split(" - ", 1)[0].strip() for line in listed.splitlines() if " - " in line}
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    suffixes = (["_avx512"] if "avx512f" in flags else []) + (["_avx"] if "avx" in flags else []) + ["_sse", ""]
    chosen: dict[str, str] = {}
    for kernel, variants in (("update", ("{s}",)), ("stream", ("{s}_fma", "{s}"))):
        for suffix in suffixes:
            found = next((kernel + v.format(s=suffix) for v in variants if kernel + v.format(s=suffix) in names), None)
            if found is not None:
                chosen[kernel] = found
                break
    return chosen if len(chosen) == 2 else None


def likwid_rate(kernel: str, size_bytes: int, threads: int, repeats: int) -> float | None:
    """Best MByte/s of ``repeats`` runs of ``likwid-bench -t kernel -w N:size:threads``, in bytes/s."""
    best = None
    for _ in range(repeats):
        result = subprocess.run(["likwid-bench", "-t", kernel, "-w", f"N:{max(1, size_bytes // 1024)}kB:{threads}"],
                                capture_output=True, text=True, check=False)
        for line in result.stdout.splitlines():
            if line.startswith("MByte/s:"):
                rate = float(line.split()[1]) * 1e6
                best = rate if best is None else max(best, rate)
    return best


def likwid_round(kernels: dict[str, str], threads: int, machine_cores: int, cache_dir: Path,
                 repeats: int) -> list[tuple[str, float, float, str]]:
    """A fresh record for ``threads`` cores, then likwid-bench per level; rows of (name, roof, likwid, how)."""
    cores = None if threads == machine_cores else threads
    machine = characterize("cpu", fresh=True, cache_dir=cache_dir, cores=cores,
                           progress=lambda m: print(f"[characterize] {m}", file=sys.stderr))
    if machine.info.get("not_kept"):
        print(f"[likwid] note: the {threads}-thread record was not kept ({machine.info['not_kept']})",
              file=sys.stderr)
    rows = []
    for level, entry in (machine.info.get("levels") or {}).items():
        low, high = entry["window_bytes"]
        size = int(math.sqrt(low * high)) if level != "DRAM" else int((entry.get("samples") or {}).get(
            "working_set_bytes") or math.sqrt(low * high))
        for kernel, key, factor in (("update", "update_bytes_per_s", 1.0),
                                    ("stream", "triad_bytes_per_s", 1.0 if level == "L1" else 4 / 3)):
            roof = entry.get(key)
            if level == "DRAM":
                roof = (entry.get("samples") or {}).get(key) or roof
            rate = likwid_rate(kernels[kernel], size, threads, repeats)
            if roof and rate:
                rows.append((f"{level} {kernel} {threads}t", float(roof), rate * factor,
                             f"{kernels[kernel]} at {size / 2**20:.2f} MiB"))
    return rows


def likwid_main(args: argparse.Namespace) -> int:
    kernels = likwid_kernels()
    if kernels is None:
        print("likwid-bench not installed (apt-get install likwid) or its update/stream kernels missing",
              file=sys.stderr)
        return 2
    machine_cores = len(os.sched_getaffinity(0))
    counts = [int(c) for c in args.cores.split(",")] if args.cores else sorted({1, machine_cores})
    print(wait_for_quiet(args.wait_quiet), file=sys.stderr)
    rounds: list[list[tuple[str, float, float, str]]] = []
    with tempfile.TemporaryDirectory(prefix="roofline-likwid-") as scratch:
        for _ in range(args.rounds):
            rows: list[tuple[str, float, float, str]] = []
            for threads in counts:
                rows += likwid_round(kernels, threads, machine_cores, Path(scratch) / "cache", args.likwid_repeats)
            rounds.append(rows)
    print(f"\nlikwid-bench kernels: {kernels}; CPU: {cpu_name()}; threads {counts}")
    # CVs over rounds: the roof's beside likwid-bench's own, measured minutes apart in the same rounds; where
    # they match, the roofs move with the host, and the ratio's CV is what the method adds
    print(f"{'level kernel threads':<22} {'roof GB/s':>9} {'likwid GB/s':>11}  {'ratio per round':<22} {'median':>6}  "
          f"{'CV % roof':>9} {'likwid':>6} {'ratio':>6}  likwid kernel, working set")
    for index, (name, *_rest) in enumerate(rounds[0]):
        per_round = [r[index] for r in rounds if len(r) > index and r[index][0] == name]
        ratios = [roof / ref for _, roof, ref, _ in per_round]
        spreads = [100 * cv(v) if len(v) > 1 else math.nan
                   for v in ([r[1] for r in per_round], [r[2] for r in per_round], ratios)]
        print(f"{name:<22} {statistics.median(r[1] for r in per_round) / 1e9:>9.1f} "
              f"{statistics.median(r[2] for r in per_round) / 1e9:>11.1f}  {' '.join(f'{x:.3f}' for x in ratios):<22} "
              f"{statistics.median(ratios):>6.3f}  {spreads[0]:>9.1f} {spreads[1]:>6.1f} {spreads[2]:>6.1f}  "
              f"{per_round[0][3]}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def spread_main(args: argparse.Namespace) -> int:
    """Every roof's median, range and CV over cold characterizations, each in a fresh process, and their times."""
    series: dict[str, list[float]] = {}
    times: list[float] = []
    print(wait_for_quiet(args.wait_quiet), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="roofline-spread-") as scratch:
        cache = Path(os.environ.get("ROOF_BENCH_CACHE", scratch))  # shared: the kernels compile once
        for index in range(args.rounds):
            command = [sys.executable, "-m", "pytest_roofline", "characterize", "--recharacterize", "--json",
                       "--quiet", "--cache-dir", str(cache)]
            if args.cores:
                command += ["--cores", args.cores]
            began = time.perf_counter()
            output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
            times.append(time.perf_counter() - began)
            document = json.loads(output)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"round-{index + 1}.json").write_text(output)
            roofs = {f"{k} GFLOP/s": v / 1e9 for k, v in document.get("compute", {}).items()}
            roofs.update({f"{k} GB/s": v / 1e9 for k, v in document.get("bandwidth", {}).items()})
            for name, value in roofs.items():
                series.setdefault(name, []).append(value)
            print(f"round {index + 1}/{args.rounds}: {times[-1]:5.1f} s"
                  f"{' (compiles the kernels)' if index == 0 else ''}: "
                  + ", ".join(f"{n} {v:.4g}" for n, v in roofs.items()), flush=True)
    if not series:
        raise SystemExit("characterization_fidelity --spread: no round reported a roof")
    print(f"\n{'roof':<16}{'median':>10}{'min':>10}{'max':>10}{'CV %':>8}{'max/min':>9}")
    for name, values in series.items():
        print(f"{name:<16}{statistics.median(values):>10.4g}{min(values):>10.4g}{max(values):>10.4g}"
              f"{100 * cv(values):>8.1f}{max(values) / min(values):>9.3f}")
    later = times[1:] or times
    print(f"\nworst roof CV {100 * max(cv(v) for v in series.values()):.1f} %; characterization "
          f"{statistics.median(later):.1f} s median, {max(later):.1f} s max after the first round; CPU: {cpu_name()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (fresh characterization, references); ratios are reported per round "
                             "and as the median (default 3)")
    parser.add_argument("--wait-quiet", type=float, default=120.0,
                        help="seconds to wait for other work on the machine to stop first (default 120)")
    parser.add_argument("--likwid", action="store_true",
                        help="compare bandwidth roofs with likwid-bench's update and stream kernels instead")
    parser.add_argument("--cores", default="", help="with --likwid: thread counts, e.g. 1,2 (default: 1 and all); "
                                                    "with --spread: one count")
    parser.add_argument("--likwid-repeats", type=int, default=3, help="with --likwid: best of this many runs")
    parser.add_argument("--spread", action="store_true",
                        help="no reference: every roof's spread over --rounds cold characterizations, each in a "
                             "fresh process (with --cores N: the roofs of N cores), and the time each took")
    parser.add_argument("--keep", type=Path, default=None,
                        help="with --spread: write each round's record (characterize --json) to DIR/round-N.json")
    args = parser.parse_args()
    if args.spread:
        return spread_main(args)
    if args.likwid:
        return likwid_main(args)
    quiet_before = wait_for_quiet(args.wait_quiet)
    print(quiet_before, file=sys.stderr)

    rounds: list[tuple[Machine, float, list[tuple[str, float, float, str, str]]]] = []
    with tempfile.TemporaryDirectory(prefix="roofline-fidelity-") as scratch:
        lib = build_reference(Path(scratch))
        cache_dir = Path(scratch) / "cache"  # empty: the first round includes compiling the kernels
        for _ in range(args.rounds):
            rounds.append(one_round(lib, cache_dir))

    machine = rounds[0][0]
    info = machine.info
    print(f"\nmachine: {machine.name}; threads {info.get('threads')}; method {info.get('method')}")
    print("characterization wall time per round (s): "
          + ", ".join(f"{seconds:.1f}" for _, seconds, _ in rounds)
          + "  (round 1 is cold: empty cache, kernels compiled; torch already imported)")
    names = [row[0] for row in rounds[0][2]]
    print(f"{'ceiling':<16} {'roof':>9} {'reference':>10}  {'ratio per round':<22} {'median':>6}  "
          "roof source / reference")
    worst = math.inf
    for index, name in enumerate(names):
        per_round = [r[2][index] for r in rounds if len(r[2]) > index and r[2][index][0] == name]
        ratios = [roof / reference for _, roof, reference, _, _ in per_round]
        median_ratio = statistics.median(ratios)
        worst = min(worst, median_ratio)
        roof = statistics.median(row[1] for row in per_round) / 1e9
        reference = statistics.median(row[2] for row in per_round) / 1e9
        unit = "GB/s" if name.startswith("bandwidth") else "GFLOP/s"
        flag = "" if median_ratio >= 0.95 else "  <-- below 0.95"
        print(f"{name:<16} {roof:>9.1f} {reference:>10.1f}  {' '.join(f'{r:.3f}' for r in ratios):<22} "
              f"{median_ratio:>6.3f}  {per_round[0][3]} / {per_round[0][4]} [{unit}]{flag}")
    print(f"lowest median ratio: {worst:.3f} (target >= 0.95)")
    print(f"before: {quiet_before}; load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
