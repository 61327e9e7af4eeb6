"""The live HBM probe on CUDA: the CPU's live DRAM probe (:mod:`probes`) with a CuPy kernel and CUDA events.

NOT USED TO JUDGE: the Recorder judges GPU work on the record's roofs and builds no probe
(``Recorder.probe_for``). A GPU's HBM is not shared with other tenants the way a CPU host's DRAM is, and a
probe runs between the test's own timed calls. On the first H100 run (docs/gpu.md) the two regions
that were probed read 0.99 and 1.00 of the record's HBM roof; the 355 to 2,600 GB/s "roofs at DRAM" that
failure messages quoted in that session were not probes but the message's bytes / t_min (now the message
quotes the record's roof, ``output.text.failure_message``). This module stays for measuring a probe on its
own (the spec, the kernel, the schedule), and its tests.

UNVERIFIED ON HARDWARE: no GPU was available where this was written. The kernel is proven offline (NVRTC
compiles it for sm_70/80/90 and its PTX is inspected in the tests); the host logic is tested with a fake
CuPy module. It has never timed anything on a real GPU.

What it measures. The HBM roof of a CUDA characterization (``characterize/cuda.py``) is the plateau of the
ERT update sweep, kernel ``ert_fp64_f1`` of ``ert_kernel.cu`` (per fp64 element: one load, one multiply by
1.0, one store; 1 FLOP per 16 bytes, far below any GPU's ridge). Each sweep point is recorded in
``info["sweep"]["update"]`` with its launch (blocks, threads per block, passes per launch): the calibration
is that record, as on the CPU. The probe is the smallest sweep point of the HBM plateau that is at least
:data:`L2_MULTIPLE` times the L2 (from the fingerprint), launched exactly as the sweep launched it, one launch
per probe, timed with CUDA events on the call site's stream after a device synchronization (the call site's
queued work is not in the probe's interval). Each timed call is judged against

    live roof_i = characterized HBM roof x probe rate_i / rate of that sweep point

A machine with no such record (pinned ceilings, a cache written before the sweep was recorded, an L2 size
unknown) gets no live probe, and the region says why in a note.

Cost: one probe is one sweep launch (the sweep sized its passes for about 2 ms) plus a device
synchronization; :class:`probes.ProbeSchedule` runs one only when the calls since the last probe took as long
as it did, so probes at most double a call site's measurement. The probe's buffer (its working set, several
times the L2) stays allocated on the device for the session, beside the test's own memory.

Plain Python: CuPy and numpy are imported when a probe is built, never at import.
"""

from __future__ import annotations

import statistics
import sys
import warnings
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_roofline.characterize import cuda_ert
from pytest_roofline.measure import probes
from pytest_roofline.model import KernelSample, Machine

if TYPE_CHECKING:
    from pytest_roofline.measure.probes import ProbeSchedule, ProbeSummary, RateProbe

PROBE_LEVEL = "HBM"
MEMORY_LEVELS = ("HBM", "DRAM")  # a counter may put main-memory bytes at either name (model._LEVEL_ALIASES)
PRECISION, FLOPS = "fp64", 1  # the kernel of the HBM roof: cuda_ert.GpuErt.bandwidth_sweep runs ("fp64", 1)
L2_MULTIPLE = 4  # a probe's working set is at least this many L2s (where the characterization's HBM window starts)
CACHE_MULTIPLE = 2  # a footprint at least this many L2s cannot stay in L2 between calls (as probes.CACHE_MULTIPLE)
SCALARS = (0.5, 0.5, 1.0)  # alpha, beta, gamma as GpuErt.launch passes them: x * 1.0 keeps the data at 1.0


def is_cuda(machine: Machine) -> bool:
    """Whether ``machine`` holds a GPU's roofs (a CUDA characterization, or a record naming a CUDA device)."""
    info = machine.info
    return info.get("method") == "ert-cuda" or str(info.get("device", "")).startswith("cuda")


def device_index(machine: Machine) -> int:
    """The CUDA device the roofs were measured on (``info["device"]`` is ``cuda:N``)."""
    _, _, index = str(machine.info.get("device", "cuda:0")).partition(":")
    return int(index) if index.isdigit() else 0


def l2_bytes(machine: Machine) -> int:
    """The L2 size the characterization saw (its fingerprint), 0 when unknown."""
    fingerprint = machine.info.get("fingerprint") or {}
    return int(fingerprint.get("l2_bytes") or machine.info.get("l2_bytes") or 0)


def cache_key(index: int) -> int:
    """The probe's key in the session's probe cache: negative, so it never meets a CPU thread count."""
    return -1 - index


@dataclass(frozen=True)
class CudaProbeSpec:
    """One sweep point of the HBM plateau: the launch to repeat and its rate at characterization."""

    device_index: int
    working_set_bytes: int
    trials: int  # passes over the working set inside one launch
    blocks: int
    threads_per_block: int
    calibration_bytes_per_s: float  # the sweep point's rate (read + write of every element)
    roof_bytes_per_s: float  # the characterized HBM roof
    rewarm: bool = False  # an HBM-sized probe leaves no cached data of the call site to put back

    @property
    def threads(self) -> int:
        return self.blocks * self.threads_per_block

    @classmethod
    def resolve(cls, machine: Machine) -> CudaProbeSpec | str:
        """The probe for this machine's HBM roof, or why there is none."""
        info = machine.info
        roof = machine.bandwidth.get(PROBE_LEVEL)
        level = (info.get("levels") or {}).get(PROBE_LEVEL) or {}
        rows = [r for r in ((info.get("sweep") or {}).get("update") or [])
                if r.get("precision") == PRECISION and r.get("flops_per_element") == FLOPS]
        if not roof:
            return "the machine has no HBM roof"
        if not (level.get("plateau_bytes") and rows):
            return "its HBM roof was not set by the ERT sweep (pinned ceilings or an older cache): no calibration"
        l2 = l2_bytes(machine)
        if l2 <= 0:
            return "the L2 size is unknown, so no working set can be chosen that streams from HBM"
        low, high = level["plateau_bytes"]
        inside = sorted((r for r in rows if low <= r["working_set_bytes"] <= high
                         and r["working_set_bytes"] >= L2_MULTIPLE * l2 and r.get("trials") and r.get("blocks")
                         and r.get("threads_per_block") and r.get("bytes_per_s")),
                        key=lambda r: r["working_set_bytes"])
        if not inside:
            return f"no sweep point of the HBM plateau is {L2_MULTIPLE}x the L2 ({l2 / 2**20:.0f} MiB) or more"
        point = inside[0]  # the cheapest probe that still streams from HBM
        return cls(device_index(machine), int(point["working_set_bytes"]), int(point["trials"]),
                   int(point["blocks"]), int(point["threads_per_block"]), float(point["bytes_per_s"]), float(roof))


def wants_probe(footprint_bytes: float | None, machine: Machine, hbm_bytes: float) -> bool:
    """Probe a region whose bytes are judged at HBM and whose data cannot stay in L2 between calls."""
    if hbm_bytes <= 0 or not footprint_bytes:
        return False
    l2 = l2_bytes(machine)
    return l2 > 0 and footprint_bytes >= CACHE_MULTIPLE * l2


def call_site_stream(cupy: Any, index: int) -> Any:  # the cupy module (untyped); a cupy.cuda.Stream
    """The stream the measured work runs on: torch's current stream where torch has initialized CUDA, else
    CuPy's current stream. The probe's events and launch go there, so the probe runs in the call site's order."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        stream = torch.cuda.current_stream(index)
        pointer = int(stream.cuda_stream)
        if pointer == 0:
            return cupy.cuda.Stream.null  # the legacy default stream, the same one for torch and CuPy
        from_external = getattr(cupy.cuda.Stream, "from_external", None)
        if from_external is not None and hasattr(stream, "__cuda_stream__"):
            return from_external(stream)  # CuPy 14+ and torch streams: the CUDA stream protocol
        with warnings.catch_warnings():  # older pairs: a raw pointer (ExternalStream, deprecated in CuPy 14)
            warnings.simplefilter("ignore", DeprecationWarning)
            return cupy.cuda.ExternalStream(pointer, index)
    return cupy.cuda.get_current_stream(index)


@dataclass
class CudaDramProbe:
    """The probe kernel on the device with its buffer; built once per device and reused by the session."""

    spec: CudaProbeSpec
    run_once: Callable[[], float]  # seconds of one launch (``trials`` passes), by CUDA events

    @classmethod
    def build(cls, spec: CudaProbeSpec, cupy: Any = None) -> CudaDramProbe:  # cupy: the module (untyped)
        """Compile the kernel (NVRTC, through CuPy), fill the buffer and launch once untimed (module load,
        first touch). ``cupy`` is the module to use: the tests pass a fake."""
        import importlib

        import numpy as np

        cupy = cupy if cupy is not None else importlib.import_module("cupy")

        device = cupy.cuda.Device(spec.device_index)
        with device:
            module = cupy.RawModule(code=cuda_ert.KERNEL_SOURCE.read_text(),
                                    options=(f"-D{cuda_ert.PRECISIONS[PRECISION].define}", "-w"), backend="nvrtc")
            kernel = module.get_function(cuda_ert.kernel_name(PRECISION, FLOPS))
            elements = spec.working_set_bytes // cuda_ert.PRECISIONS[PRECISION].element_bytes
            buffer = cupy.ones(elements, dtype=cupy.float64)
            args = (buffer, np.int64(elements), np.int32(spec.trials), *(np.float64(s) for s in SCALARS))

        def run_once() -> float:
            with device:
                stream = call_site_stream(cupy, spec.device_index)
                device.synchronize()  # the call site's queued work finishes outside the probe's interval
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                with stream:
                    start.record(stream)
                    kernel((spec.blocks,), (spec.threads_per_block,), args)
                    stop.record(stream)
                stop.synchronize()
                return float(cupy.cuda.get_elapsed_time(start, stop)) / 1e3

        run_once()  # warm: lazy module loading and the buffer's first pass stay out of every probe
        return cls(spec, run_once)

    def rate(self) -> float:
        """HBM bandwidth of one probe launch now (bytes/s, counted as the roof is: read + write, every pass)."""
        return 2.0 * self.spec.working_set_bytes * self.spec.trials / self.run_once()


@dataclass
class Unprobed:
    """Stands in for a schedule where a region wanted a live HBM probe and cannot have one: runs nothing before
    the timed calls, and carries the note that says why."""

    note: str
    rates: list[float] = field(default_factory=list)

    def __call__(self, previous_call_s: float) -> None:
        pass


def schedule_for(machine: Machine, kernels: Sequence[KernelSample], footprint_bytes: float | None,
                 cache: MutableMapping[int, RateProbe], build: Callable[[CudaProbeSpec], RateProbe] | None = None,
                 ) -> ProbeSchedule | Unprobed | None:
    """A ``probes.ProbeSchedule`` around the device's HBM probe for a region that wants one, an
    :class:`Unprobed` with a note where it wants one and cannot have it, else None."""
    hbm = sum(k.bytes.get(level, 0.0) for k in kernels for level in MEMORY_LEVELS)
    if not wants_probe(footprint_bytes, machine, hbm):
        return None
    spec = CudaProbeSpec.resolve(machine)
    if isinstance(spec, str):
        return Unprobed(f"no live HBM probe: {spec}; judged against the cached roof")
    probe = cache.get(cache_key(spec.device_index))
    if probe is None or probe.spec != spec:
        try:
            probe = (build or CudaDramProbe.build)(spec)
        except Exception as error:  # noqa: BLE001 - NVRTC, driver or out-of-memory errors: judge without a probe
            return Unprobed(f"no live HBM probe: it could not be built ({type(error).__name__}: {error}); "
                            "judged against the cached roof")
        cache[cache_key(spec.device_index)] = probe
    return probes.ProbeSchedule(probe)


def live_machine(machine: Machine, spec: CudaProbeSpec, rate: float) -> Machine:
    """``machine`` with its HBM roof scaled by the probe: characterized x rate / calibration."""
    live = spec.roof_bytes_per_s * rate / spec.calibration_bytes_per_s
    return replace(machine, bandwidth={**machine.bandwidth, PROBE_LEVEL: live})


def summary(spec: CudaProbeSpec, schedule: ProbeSchedule, fraction_cached: float) -> ProbeSummary:
    """What results.json records of a region probed on the GPU (the CPU record's keys, plus the launch)."""
    rates: list[float] = schedule.probes
    ratios = [r / spec.calibration_bytes_per_s for r in rates]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {"level": PROBE_LEVEL, "kernel": cuda_ert_kernel(), "device": f"cuda:{spec.device_index}",
            "working_set_bytes": spec.working_set_bytes, "threads": spec.threads,
            "launch": {"blocks": spec.blocks, "threads_per_block": spec.threads_per_block, "trials": spec.trials},
            "probes": len(rates), "probe_seconds": round(schedule.probe_seconds, 6),
            "characterized_bytes_per_s": spec.roof_bytes_per_s,
            "calibration_bytes_per_s": spec.calibration_bytes_per_s,
            "live_ratio_median": statistics.median(ratios), "live_ratio_iqr": q[2] - q[0],
            "fraction_cached_roofs": fraction_cached, "unverified_on_hardware": True}


def cuda_ert_kernel() -> str:
    """The probe kernel's name in ``ert_kernel.cu``."""
    return cuda_ert.kernel_name(PRECISION, FLOPS)


def probe_ptx(arch: int) -> str:
    """The probe kernel's PTX body for ``compute_<arch>`` (NVRTC, no GPU needed): what the tests inspect."""
    entries = cuda_ert.ptx_entries(str(cuda_ert.compile_kernels(PRECISION, arch)))
    return entries[cuda_ert_kernel()]
