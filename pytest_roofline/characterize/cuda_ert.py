"""The CUDA ERT kernel: NVRTC compilation, PTX inspection, and the timed sweeps on a GPU.

Compilation and PTX inspection need only the NVRTC library (``cupy.cuda.nvrtc`` with the
``nvidia-cuda-nvrtc-cu12`` wheel, or ``nvidia-cuda-nvrtc`` for CUDA 13), no GPU: the tests use them to prove, per
architecture, precision and FLOPs per element, that the instructions the GPU will run are the FLOPs the host
counts. The sweeps need a GPU; on an H100 (docs/gpu.md) they set L2
and HBM well but L1 launch-bound (see ``cuda_roofs.py`` for the kernels that set L1, HBM and the FMA peaks now)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_roofline.errors import NvrtcUnavailable

KERNEL_SOURCE = Path(__file__).resolve().parent / "ert_kernel.cu"
# Compile tests cover these where the installed NVRTC builds them (``supported_archs``); sm_75 is the
# pre-Ampere target CUDA 13 still builds (no bf16).
ARCHITECTURES = (70, 75, 80, 90)


@dataclass(frozen=True)
class CudaPrecision:
    name: str
    define: str
    element_bytes: int
    flops_values: tuple[int, ...]
    fma_opcode: str      # the PTX instruction one FMA step becomes
    flops_per_fma: int   # lanes x 2
    min_arch: int        # oldest sm_XY that can run it


SCALAR_FLOPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
PAIR_FLOPS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
PRECISIONS: dict[str, CudaPrecision] = {
    "fp64": CudaPrecision("fp64", "ERT_FP64", 8, SCALAR_FLOPS, "fma.rn.f64", 2, 60),
    "fp32": CudaPrecision("fp32", "ERT_FP32", 4, SCALAR_FLOPS, "fma.rn.f32", 2, 60),
    "fp16": CudaPrecision("fp16", "ERT_FP16", 4, PAIR_FLOPS, "fma.rn.f16x2", 4, 60),
    "bf16": CudaPrecision("bf16", "ERT_BF16", 4, PAIR_FLOPS, "fma.rn.bf16x2", 4, 80),
}
# Bit patterns of 0.5 and 1.0 repeated in both halves of a packed pair.
_PAIR_CONSTANTS = {"fp16": (0x38003800, 0x3C003C00), "bf16": (0x3F003F00, 0x3F803F80)}


def kernel_name(precision: str, flops: int) -> str:
    return f"ert_{precision}_f{flops}"


def supported(precision: str, arch: int) -> bool:
    return arch >= PRECISIONS[precision].min_arch


def expected_instructions(precision: str, flops: int) -> dict[str, int]:
    """Per element: how many FMAs (and plain multiplies) the kernel must contain for ``flops`` FLOPs."""
    spec = PRECISIONS[precision]
    if flops not in spec.flops_values:
        raise ValueError(f"{precision} has no ERT_FLOPS={flops} variant (has {spec.flops_values})")
    if spec.flops_per_fma == 4:
        return {"fma": flops // 4, "mul": 0}
    return {"fma": flops // 2, "mul": flops & 1}


def _nvrtc() -> ModuleType:  # cupy.cuda.nvrtc
    try:
        from cupy.cuda import nvrtc
    except Exception as error:  # ImportError, or CUDA libraries that fail to load
        raise NvrtcUnavailable(f"cupy.cuda.nvrtc is unavailable: {error}") from error
    try:
        nvrtc.getVersion()
    except Exception as error:
        raise NvrtcUnavailable(f"the NVRTC library cannot be loaded: {error}") from error
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    return tuple(_nvrtc().getVersion())  # type: ignore[return-value]


def supported_archs() -> tuple[int, ...] | None:
    """The sm_XY targets the installed NVRTC can build (``nvrtcGetSupportedArchs``: CUDA 13 dropped sm_70 and
    older); None where this NVRTC or CuPy cannot say (then a compile finds out)."""
    nvrtc = _nvrtc()
    try:
        return tuple(int(arch) for arch in nvrtc.getSupportedArchs())
    except Exception:  # noqa: BLE001 - an old CuPy without the call, or an NVRTC before 11.2
        return None


def unbuildable_reason(arch: int) -> str | None:
    """Why the installed NVRTC cannot build sm_``arch`` (for a test's skip); None when it can (or may)."""
    archs = supported_archs()
    if archs is None or arch in archs:
        return None
    major, minor = nvrtc_version()
    return (f"NVRTC {major}.{minor} cannot build sm_{arch} (nvrtcGetSupportedArchs: "
            f"{', '.join(f'sm_{a}' for a in archs)})")


def compile_source(source: Path, arch: int, defines: tuple[str, ...] = (), *, cubin: bool = False,
                   what: str = "") -> str | bytes:
    """PTX text (virtual compute_XY) or a cubin (real sm_XY, assembled by ptxas) of one .cu file."""
    nvrtc = _nvrtc()
    program = nvrtc.createProgram(source.read_text(), source.name, [], [])
    target = f"--gpu-architecture={'sm' if cubin else 'compute'}_{arch}"
    try:
        nvrtc.compileProgram(program, [target, *(f"-D{d}" for d in defines), "-w"])
        return nvrtc.getCUBIN(program) if cubin else nvrtc.getPTX(program).decode()
    except nvrtc.NVRTCError as error:
        log = nvrtc.getProgramLog(program)
        raise RuntimeError(f"NVRTC failed for {what or source.name} on sm_{arch}: {error}\n{log}") from error
    finally:
        nvrtc.destroyProgram(program)


def compile_kernels(precision: str, arch: int, *, cubin: bool = False) -> str | bytes:
    """PTX text (virtual compute_XY) or a cubin (real sm_XY, assembled by ptxas) for one precision."""
    return compile_source(KERNEL_SOURCE, arch, (PRECISIONS[precision].define,), cubin=cubin, what=precision)


def ptx_entries(ptx: str) -> dict[str, str]:
    """Kernel name -> its PTX body."""
    entries: dict[str, str] = {}
    for match in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\n\}", ptx, re.DOTALL):
        entries[match.group(1)] = match.group(2)
    return entries


def count_instructions(body: str, precision: str) -> dict[str, int]:
    """FMA, floating multiply and global load/store instructions in one kernel's PTX."""
    spec = PRECISIONS[precision]
    float_type = {"fp64": "f64", "fp32": "f32"}.get(precision)
    multiply = (len(re.findall(rf"\bmul(?:\.r[nzmp])?(?:\.ftz)?\.{float_type}\b", body)) if float_type else 0)
    return {
        "fma": len(re.findall(rf"\b{re.escape(spec.fma_opcode)}\b", body)),
        "mul": multiply,
        "loads": len(re.findall(r"\bld\.global\b", body)),
        "stores": len(re.findall(r"\bst\.global\b", body)),
    }


# --- running on a GPU -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuPoint:
    precision: str
    flops_per_element: int
    working_set_bytes: int
    trials: int
    seconds: float
    blocks: int
    threads_per_block: int

    @property
    def bandwidth(self) -> float:
        return 2.0 * self.working_set_bytes * self.trials / self.seconds

    @property
    def flop_rate(self) -> float:
        elements = self.working_set_bytes / PRECISIONS[self.precision].element_bytes
        return self.flops_per_element * elements * self.trials / self.seconds

    def to_row(self) -> dict[str, object]:
        return {**asdict(self), "bytes_per_s": self.bandwidth, "flop_per_s": self.flop_rate}


class GpuErt:
    """Compiled kernels on one device plus a buffer for the largest working set."""

    def __init__(self, device_index: int, max_bytes: int, threads_per_block: int = 256) -> None:
        import cupy

        self.cupy = cupy
        self.device = cupy.cuda.Device(device_index)
        self.device.use()
        attributes = self.device.attributes
        self.multiprocessors = int(attributes["MultiProcessorCount"])
        self.threads_per_block = threads_per_block
        resident = int(attributes.get("MaxThreadsPerMultiProcessor", 2048))
        self.blocks = self.multiprocessors * max(1, resident // threads_per_block)
        self.max_bytes = max_bytes
        self.buffer = cupy.zeros(max_bytes // 4, dtype=cupy.uint32)
        self.arch = int(self.device.compute_capability)  # "90" for sm_90, "100" for sm_100
        self._modules: dict[str, Any] = {}  # cupy.RawModule per precision (cupy is untyped)
        self._filled_as: str | None = None

    def _function(self, precision: str, flops: int) -> Any:  # a cupy.RawKernel
        if precision not in self._modules:
            self._modules[precision] = self.cupy.RawModule(
                code=KERNEL_SOURCE.read_text(), options=(f"-D{PRECISIONS[precision].define}", "-w"),
                backend="nvrtc")
        return self._modules[precision].get_function(kernel_name(precision, flops))

    def _fill(self, precision: str) -> None:
        if self._filled_as == precision:
            return
        cupy = self.cupy
        if precision == "fp64":
            self.buffer.view(cupy.float64)[:] = 1.0
        elif precision == "fp32":
            self.buffer.view(cupy.float32)[:] = 1.0
        else:
            self.buffer[:] = _PAIR_CONSTANTS[precision][1]
        self._filled_as = precision

    def launch(self, precision: str, flops: int, working_set_bytes: int, trials: int) -> float:
        """Seconds for one launch running ``trials`` passes, timed with CUDA events."""
        import numpy as np

        cupy = self.cupy
        self._fill(precision)
        spec = PRECISIONS[precision]
        n = working_set_bytes // spec.element_bytes
        if precision in _PAIR_CONSTANTS:
            half, one = _PAIR_CONSTANTS[precision]
            scalars: tuple[np.generic, ...] = (np.uint32(half), np.uint32(half), np.uint32(one))
        else:
            kind = np.float64 if precision == "fp64" else np.float32
            scalars = (kind(0.5), kind(0.5), kind(1.0))
        blocks = min(self.blocks, max(1, math.ceil(n / self.threads_per_block)))
        function = self._function(precision, flops)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        function((blocks,), (self.threads_per_block,), (self.buffer, np.int64(n), np.int32(trials), *scalars))
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop) / 1e3

    def measure(self, precision: str, flops: int, working_set_bytes: int, *, target_seconds: float = 0.002,
                repeats: int = 3) -> GpuPoint:
        trials = 1
        seconds = self.launch(precision, flops, working_set_bytes, trials)  # also compiles and warms up
        seconds = self.launch(precision, flops, working_set_bytes, trials)
        trials = max(1, math.ceil(target_seconds / max(seconds, 1e-7)))
        best = min(self.launch(precision, flops, working_set_bytes, trials) for _ in range(repeats))
        n = working_set_bytes // PRECISIONS[precision].element_bytes
        return GpuPoint(precision, flops, working_set_bytes, trials, best,
                        min(self.blocks, max(1, math.ceil(n / self.threads_per_block))), self.threads_per_block)

    def bandwidth_sweep(self, sizes: Iterable[int], progress: Callable[[str], None]) -> list[GpuPoint]:
        points = []
        sizes = list(sizes)
        for index, size in enumerate(sizes):
            points.append(self.measure("fp64", 1, size))
            if index % 16 == 15 or index == len(sizes) - 1:
                progress(f"  sweep {index + 1}/{len(sizes)}: {size / 2**20:9.2f} MiB "
                         f"-> {points[-1].bandwidth / 1e9:8.1f} GB/s")
        return points

    def flops_sweep(self, precision: str, working_set_bytes: int) -> list[GpuPoint]:
        return [self.measure(precision, flops, working_set_bytes) for flops in PRECISIONS[precision].flops_values]
