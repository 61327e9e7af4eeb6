"""The profiled child's side of the ncu counter (``PYTEST_ROOFLINE_NCU_CHILD=1``).

The parent re-runs one test under ncu (:func:`pytest_roofline.counters.ncu.backend.profile_node`); in that child the
``roofline`` fixture is a :class:`ChildRecorder`. Its ``measure(fn, *args)`` warms ``fn`` up unprofiled, then
calls it once inside an NVTX start/end range in the ``pytest_roofline`` domain, which is what ncu's
``--nvtx-include regex:pytest_roofline@.+`` filter profiles. Start/end ranges are process-wide (push/pop ranges
are per thread), so kernels that autograd launches from its backward thread fall inside the range too.

The child measures nothing itself: no timing, no verdict, no results file, no characterization.

Declared regions (``roofline.declare(...).measure(fn)``) run once without a range: their work is what the test
declared, in the parent as with every counter, so ncu must not count it a second time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

from pytest_roofline.counters.declared import DeclaredCounter
from pytest_roofline.counters.ncu.command import NVTX_DOMAIN
from pytest_roofline.errors import NvtxMissing
from pytest_roofline.host.devices import synchronizer
from pytest_roofline.host.process_role import CHILD_ENV, is_profiled_child  # noqa: F401 (re-exported)

WARMUP_CALLS = 2  # compiles, autotunes and allocates outside the profiled range
RANGE_PREFIX = "region-"
# A batched child (one ncu run for many tests, counters/ncu/batch.py) names its ranges t<test>-region-<n> and
# writes each test's start and outcome to this file, so that a crash names the test it happened in.
PROGRESS_ENV = "PYTEST_ROOFLINE_NCU_PROGRESS"
T = TypeVar("T")


def test_range_prefix(index: int) -> str:
    return f"t{index}-{RANGE_PREFIX}"


class BatchProgress:
    """The batched child's progress file: ``start<TAB>index<TAB>nodeid`` when a test starts, ``end<TAB>index
    <TAB>nodeid<TAB>outcome`` when it is done; each line flushed and synced before the test body runs on."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.index = -1
        self.failed = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BatchProgress | None:
        import os

        path = (os.environ if environ is None else environ).get(PROGRESS_ENV)
        return cls(path) if path else None

    def _write(self, line: str) -> None:
        import os

        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def start(self, nodeid: str) -> None:
        self.index += 1
        self.failed = False
        self._write(f"start\t{self.index}\t{nodeid}")

    def finish(self, nodeid: str) -> None:
        self._write(f"end\t{self.index}\t{nodeid}\t{'failed' if self.failed else 'passed'}")

    def prefix(self) -> str:
        return test_range_prefix(max(self.index, 0))


def nvtx_module() -> ModuleType:
    """NVIDIA's ``nvtx`` package (PyPI ``nvtx``), imported only in the profiled child."""
    try:
        return importlib.import_module("nvtx")
    except ImportError:
        raise NvtxMissing(
            "pytest-roofline's ncu counter marks the profiled calls with NVTX ranges and needs the 'nvtx' "
            "package in the environment that runs the tests: pip install nvtx (or pip install 'pytest-roofline[gpu]')"
        ) from None


def _no_wait() -> None:
    return None


class ChildRecorder:
    """Stands in for :class:`pytest_roofline.measure.regions.Recorder` in the profiled child."""

    enabled = True

    def __init__(self, prefix: str = RANGE_PREFIX) -> None:
        self.regions: list[object] = []  # the child judges nothing: both stay empty
        self.pending: list[object] = []
        self.ranges = 0
        self.prefix = prefix

    def measure(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        """Warm ``fn`` up, then run it once inside an NVTX range; return that call's result."""
        nvtx = nvtx_module()  # before the warm-up: a missing package should fail fast
        for _ in range(WARMUP_CALLS):
            fn(*args, **kwargs)
        wait = synchronizer() or _no_wait  # looked up after the warm-up, which may have started CUDA
        wait()  # warm-up kernels must not run into the range
        handle = nvtx.start_range(message=f"{self.prefix}{self.ranges}", domain=NVTX_DOMAIN)
        self.ranges += 1
        try:
            result = fn(*args, **kwargs)
            wait()  # the range ends when the kernels have, not when they were queued
        finally:
            nvtx.end_range(handle)
        return result

    def declare(
        self,
        flops: float | Mapping[str, float] | None = None,
        bytes: float | Mapping[str, float] | None = None,
        *,
        precision: str = "fp32",
        level: str | None = None,
        name: str | None = None,
        device: str = "cpu",
    ) -> ChildDeclaredRegion:
        # Validated as in the parent, so a bad declaration fails the same way in both.
        DeclaredCounter.from_user(flops, bytes, precision=precision, level=level, name=name or "declared",
                                  device=device)
        return ChildDeclaredRegion()

    def verdict(self) -> None:
        return None


@dataclass(frozen=True)
class ChildDeclaredRegion:
    def measure(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        return fn(*args, **kwargs)
