"""Each call site judged on the roofs of the device its work ran on.

A CUDA session's machine is the GPU's record; a call site whose work ran on the host (numpy, work declared
without ``device="cuda"``, tensors on the CPU) is judged on the CPU's roofs instead, characterized when first
needed (``RooflineState.machine_for_device``). The counter says where the work ran (its ``device``); a counter
that does not know is judged on the session's roofs.

Memory levels follow the device: the CPU record's main memory is ``DRAM`` with caches up to ``L3``; the GPU
record's is ``HBM`` with ``L2`` before it. A GPU record carries no cache capacities, so its L2 size (from the
fingerprint) is the capacity a working set must fit to be judged at ``L2``.

Plain Python, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from pytest_roofline.model import DEVICES, MAIN_MEMORY, Machine


def machine_device(machine: Machine) -> str:
    """``cuda`` for a GPU's record, else ``cpu``."""
    from pytest_roofline.measure.cuda_probe import is_cuda

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
    from pytest_roofline.measure.cuda_probe import l2_bytes

    l2 = l2_bytes(machine)
    return replace(machine, info={**machine.info, "capacities": {"L2": l2}}) if l2 > 0 else machine


def gating_device(devices: Iterable[str | None]) -> str | None:
    """The device a test's thresholds are chosen by: ``cuda`` if any of its call sites ran on a GPU."""
    seen = {d for d in devices if d}
    return "cuda" if "cuda" in seen else ("cpu" if seen else None)
