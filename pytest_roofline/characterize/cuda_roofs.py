"""Dedicated CUDA roof kernels (``roof_kernels.cu``): L1 reads, the HBM triad, packed-FMA peaks; and best-of
timing until the best is stable (the GEMM roofs).

Why beside the ERT sweep: on an H100 (docs/gpu.md has the figures) the sweep read L1 no faster
than L2 (7.5 TB/s; its small working sets are launch-bound: 0.36 MiB -> 2.9-4.7 TB/s) where a plain
read-only kernel with a 16 KiB region per block reads 31.8-32.0; its HBM plateau (2.81 TB/s) sat under
torch's triad (3.03); and its fp16/bf16 FMA was then overwritten by the Tensor Core GEMM.

Compiling and inspecting the kernels needs only NVRTC (the tests); running them needs a GPU. The GPU side here
is verified offline only (compiled, PTX counted), never run where it was written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "roof_kernels.cu"
THREADS = 256
L1_VECTORS = (2, 4, 8)          # 16-byte loads per thread per pass: 8, 16, 32 KiB per block of 256 threads
L1_BLOCKS_PER_SM = (2, 4)
PEAK_CHAINS, PEAK_UNROLL = 8, 8  # as #defined in roof_kernels.cu
# Peak kernel -> (the roof it sets, FLOPs per FMA instruction, the PTX opcode, the oldest sm_XY with it)
PEAKS: dict[str, tuple[str, int, str, int]] = {
    "fp64": ("fp64", 2, "fma.rn.f64", 60),
    "fp32": ("fp32", 2, "fma.rn.f32", 60),
    "fp16x2": ("fp16", 4, "fma.rn.f16x2", 60),
    "bf16x2": ("bf16", 4, "fma.rn.bf16x2", 80),
}
TARGET_SECONDS = 0.002  # per timed launch: far above the ~5 us a launch costs
REPEATS = 5


def l1_kernel(vectors: int) -> str:
    return f"l1_read_v{vectors}"


def peak_kernels(arch: int) -> list[str]:
    """The peak kernels sm_``arch`` has (bf16x2 from sm_80)."""
    return [f"peak_{name}" for name, (_, _, _, min_arch) in PEAKS.items() if arch >= min_arch]


def compile_roof_kernels(arch: int, *, cubin: bool = False) -> str | bytes:
    from pytest_roofline.characterize.cuda_ert import compile_source

    return compile_source(SOURCE, arch, cubin=cubin, what="roof_kernels.cu")


def l1_bytes(blocks: int, vectors: int, iterations: int, threads: int = THREADS) -> int:
    return blocks * iterations * vectors * threads * 16


def peak_flops_done(kernel: str, blocks: int, iterations: int, threads: int = THREADS) -> int:
    _, per_fma, _, _ = PEAKS[kernel.removeprefix("peak_")]
    return blocks * threads * iterations * PEAK_CHAINS * PEAK_UNROLL * per_fma


def triad_bytes(elements4: int) -> int:
    """Two float4 reads and one float4 write per element (STREAM's count; no write-allocate on a GPU)."""
    return 3 * 16 * elements4


def best_until_stable(run_seconds: Callable[[], float], *, min_runs: int = 10, max_runs: int = 60,
                      patience: int = 8, tolerance: float = 0.005, budget_s: float = 2.0) -> tuple[float, int]:
    """(fastest seconds, runs): runs until ``patience`` runs in a row improved the best by less than
    ``tolerance`` (at least ``min_runs``), or ``max_runs`` / ``budget_s`` of measured time. Five runs let the
    H100's bf16 GEMM roof move 696-790 TFLOP/s between sessions; the best of a settled series does not
    depend on where clocks were when it began."""
    best = math.inf
    runs = since_better = 0
    spent = 0.0
    while runs < max_runs:
        seconds = run_seconds()
        runs += 1
        spent += seconds
        if seconds < best * (1 - tolerance):
            since_better = 0
        else:
            since_better += 1
        best = min(best, seconds)
        if runs >= min_runs and (since_better >= patience or spent >= budget_s):
            break
    return best, runs


@dataclass(frozen=True)
class RoofReading:
    """One roof kernel's best reading: ``value`` in bytes/s or FLOP/s and how it was launched."""

    kernel: str
    value: float
    blocks: int
    iterations: int
    seconds: float
    detail: str = ""

    def to_row(self) -> dict[str, object]:
        return {"kernel": self.kernel, "value": self.value, "blocks": self.blocks, "iterations": self.iterations,
                "seconds": self.seconds, "detail": self.detail}


class GpuRoofs:
    """The roof kernels compiled for one device (a GPU and CuPy needed)."""

    def __init__(self, device_index: int) -> None:
        import cupy

        self.cupy = cupy
        self.device = cupy.cuda.Device(device_index)
        self.device.use()
        attributes = self.device.attributes
        self.multiprocessors = int(attributes["MultiProcessorCount"])
        self.resident_blocks = max(1, int(attributes.get("MaxThreadsPerMultiProcessor", 2048)) // THREADS)
        self.arch = int(self.device.compute_capability)
        self.module = cupy.RawModule(code=SOURCE.read_text(), options=("-w",), backend="nvrtc")

    def _time(self, launch: Callable[[], None]) -> float:
        cupy = self.cupy
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        return float(cupy.cuda.get_elapsed_time(start, stop)) / 1e3

    def _scaled(self, launch: Callable[[int], None]) -> tuple[float, int]:
        """Best seconds of ``REPEATS`` launches with iterations sized to ``TARGET_SECONDS``."""
        self._time(lambda: launch(1))  # loads the module, warms the clocks
        once = max(self._time(lambda: launch(16)) / 16, 1e-8)
        iterations = max(1, math.ceil(TARGET_SECONDS / once))
        return min(self._time(lambda: launch(iterations)) for _ in range(REPEATS)), iterations

    def l1(self) -> RoofReading:
        """The fastest L1 read over 8-32 KiB per block and 2-4 blocks per SM."""
        import numpy as np

        best: RoofReading | None = None
        for per_sm in L1_BLOCKS_PER_SM:
            blocks = self.multiprocessors * per_sm
            data = self.cupy.ones(blocks * max(L1_VECTORS) * THREADS * 4, dtype=self.cupy.uint32)
            out = self.cupy.zeros(blocks * THREADS, dtype=self.cupy.uint32)
            for vectors in L1_VECTORS:
                function = self.module.get_function(l1_kernel(vectors))

                # cupy is untyped: f is a cupy.RawKernel, d and o cupy.ndarrays
                def launch(it: int, f: Any = function, b: int = blocks, d: Any = data, o: Any = out) -> None:
                    f((b,), (THREADS,), (d, np.int32(it), o))

                seconds, iterations = self._scaled(launch)
                rate = l1_bytes(blocks, vectors, iterations) / seconds
                if best is None or rate > best.value:
                    best = RoofReading(l1_kernel(vectors), rate, blocks, iterations, seconds,
                                       f"{vectors * THREADS * 16 // 1024} KiB per block, {per_sm} blocks per SM")
        assert best is not None
        return best

    def triad(self, total_bytes: int) -> RoofReading:
        """STREAM triad over three float4 arrays of ``total_bytes`` together (1 GiB each: far past the L2, and
        ~1 ms per launch, so launch latency is under 1 %)."""
        import numpy as np

        cupy = self.cupy
        n4 = max(1, total_bytes // (3 * 16))
        a, b, c = (cupy.ones(n4 * 4, dtype=cupy.float32) for _ in range(3))
        blocks = self.multiprocessors * self.resident_blocks
        function = self.module.get_function("hbm_triad")

        def launch() -> None:
            function((blocks,), (THREADS,), (a, b, c, np.float32(0.5), np.int64(n4)))

        self._time(launch)
        seconds = min(self._time(launch) for _ in range(4 * REPEATS))
        return RoofReading("hbm_triad", triad_bytes(n4) / seconds, blocks, 1, seconds,
                           f"{triad_bytes(n4) / 2**30:.2f} GiB per pass")

    def peaks(self) -> dict[str, RoofReading]:
        """CUDA-core FMA peaks by roof name (fp64, fp32, fp16, bf16) from register-only packed/scalar FMAs."""
        import numpy as np

        cupy = self.cupy
        blocks = self.multiprocessors * self.resident_blocks
        out = cupy.zeros(blocks * THREADS, dtype=cupy.float64)
        pair = {"fp16x2": 0x38003800, "bf16x2": 0x3F003F00}  # 0.5 in both halves
        readings = {}
        for kernel in peak_kernels(self.arch):
            name = kernel.removeprefix("peak_")
            function = self.module.get_function(kernel)
            if name in pair:
                alpha: np.generic = np.uint32(pair[name])
            else:
                alpha = (np.float64 if name == "fp64" else np.float32)(0.5)

            def launch(it: int, f: Any = function, a: np.generic = alpha) -> None:  # f: a cupy.RawKernel
                f((blocks,), (THREADS,), (out, np.int32(it), a, a))

            seconds, iterations = self._scaled(launch)
            roof = PEAKS[name][0]
            readings[roof] = RoofReading(kernel, peak_flops_done(kernel, blocks, iterations) / seconds, blocks,
                                         iterations, seconds)
        return readings
