"""Run the compiled ERT kernel: working-set sweeps for bandwidth, FLOPs-per-element sweeps for peaks."""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from pytest_roofline.characterize.blas_probe import optional_torch
from pytest_roofline.characterize.build import build_shared_libraries
from pytest_roofline.host.allocator import HUGE_PAGE_BYTES, advise_huge_pages

if TYPE_CHECKING:
    from ctypes import _NamedFuncPointer

    from pytest_roofline.characterize.clean import PassGuard

KERNEL_SOURCE = Path(__file__).resolve().parent / "ert_kernel.c"
ERT_FLOPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # FLOPs per element compiled for the widest width
NARROW_FLOPS = (1, 2, 256, 512)  # the narrower widths only need bandwidth and their peak
VECTOR_BYTES = (16, 32, 64)
ELEMENT_BYTES = {"fp64": 8, "fp32": 4}
# Arrays of each STREAM kernel; each array is read or written once per pass, so a pass moves its working set.
STREAM_ARRAYS = {"triad": 3, "scale": 2}


@dataclass(frozen=True)
class SweepPoint:
    """One timed call: ``trials`` passes over ``working_set_bytes``, each element read and written once."""

    precision: str
    vector_bits: int
    flops_per_element: int
    working_set_bytes: int
    trials: int
    seconds: float
    clean: bool = True  # False: every call was disturbed by other work, the number is a lower bound
    quiet: bool = True  # False: /proc/stat saw other work (or steal) on our cores during this point's pass

    @property
    def bytes_moved(self) -> float:
        return 2.0 * self.working_set_bytes * self.trials  # one read + one write per element and trial

    @property
    def flops(self) -> float:
        return self.flops_per_element * (self.working_set_bytes / ELEMENT_BYTES[self.precision]) * self.trials

    @property
    def bandwidth(self) -> float:
        return self.bytes_moved / self.seconds

    @property
    def flop_rate(self) -> float:
        return self.flops / self.seconds

    def to_row(self) -> dict[str, object]:
        return {**asdict(self), "bytes_per_s": self.bandwidth, "flop_per_s": self.flop_rate}


def chains_for(isa: Iterable[str]) -> int:
    """Independent vectors per block: 16 fit the 32 vector registers of AVX-512, 8 the 16 of AVX2/SSE."""
    return 16 if "avx512f" in set(isa) else 8


def vector_widths_for(isa: Iterable[str], machine: str) -> list[int]:
    """Vector widths (bytes) the CPU executes natively; wider generic vectors would be split by the compiler."""
    flags = set(isa)
    if machine not in ("x86_64", "AMD64", "i686"):
        return [16]
    widths = [16]
    if "avx" in flags:
        widths.append(32)
    if "avx512f" in flags:
        widths.append(64)
    return widths


class ErtLibrary:
    """The compiled kernel library and an aligned buffer big enough for the largest working set."""

    def __init__(self, library_paths: dict[int, Path], chains: int, threads: int, max_bytes: int) -> None:
        self.paths = library_paths
        self.chains = chains
        self.threads = threads
        self._libs = {width: ctypes.CDLL(str(path)) for width, path in library_paths.items()}
        self._lib = next(iter(self._libs.values()))  # any one has the fill functions
        self._functions: dict[tuple[str, int, int], _NamedFuncPointer] = {}
        # Over-allocate and slice so the buffer starts on a 2 MiB boundary and, where the kernel allows it, sits
        # on huge pages (asked before the first touch): on 4 KiB pages each run gets other physical pages and
        # so other cache-set conflicts, and the cache plateaus (L2, L3) moved by up to a third between cold
        # characterizations; PyTorch's blocks are on huge pages too under --roofline-malloc tuned.
        self._raw = np.empty(max_bytes + HUGE_PAGE_BYTES, dtype=np.uint8)
        offset = (-self._raw.ctypes.data) % HUGE_PAGE_BYTES
        self.buffer = self._raw[offset:offset + max_bytes]
        span = -(-max_bytes // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
        self.huge_pages = advise_huge_pages(self.buffer.ctypes.data, min(span, self._raw.size - offset))
        self.max_bytes = max_bytes
        self._filled_as: str | None = None

    @property
    def widths(self) -> list[int]:
        return sorted(self._libs)

    def flops_values(self, vector_bytes: int) -> tuple[int, ...]:
        return ERT_FLOPS if vector_bytes == max(self._libs) else NARROW_FLOPS

    @classmethod
    def build(cls, build_dir: Path, chains: int, threads: int, max_bytes: int,
              widths: Iterable[int] = VECTOR_BYTES, arch_flags: tuple[str, ...] = ("-march=native",)) -> ErtLibrary:
        """One library per vector width, compiled in parallel (and cached); only the widest has every
        ERT_FLOPS value, the others have 1, 2, 256 and 512 (bandwidth and peak)."""
        widths = list(widths)
        variants: list[dict[str, str | int]] = [
            {"ERT_CHAINS": chains, "ERT_WIDTH": w, "ERT_FULL_SWEEP": int(w == max(widths))} for w in widths]
        paths = build_shared_libraries(KERNEL_SOURCE, variants, tuple(arch_flags), build_dir)
        return cls(dict(zip(widths, paths)), chains, threads, max_bytes)

    def _kernel(self, precision: str, vector_bytes: int, flops: int) -> _NamedFuncPointer:
        key = (precision, vector_bytes, flops)
        if key not in self._functions:
            function = getattr(self._libs[vector_bytes], f"ert_{precision}_v{vector_bytes}_f{flops}")
            function.restype = ctypes.c_double
            function.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_double)]
            self._functions[key] = function
        return self._functions[key]

    def granularity_bytes(self, vector_bytes: int = 64) -> int:
        """Working sets are multiples of this: every thread gets whole blocks of ``chains`` vectors."""
        return self.threads * self.chains * max(VECTOR_BYTES)

    def fill(self, precision: str) -> None:
        """Set every element to 1 (the kernel's fixed point), touching pages from the threads that use them."""
        if self._filled_as == precision:
            return
        element = ELEMENT_BYTES[precision]
        ctype = ctypes.c_double if precision == "fp64" else ctypes.c_float
        fill = getattr(self._lib, f"ert_fill_{precision}")
        fill.restype = None
        fill.argtypes = [ctypes.c_void_p, ctypes.c_long, ctype, ctypes.c_int]
        fill(self.buffer.ctypes.data, self.max_bytes // element, 1.0, self.threads)
        self._filled_as = precision

    def run(self, precision: str, vector_bytes: int, flops: int, working_set_bytes: int,
            trials: int) -> tuple[float, float]:
        """(wall seconds for ``trials`` passes, smallest CPU-time share of any thread)."""
        if working_set_bytes % self.granularity_bytes() or working_set_bytes > self.max_bytes:
            raise ValueError(f"working set {working_set_bytes} is not a multiple of {self.granularity_bytes()} "
                             f"or exceeds the buffer ({self.max_bytes})")
        self.fill(precision)
        n = working_set_bytes // ELEMENT_BYTES[precision]
        share = ctypes.c_double(0.0)
        seconds = self._kernel(precision, vector_bytes, flops)(self.buffer.ctypes.data, n, trials, self.threads,
                                                               ctypes.byref(share))
        return float(seconds), float(share.value)

    def run_triad(self, vector_bytes: int, working_set_bytes: int, trials: int) -> tuple[float, float]:
        """a = b + s*c with a, b, c laid out one after another in the first ``working_set_bytes``."""
        return self.run_stream("triad", vector_bytes, working_set_bytes, trials)

    def run_scale(self, vector_bytes: int, working_set_bytes: int, trials: int) -> tuple[float, float]:
        """b = s*a (s = 1) with b and a laid out one after the other in the first ``working_set_bytes``."""
        return self.run_stream("scale", vector_bytes, working_set_bytes, trials)

    def run_stream(self, kernel: str, vector_bytes: int, working_set_bytes: int,
                   trials: int) -> tuple[float, float]:
        """A two- or three-array STREAM kernel (``STREAM_ARRAYS``) over the first ``working_set_bytes``."""
        arrays = STREAM_ARRAYS[kernel]
        array_bytes = working_set_bytes // arrays
        if array_bytes % self.granularity_bytes() or working_set_bytes > self.max_bytes:
            raise ValueError(f"{kernel} working set {working_set_bytes} is not {arrays} x a multiple of "
                             f"{self.granularity_bytes()} or exceeds the buffer ({self.max_bytes})")
        if self._filled_as is None:
            self.fill("fp64")
        if kernel == "triad":
            self._filled_as = "triad"  # a now holds 1.5: refill before the update kernel runs again
        function = self._functions.get((kernel, vector_bytes, 0))
        if function is None:
            function = getattr(self._libs[vector_bytes], f"ert_{kernel}_fp64_v{vector_bytes}")
            function.restype = ctypes.c_double
            function.argtypes = [ctypes.c_void_p] * arrays + [ctypes.c_long, ctypes.c_long, ctypes.c_int,
                                                              ctypes.POINTER(ctypes.c_double)]
            self._functions[(kernel, vector_bytes, 0)] = function
        base = self.buffer.ctypes.data
        share = ctypes.c_double(0.0)
        pointers = [base + i * array_bytes for i in range(arrays)]
        seconds = function(*pointers, array_bytes // 8, trials, self.threads, ctypes.byref(share))
        return float(seconds), float(share.value)

    def overwritten(self) -> None:
        """Code outside the library wrote into the buffer: fill it again before the update kernel next runs."""
        self._filled_as = "overwritten"

    def check_fixed_point(self, precision: str, working_set_bytes: int) -> bool:
        """After any number of trials every element is still exactly 1: the kernel did its FLOPs honestly."""
        dtype = np.float64 if precision == "fp64" else np.float32
        view = self.buffer[:working_set_bytes].view(dtype)
        return bool(np.all(view == 1.0))


CLEAN_SHARE = 0.9  # a call is clean when every thread ran for at least this share of its wall time


@dataclass
class Timing:
    """Best wall time of the clean calls (all if none was clean), and how many calls were clean."""

    trials: int
    seconds: float
    clean: int
    calls: int


def best_time(run: Callable[[int], tuple[float, float]], bytes_per_trial: int, *, target_seconds: float,
              repeats: int, max_calls: int | None = None, budget_seconds: float = 0.2) -> Timing:
    """Best of ``repeats`` clean calls lasting about ``target_seconds`` each, trying at most ``max_calls``.

    ``run(trials)`` returns (wall seconds, smallest CPU-time share of any thread). The machine is shared:
    a call in which a thread was descheduled measures the other work, not the hardware, so it is only
    used when no clean call could be had. The first calls calibrate the trial count and warm threads and
    caches; the count is re-derived once if the calls came out far shorter than intended. Retries for
    clean calls stop after ``budget_seconds`` of timed calls, so a busy machine costs bounded time.
    """
    limit = max_calls if max_calls is not None else 4 * repeats
    trials = max(1, (1 << 20) // max(1, bytes_per_trial))
    calibration = min(run(trials)[0], run(trials)[0])
    trials = max(1, math.ceil(trials * target_seconds / max(calibration, 1e-7)))
    clean: list[float] = []
    dirty: list[float] = []
    rescaled = False
    spent = 0.0
    while len(clean) < repeats and len(clean) + len(dirty) < limit:
        if len(clean) + len(dirty) >= repeats and spent > budget_seconds:
            break
        seconds, share = run(trials)
        spent += seconds
        (clean if share >= CLEAN_SHARE else dirty).append(seconds)
        if not rescaled and len(clean) + len(dirty) == repeats and min(clean + dirty) < target_seconds / 4:
            rescaled = True  # calibration was disturbed: too few trials per call
            trials = max(1, math.ceil(trials * target_seconds / max(min(clean + dirty), 1e-7)))
            clean, dirty = [], []
    return Timing(trials, min(clean or dirty), len(clean), len(clean) + len(dirty))


def measure(library: ErtLibrary, precision: str, vector_bytes: int, flops: int, working_set_bytes: int,
            *, target_seconds: float, repeats: int) -> SweepPoint:
    """The ERT kernel: best of ``repeats`` calls of about ``target_seconds`` each."""
    timing = best_time(lambda trials: library.run(precision, vector_bytes, flops, working_set_bytes, trials),
                       2 * working_set_bytes, target_seconds=target_seconds, repeats=repeats)
    return SweepPoint(precision, vector_bytes * 8, flops, working_set_bytes, timing.trials, timing.seconds,
                      timing.clean > 0)


@dataclass(frozen=True)
class TriadPoint:
    """a = b + s*c over three arrays that together fill ``working_set_bytes``: 3 words moved, 2 FLOPs each."""

    vector_bits: int
    working_set_bytes: int
    trials: int
    seconds: float
    clean: bool = True
    quiet: bool = True

    @property
    def bandwidth(self) -> float:
        return self.working_set_bytes * self.trials / self.seconds

    def to_row(self) -> dict[str, object]:
        return {**asdict(self), "bytes_per_s": self.bandwidth}


def measure_triad(library: ErtLibrary, vector_bytes: int, working_set_bytes: int, *, target_seconds: float,
                  repeats: int) -> TriadPoint:
    timing = best_time(lambda trials: library.run_triad(vector_bytes, working_set_bytes, trials),
                       working_set_bytes, target_seconds=target_seconds, repeats=repeats)
    return TriadPoint(vector_bytes * 8, working_set_bytes, timing.trials, timing.seconds, timing.clean > 0)


@dataclass
class KernelRates:
    """Single passes of each bandwidth kernel at a DRAM-sized working set: a pass streams from memory whatever
    ran before, so it needs no warm-up; None for a pass in which a thread was descheduled."""

    library: ErtLibrary
    vector_bytes: int

    def update_rate(self, working_set_bytes: int) -> float | None:
        seconds, share = self.library.run("fp64", self.vector_bytes, 1, working_set_bytes, 1)
        return 2.0 * working_set_bytes / seconds if share >= CLEAN_SHARE else None

    def triad_rate(self, working_set_bytes: int) -> float | None:
        seconds, share = self.library.run_triad(self.vector_bytes, working_set_bytes, 1)
        return working_set_bytes / seconds if share >= CLEAN_SHARE else None

    def scale_rate(self, working_set_bytes: int) -> float | None:
        seconds, share = self.library.run_scale(self.vector_bytes, working_set_bytes, 1)
        return working_set_bytes / seconds if share >= CLEAN_SHARE else None

    @property
    def copy_source(self) -> str:
        return "torch-copy" if optional_torch() is not None else "numpy-copy"

    def copy_rate(self, working_set_bytes: int) -> float | None:
        """One copy of the first half of the working set into the second, by torch's ``copy_`` on the library's
        threads (numpy's ``copyto``, one thread, without torch): not this library's code but the library a
        user's copy runs, memcpy and its store choice (non-temporal stores skip the write-allocate read the
        analytic counter charges), so the roof bounds what a copy reaches. 2 words per element, as timed."""
        half = working_set_bytes // 2 // 8 * 8
        self.library.overwritten()  # the halves need not hold the same values (after a triad they do not)
        source = self.library.buffer[:half].view(np.float64)
        target = self.library.buffer[half:2 * half].view(np.float64)
        torch = optional_torch()
        if torch is None:
            start = time.perf_counter()
            np.copyto(target, source)
            return 2.0 * half / (time.perf_counter() - start)
        threads = torch.get_num_threads()
        torch.set_num_threads(self.library.threads)
        try:
            a, b = torch.from_numpy(source), torch.from_numpy(target)
            start = time.perf_counter()
            b.copy_(a)
            seconds = time.perf_counter() - start
        finally:
            torch.set_num_threads(threads)
        return 2.0 * half / seconds


Point = TypeVar("Point", SweepPoint, TriadPoint)


def undisturbed(point: SweepPoint | TriadPoint) -> bool:
    return point.clean and point.quiet


def guarded(sizes: Sequence[int], measure_one: Callable[[int], Point], guard: PassGuard | None,
            segment_of: Callable[[int], object] | None) -> list[Point]:
    """``measure_one`` for every size; under a ``guard``, consecutive sizes of one segment (a level's window)
    are watched together (a tick is 10 ms, longer than one point) and marked not quiet when disturbed."""
    if guard is None:
        return [measure_one(size) for size in sizes]
    points: list[Point] = []
    index = 0
    while index < len(sizes):
        key = segment_of(sizes[index]) if segment_of is not None else None
        end = index + 1
        while end < len(sizes) and segment_of is not None and segment_of(sizes[end]) == key:
            end += 1
        chunk: Sequence[int] = sizes[index:end]

        def measure_chunk(chunk: Sequence[int] = chunk) -> list[Point]:
            return [measure_one(size) for size in chunk]

        group, reason = guard.run(measure_chunk)
        points += [replace(p, quiet=False) for p in group] if reason is not None else group
        index = end
    return points


def faster_of(first: list[Point], second: list[Point]) -> list[Point]:
    """Per working set, the faster of two passes (noise mostly slows a pass down), an undisturbed one over a
    disturbed one whatever their speed (a neighbour can also make a pass read fast); sizes in one pass only
    stay."""
    best: dict[int, Point] = {p.working_set_bytes: p for p in first}
    for point in second:
        known = best.get(point.working_set_bytes)
        if known is None or (undisturbed(point), point.bandwidth) > (undisturbed(known), known.bandwidth):
            best[point.working_set_bytes] = point
    return [best[size] for size in sorted(best)]


def working_set_sizes(smallest: int, largest: int, per_octave: int, granularity: int) -> list[int]:
    """Geometric sizes from ``smallest`` to ``largest``, rounded to the kernel's granularity, no repeats."""
    sizes: list[int] = []
    steps = max(1, round(per_octave * math.log2(largest / smallest)))
    for step in range(steps + 1):
        size = smallest * (largest / smallest) ** (step / steps)
        rounded = max(granularity, round(size / granularity) * granularity)
        if not sizes or rounded > sizes[-1]:
            sizes.append(rounded)
    return sizes


def bandwidth_sweep(library: ErtLibrary, sizes: list[int], vector_bytes: int, progress: Callable[[str], None],
                    *, target_seconds: float = 0.001, repeats: int = 3, guard: PassGuard | None = None,
                    segment_of: Callable[[int], object] | None = None) -> list[SweepPoint]:
    """ERT's in-place update at 1 FLOP per element (fp64) for every working-set size."""
    one = _reported("update", len(sizes), progress, lambda size: measure(
        library, "fp64", vector_bytes, 1, size, target_seconds=target_seconds, repeats=repeats))
    return guarded(sizes, one, guard, segment_of)


def _reported(kernel: str, total: int, progress: Callable[[str], None],
              measure_one: Callable[[int], Point]) -> Callable[[int], Point]:
    """``measure_one`` that says how far the sweep got every 16 sizes and at its last."""
    done = 0

    def one(size: int) -> Point:
        nonlocal done
        point = measure_one(size)
        done += 1
        if done % 16 == 0 or done == total:
            progress(f"  {kernel} sweep {done}/{total}: {size / 2**20:8.2f} MiB -> {point.bandwidth / 1e9:6.1f} GB/s")
        return point

    return one


def triad_sweep(library: ErtLibrary, sizes: list[int], vector_bytes: int, progress: Callable[[str], None],
                *, target_seconds: float = 0.001, repeats: int = 3, guard: PassGuard | None = None,
                segment_of: Callable[[int], object] | None = None) -> list[TriadPoint]:
    granularity = 3 * library.granularity_bytes()
    rounded = [size for size in sorted({max(granularity, round(size / granularity) * granularity)
                                        for size in sizes}) if size <= library.max_bytes]
    one = _reported("triad", len(rounded), progress, lambda size: measure_triad(
        library, vector_bytes, size, target_seconds=target_seconds, repeats=repeats))
    return guarded(rounded, one, guard, segment_of)


def flops_sweep(library: ErtLibrary, precision: str, vector_bytes: int, working_set_bytes: int,
                flops_values: Iterable[int], *, target_seconds: float = 0.002, repeats: int = 4,
                peak_repeats: int = 10) -> list[SweepPoint]:
    """One point per FLOPs-per-element value; the compute-bound ones (>= 128) get more tries at the peak."""
    return [measure(library, precision, vector_bytes, flops, working_set_bytes, target_seconds=target_seconds,
                    repeats=peak_repeats if flops >= 128 else repeats) for flops in flops_values]
