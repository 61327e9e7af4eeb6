"""Which device the measured work runs on, and how to wait for it.

Looks at already-imported modules only: asking torch or CuPy about CUDA must not import them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def cuda_in_use() -> bool:
    """True when torch or CuPy has initialized CUDA in this process."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return True
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            return bool(cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.Device().id >= 0)
        except Exception:  # noqa: BLE001 - no driver, no device: CuPy raises its own runtime errors
            return False
    return False


def synchronizer() -> Callable[[], None] | None:
    """A function that waits for queued device work, or None when all work is synchronous (CPU)."""
    if not cuda_in_use():
        return None
    waits: list[Callable[[], None]] = []
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        waits.append(torch.cuda.synchronize)
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        waits.append(cupy.cuda.runtime.deviceSynchronize)

    def wait() -> None:
        for fn in waits:
            fn()

    return wait
