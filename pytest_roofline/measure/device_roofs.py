"""Each call site judged on the roofs of the device its work ran on.

A CUDA session's machine is the GPU's record; a call site whose work ran on the host (numpy, work declared
without ``device="cuda"``, tensors on the CPU) is judged on the CPU's roofs instead, characterized when first
needed (``RooflineState.machine_for_device``). The counter says where the work ran (its ``device``); a counter
that does not know is judged on the session's roofs.

Memory levels follow the device: the CPU record's main memory is ``DRAM`` with caches up to ``L3``; the GPU
record's is ``HBM`` with ``L2`` before it. A GPU record carries no cache capacities, so its L2 size (from the
fingerprint) is the capacity a working set must fit to be judged at ``L2``. Under a live probe
(``--roofline-probe``), each timed call is judged on the main-memory roof its probe measured beside it
(:func:`judge_live`).

Plain Python, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_roofline.measure import cuda_probe, probes
from pytest_roofline.measure.cuda_probe import is_cuda, l2_bytes
from pytest_roofline.model import DEVICES, MAIN_MEMORY, KernelSample, Machine, Verdict, evaluate_region

if TYPE_CHECKING:
    from pytest_roofline.measure.probes import ProbeSchedule, ProbeSummary
    from pytest_roofline.measure.timing import TimingStats


def machine_device(machine: Machine) -> str:
    """``cuda`` for a GPU's record, else ``cpu``."""
    return "cuda" if is_cuda(machine) else "cpu"


def work_device(counter: object) -> str | None:
    """Where a counter's last call ran (``cpu``/``cuda``), None when it cannot say."""
    device = getattr(counter, "device", None)
    return device if device in DEVICES else None


def main_memory(machine: Machine) -> str:
    """The level a counter's compulsory bytes start at on this machine: ``DRAM`` or ``HBM``."""
    return MAIN_MEMORY[machine_device(machine)]


def placement_view(machine: Machine) -> Machine:
    """``machine`` with the cache capacities placement needs: a GPU record gets ``{"L2": its L2 size}`` where
    it has an L2 roof and no capacities of its own."""
    if machine.info.get("capacities") or machine_device(machine) != "cuda" or "L2" not in machine.bandwidth:
        return machine

    l2 = l2_bytes(machine)
    return replace(machine, info={**machine.info, "capacities": {"L2": l2}}) if l2 > 0 else machine


def gating_device(devices: Iterable[str | None]) -> str | None:
    """The device a test's thresholds are chosen by: ``cuda`` if any of its call sites ran on a GPU."""
    seen = {d for d in devices if d}
    return "cuda" if "cuda" in seen else ("cpu" if seen else None)


def judge_live(kernels: list[KernelSample], machine: Machine, timing: TimingStats, schedule: ProbeSchedule,
                cached: Verdict) -> tuple[Verdict, ProbeSummary, str]:
    """The verdict of the median call judged against its probe's live DRAM roof, what to record, a note."""
    spec = schedule.probe.spec
    rates = [rate for _, rate in zip(timing.samples_s, schedule.rates)]  # one per timed call
    if isinstance(spec, cuda_probe.CudaProbeSpec):  # GPU: HBM
        roofs = [cuda_probe.live_machine(machine, spec, rate) for rate in rates]
        record = cuda_probe.summary(spec, schedule, cached.fraction)
    elif isinstance(spec, probes.ProbeSpec):  # CPU: DRAM, or the last cache at the call site's working set
        roofs = [probes.live_machine(machine, spec, rate) for rate in rates]
        record = probes.summary(spec, schedule, cached.fraction)
    else:
        raise TypeError(f"no live roof for a probe of {type(spec).__name__}")
    verdicts = sorted((evaluate_region(kernels, roof, seconds) for seconds, roof in zip(timing.samples_s, roofs)),
                      key=lambda v: v.fraction)
    verdict = verdicts[(len(verdicts) - 1) // 2]  # the median call (the lower one of an even count)
    record["fraction_live"] = verdict.fraction
    memory = {"DRAM": "main memory", "HBM": "HBM"}.get(str(record["level"]), "the memory system at this working set")
    note = (f"live {record['level']} probe: {memory} gave "
            f"{record['live_ratio_median']:.2f} of its characterized bandwidth "
            f"while this was timed ({record['probes']} probes of {spec.working_set_bytes / 2**20:.0f} MiB"
            + ("; one untimed call after each put the data back" if record.get("rewarm") else "")
            + f"); each call judged against its probe's roof: fraction {verdict.fraction:.3g} (against the cached "
            f"roof {cached.fraction:.3g})")
    return verdict, record, note
