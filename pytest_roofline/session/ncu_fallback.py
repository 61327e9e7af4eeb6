"""The ncu counter's fallback policy: count a test's pending regions from its ncu profile, or say what to do.

Plain Python: the pytest glue turns the outcome into a skip, a failure, or an error of the test's teardown.
ERR_NVGPUCTRPERM skips the test under explicit ``ncu``; under ``auto`` it (or a missing ncu or GPU) makes the
analytic counter count this test's regions and every later one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline.errors import (
    CountersNotPermitted,
    CounterUnavailableError,
    NcuBackendError,
    NcuNotFound,
    NoGpu,
    NoKernelsInRange,
)
from pytest_roofline.session.state import RooflineState, TestEntry

if TYPE_CHECKING:
    from pytest_roofline.counters.ncu.deferred import NcuBatches

# torch copies between device buffers (copy_, clone, .to) as cudaMemcpy, not a kernel: ncu profiles no launch
NO_KERNEL_NOTE = ("ncu profiled no kernel in this test's ranges (a copy between GPU buffers runs as cudaMemcpy, which "
                  "ncu does not profile; work outside roofline.measure is not seen either): counted by the analytic "
                  "counter")


@dataclass(frozen=True)
class PendingOutcome:
    """What became of a test's pending regions: counted (all None), or one of skip / fail / error."""

    skip: str | None = None  # the test is skipped with this reason
    fail: str | None = None  # the test fails with this message
    error: str | None = None  # an error of the test, raised in its teardown


@dataclass(frozen=True)
class ChildRun:
    """How to start the profiled child: the parent's rootdir, ini file and whether xdist is loaded."""

    rootpath: Path
    inipath: Path | None
    xdist: bool
    batch: tuple[str, ...] = ()  # node ids that may need counts next: profiled in one child with this one
    full: bool = False  # --roofline-ncu-full: keep the full .ncu-rep (SASS, every metric ncu adds)


def judge_pending(state: RooflineState, entry: TestEntry, nodeid: str, child: ChildRun,
                  warn: Callable[[Warning], None]) -> PendingOutcome:
    """Profile the test under ncu and judge its pending regions."""
    from pytest_roofline.counters.ncu import deferred as ncu_gate

    if state.ncu_denied is not None:
        entry.extra["ncu"] = {"error": state.ncu_denied, "logs": []}
        return PendingOutcome(skip=state.ncu_denied)
    setup = state.choose_counter().setup
    if setup is None:  # defensive: regions are pending only while the session's counter is ncu
        return count_with_analytic(state, entry)
    try:
        outcome = ncu_gate.profile_test(
            entry.recorder, nodeid, state.session_dir, state.machine(), setup, cwd=child.rootpath,
            extra_pytest_args=ncu_gate.child_pytest_args(child.rootpath, child.inipath, child.xdist),
            batch=child.batch, batches=_batches(state), full=child.full,
        )
    except (CountersNotPermitted, NcuNotFound, NoGpu) as exc:
        if state.settings.counter == "auto":
            state.fall_back_to_analytic(str(exc), warn)
            return count_with_analytic(state, entry)
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        if isinstance(exc, CountersNotPermitted):
            state.ncu_denied = f"roofline: {exc}"
            return PendingOutcome(skip=state.ncu_denied)
        return PendingOutcome(error=f"roofline: --roofline-counter=ncu: {exc}")
    except NoKernelsInRange as exc:  # a test of copies only: its work is real, the analytic counter counts it
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        return count_with_analytic(state, entry, NO_KERNEL_NOTE)
    except NcuBackendError as exc:  # the child failed or timed out
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        return PendingOutcome(error=f"roofline: {exc}")
    except Exception as exc:  # noqa: BLE001 - e.g. an unreadable report: the test's error, not pytest's crash
        entry.extra["ncu"] = ncu_gate.error_section(exc)
        return PendingOutcome(error=f"roofline: could not use the ncu profile of {nodeid}: {exc!r}")
    entry.artifacts.extend(outcome.artifacts)
    if outcome.extra is not None:
        entry.extra.update(outcome.extra)
    entry.details = outcome.details
    return PendingOutcome()


def _batches(state: RooflineState) -> NcuBatches:
    from pytest_roofline.counters.ncu.deferred import NcuBatches

    batches: NcuBatches | None = getattr(state, "ncu_batches", None)
    if batches is None:
        batches = state.ncu_batches = NcuBatches()
    return batches


def count_with_analytic(state: RooflineState, entry: TestEntry, note: str | None = None) -> PendingOutcome:
    try:
        analytic = state.make_counter("analytic")
        if analytic is None:
            raise CounterUnavailableError("no plugin provides the analytic counter (pytest_roofline_make_counter)")
        entry.recorder.count_pending(analytic, note)
    except CounterUnavailableError as exc:
        return PendingOutcome(fail=f"roofline: {exc}")
    return PendingOutcome()
