"""Machine characterization: measured roofline ceilings for this CPU or CUDA device.

The public entry points live in :mod:`pytest_roofline.characterize.machine`; this package holds the pieces
(fingerprint, cache and lock, measurement kernels, plateau extraction, pinned machine files).

Units everywhere are SI: FLOP/s for compute roofs and bytes/s for bandwidth roofs. Bytes are counted as the
kernel requests them (no write-allocate traffic).

Names used for ceilings:
- memory levels: ``L1``, ``L2``, ``L3``, ``DRAM`` on CPUs, ``L1``, ``L2``, ``HBM`` on GPUs;
- precisions: ``fp64``, ``fp32``, ``bf16``, ``fp16``, ``tf32``, ``fp8``; GPU GEMM (Tensor Core) ceilings are
  ``<precision>_tensor`` (e.g. ``fp16_tensor``) so they never hide the vector-unit roof of the same type.
"""

from __future__ import annotations

# Bump whenever a change alters what is measured or how: old caches then stop matching the fingerprint.
CHARACTERIZATION_VERSION = 3
