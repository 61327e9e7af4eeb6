"""The parent's side of the ncu counter: which counter a session uses, and judging a test from its ncu profile.

One test under ``--roofline-counter ncu`` (or ``auto`` that chose ncu):

1. In the test, ``roofline.measure(fn, *args)`` calls ``fn`` once (the result it returns) and times it bare
   (:class:`NcuDeferredCounter`): unprofiled, device-synchronized, at the GPU's normal clocks, so the time is
   comparable to the characterized roofs. The region waits for its counts (``Recorder.pending``).
2. When the test body has returned, the plugin calls :func:`profile_test` once. The first such test of a
   session starts one batched child (:mod:`pytest_roofline.counters.ncu.batch`) for itself and the later tests
   that use the ``roofline`` fixture; each test then takes the kernels of its own NVTX ranges from that run.
   A test the batch could not count (crash or timeout in it or before it, a failure in the child, a report
   without range names) gets a child of its own: :func:`pytest_roofline.counters.ncu.backend.profile_node`
   re-runs it under ncu, where ``roofline.measure`` opens an NVTX range around one call of ``fn``
   (:mod:`pytest_roofline.counters.ncu.child`). The kernels of all ranges, against the sum of the parent's
   region times, give the test's verdict. ncu's own per-kernel times (``--clock-control none``, cold caches)
   stay on the samples: the chart draws them as timed points and the diagnostics rank kernels by them; the
   fraction does not use them.

The functions of :mod:`pytest_roofline.counters.ncu.backend` are looked up through the module at call time
(``backend.profile_node``, ``backend.find_ncu``, ``backend.detect_compute_capability``), so tests substitute a
recorded report for the ncu run by patching them.

pytest-xdist: each worker profiles its own tests, batched per module (a worker does not know which later tests it
will get). ncu serializes profiling across processes with its lock
file, and ``profile_node`` takes a file lock of its own around each run (so a worker's timeout counts its own
run, not the wait), so workers profile one at a time. The workers' timed loops still run side by side, which
disturbs their times as in any parallel run: for gating, run roofline tests without ``-n``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, TypedDict, TypeVar

from pytest_roofline.counters import CounterBase
from pytest_roofline.counters.ncu import backend
from pytest_roofline.counters.ncu import batch as batch_module
from pytest_roofline.counters.ncu.command import DEFAULT_CACHE_CONTROL, DEFAULT_CLOCK_CONTROL
from pytest_roofline.counters.ncu.diagnostics import Diagnostics, diagnostics_dict, format_diagnostics, format_seconds
from pytest_roofline.errors import NcuUnavailable
from pytest_roofline.model import KernelSample, Machine, MissingCeilingError

T = TypeVar("T")


class _Timed(Protocol):
    @property
    def median_s(self) -> float: ...


class _PendingRegion(Protocol):
    @property
    def timing(self) -> _Timed: ...


class PendingRegions(Protocol):
    """What a profile completes of ``measure``'s Recorder: the regions timed bare that wait for their counts."""

    @property
    def pending(self) -> Sequence[_PendingRegion]: ...

    def judge_pending(self, counter_name: str, kernels: Sequence[KernelSample],
                      notes: Sequence[str] = ()) -> object: ...


# The NVIDIA driver's switch for non-admin counter access (see backend.PERMISSION_FIX).
DRIVER_PARAMS = Path("/proc/driver/nvidia/params")

NCU_CLOCK_POLICY: dict[str, str] = {
    "time": "parent's bare timed loop: unprofiled, device-synchronized, normal clocks (the fraction uses it)",
    "ncu_clock_control": DEFAULT_CLOCK_CONTROL,
    "ncu_cache_control": DEFAULT_CACHE_CONTROL,
    "kernel_times": "ncu, per kernel, cold caches: drawn on the chart and ranked in the diagnostics only",
}


@dataclass(frozen=True)
class NcuSetup:
    ncu: str
    cc: tuple[int, int]


@dataclass(frozen=True)
class CounterChoice:
    """The counter a session uses; ``warning`` says why ``auto`` did not pick ncu on a machine with a GPU."""

    name: str
    setup: NcuSetup | None = None
    warning: str | None = None


class NcuDeferredCounter(CounterBase):
    """The counter of the parent process: calls ``fn`` once; the counts come later from the profiled child."""

    name = "ncu"
    deferred = True

    def count(
        self, fn: Callable[..., T], args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> tuple[T, list[KernelSample]]:
        return fn(*args, **kwargs), []


def counters_restricted(params_file: Path | None = None, euid: int | None = None) -> bool:
    """True when the driver lets only admins read performance counters and this process is not root.

    Only a cheap early hint for ``auto`` (a container with CAP_SYS_ADMIN may still be allowed): ncu's own
    ERR_NVGPUCTRPERM stays the authority.
    """
    try:
        text = (params_file or DRIVER_PARAMS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    restricted = any(line.replace(" ", "") == "RmProfilingAdminOnly:1" for line in text.splitlines())
    return restricted and (os.geteuid() if euid is None else euid) != 0


def _missing_ncu_text() -> str:
    return backend.missing_ncu_text()


def choose_counter(requested: str) -> CounterChoice:
    """Resolve ``--roofline-counter``. ``ncu`` raises :class:`NcuUnavailable` when it cannot run here."""
    if requested == "ncu":
        return CounterChoice("ncu", _explicit_ncu_setup())
    if requested != "auto":
        return CounterChoice(requested)
    cc = backend.detect_compute_capability()  # imports torch or CuPy: only once a measurement needs a counter
    if cc is None:
        return CounterChoice("analytic")  # no GPU: nothing for ncu to profile, nothing to warn about
    executable = backend.find_ncu()
    if executable is None:
        return CounterChoice("analytic", warning=fallback_message(_missing_ncu_text()))
    if counters_restricted():
        return CounterChoice("analytic", warning=fallback_message(backend.PERMISSION_FIX))
    return CounterChoice("ncu", NcuSetup(executable, cc))


def _explicit_ncu_setup() -> NcuSetup:
    executable = backend.find_ncu()
    if executable is None:
        raise NcuUnavailable(f"--roofline-counter=ncu: {_missing_ncu_text()}")
    cc = backend.detect_compute_capability()
    if cc is None:
        raise NcuUnavailable(
            "--roofline-counter=ncu needs a CUDA GPU visible to PyTorch or CuPy in the pytest process, and none "
            "was found (check the driver, CUDA_VISIBLE_DEVICES, and that torch or cupy is a CUDA build); "
            "use --roofline-counter=analytic on machines without a GPU"
        )
    return NcuSetup(executable, cc)


def fallback_message(reason: str) -> str:
    return (f"roofline: --roofline-counter=auto uses the analytic counter instead of ncu for the rest of this "
            f"session. {reason} ('pytest-roofline doctor' checks this runner check by check; "
            "--roofline-counter=analytic silences this warning)")


def child_pytest_args(rootdir: Path, inifile: Path | None, xdist: bool) -> list[str]:
    """Arguments for the profiled child, which runs from ``rootdir`` so that the node id resolves."""
    args = ["--rootdir", str(rootdir)]
    if inifile is not None:
        args += ["-c", str(inifile)]
    # The child has no gate, so a strict xfail on a roofline test would fail it for passing.
    args.append("--runxfail")
    if xdist:
        args += ["-n", "0"]  # one node, in-process, whatever addopts say
    return args


class NcuBatches:
    """A session's batched ncu runs: what each gave every node id, taken once by the test it belongs to."""

    def __init__(self) -> None:
        self.profiles: dict[str, backend.NcuProfile] = {}
        self.errors: dict[str, Exception] = {}
        self.fallback: dict[str, str] = {}  # node id -> why it needs a child of its own
        self.runs: list[batch_module.BatchOutcome] = []
        self._usable: bool | None = None

    def usable(self, ncu: str | None) -> bool:
        """Batches need ``ncu_report`` to split the report by range; checked once per session."""
        if self._usable is None:
            self._usable = batch_module.can_split(ncu)
        return self._usable

    def profile_for(
        self, nodeid: str, candidates: Sequence[str],
        run: Callable[[list[str]], batch_module.BatchOutcome],
    ) -> tuple[backend.NcuProfile | None, str | None]:
        """The batch's profile of ``nodeid`` (running a batch of ``candidates`` first when none has it), or
        (None, why) when it needs a child of its own. A single candidate runs the per-test child directly."""
        known = nodeid in self.profiles or nodeid in self.errors or nodeid in self.fallback
        if not known:
            todo = [n for n in dict.fromkeys([nodeid, *candidates])
                    if n not in self.profiles and n not in self.errors and n not in self.fallback]
            if len(todo) < 2:
                return None, None
            outcome = run(todo[:batch_module.MAX_BATCH])
            self.runs.append(outcome)
            self.profiles.update(outcome.profiles)
            self.errors.update(outcome.errors)
            self.fallback.update({n: outcome.notes.get(n, "") for n in outcome.fallback})
        if nodeid in self.errors:
            raise self.errors.pop(nodeid)
        if nodeid in self.profiles:
            return self.profiles.pop(nodeid), None
        why = self.fallback.pop(nodeid, None)
        return None, (f"profiled in a child of its own: {why}" if why else None)


class NcuBatch(TypedDict):
    batched: bool
    note: str | None  # why the test was profiled in a child of its own


class NcuSection(TypedDict, total=False):
    """results.json's ``ncu`` field of a profiled test (docs/results.md): the report and logs, what was
    profiled, the diagnostics; or, where profiling failed, the error and its logs."""

    report: str
    logs: list[str]
    command: list[str]
    compute_capabilities: list[str]
    devices: list[str]
    launches: int
    kernel_time_s: float | None
    replay_passes: int | None
    clock: object  # the report's clock block, as the report gives it
    warnings: list[str]
    diagnostics: Diagnostics
    batch: NcuBatch  # profiled in a batch of tests: whether it was, and why not
    error: str


class NcuFields(TypedDict):
    """The fields a profiled test adds to its record."""

    clock_policy: dict[str, str]
    definitions: dict[str, str]
    ncu: NcuSection


@dataclass
class NcuOutcome:
    """What a profiled test adds to its entry: artifacts, results.json fields, lines for a failure message."""

    artifacts: list[str] = field(default_factory=list)
    extra: NcuFields | None = None
    details: list[str] = field(default_factory=list)


def profile_test(
    recorder: PendingRegions,
    nodeid: str,
    directory: Path,
    machine: Machine,
    setup: NcuSetup,
    *,
    cwd: Path,
    extra_pytest_args: Sequence[str] = (),
    batch: Sequence[str] = (),
    batches: NcuBatches | None = None,
    full: bool = False,
) -> NcuOutcome:
    """Profile ``nodeid`` under ncu and judge the recorder's pending regions with its kernels.

    ``batch``: the node ids of this session that may need counts next (``nodeid`` first); with ``batches``,
    they are profiled in one child (:mod:`pytest_roofline.counters.ncu.batch`) and later tests take their
    counts from it; a test the batch could not count gets a child of its own.

    Raises the backend's exceptions (:mod:`pytest_roofline.counters.ncu.backend`); the plugin maps them to outcomes.
    """
    # Absolute: ncu writes the report and its log from the child's working folder (the rootdir).
    folder = Path(directory).absolute()
    profile, batch_note = None, None
    if batches is not None and batches.usable(setup.ncu):
        profile, batch_note = batches.profile_for(nodeid, batch, lambda ids: batch_module.profile_batch(
            ids, folder, cc=setup.cc, ncu=setup.ncu, cwd=cwd, extra_pytest_args=list(extra_pytest_args),
            full=full))
    if profile is None:
        try:
            profile = backend.profile_node(nodeid, folder, cc=setup.cc, ncu=setup.ncu, cwd=cwd,
                                           extra_pytest_args=list(extra_pytest_args))
        except backend.NcuBackendError as exc:
            if batch_note:  # e.g. the batch died in this test: say so beside the per-test child's failure
                exc.args = (f"{exc}\n({batch_note})", *exc.args[1:])
            raise
    report = profile.report
    kernels, notes = restrict_to_machine(profile.samples, machine)
    if batch_note:
        notes.append(batch_note)
    notes += [note for note in (report.clock_note, *report.warnings) if note]
    if report.total_time_s:
        timed_here = sum(pending.timing.median_s for pending in recorder.pending)
        notes.append(f"ncu kernel time {format_seconds(report.total_time_s)} (cold caches) vs "
                     f"{format_seconds(timed_here)} timed unprofiled here; the fraction uses the time measured here")
    recorder.judge_pending("ncu", kernels, notes)
    section = _ncu_section(profile, machine)
    if batch_note is not None or profile.ncu_log.name.startswith("ncu-batch-"):
        section["batch"] = {"batched": batch_note is None, "note": batch_note}
    return NcuOutcome(
        artifacts=[str(profile.report_path)],
        extra={"clock_policy": dict(NCU_CLOCK_POLICY), "definitions": dict(report.definitions),
               "ncu": section},
        details=[f"ncu report: {profile.report_path} (open it in Nsight Compute)",
                 *format_diagnostics(report.kernels, machine).splitlines()],
    )


def _ncu_section(profile: backend.NcuProfile, machine: Machine) -> NcuSection:
    report = profile.report
    passes = [k.replay_passes for k in report.kernels if k.replay_passes is not None]
    return {
        "report": str(profile.report_path),
        "logs": [str(profile.ncu_log), str(profile.child_log)],
        "command": list(profile.argv),
        "compute_capabilities": list(report.compute_capabilities),
        "devices": list(report.devices),
        "launches": report.launch_count,
        "kernel_time_s": report.total_time_s,
        "replay_passes": max(passes) if passes else None,
        "clock": report.to_dict()["clock"],
        "warnings": list(report.warnings),
        "diagnostics": diagnostics_dict(report.kernels, machine),
    }


def error_section(exc: BaseException) -> NcuSection:
    """results.json's ``ncu`` entry of a test whose profiling failed."""
    logs = [str(path) for path in getattr(exc, "log_paths", ())]
    return {"error": str(exc), "logs": logs}


def _has_level(machine: Machine, level: str) -> bool:
    try:
        machine.bandwidth_for(level)
    except MissingCeilingError:
        return False
    return True


def restrict_to_machine(kernels: Sequence[KernelSample], machine: Machine) -> tuple[list[KernelSample], list[str]]:
    """Drop the precisions and memory levels the machine has no ceiling for, with a note saying so.

    ncu counts everything the GPU did (e.g. fp8 Tensor Core work, L1 traffic), while a characterization may lack
    some roofs; judging the rest keeps the verdict defined, and the note says the bound is incomplete.
    """
    precisions = sorted({p for k in kernels for p, v in k.flops.items() if v > 0 and p not in machine.peak_flops})
    levels = sorted({lv for k in kernels for lv, v in k.bytes.items() if v > 0 and not _has_level(machine, lv)})
    if not precisions and not levels:
        return list(kernels), []
    kept = [replace(k, flops={p: v for p, v in k.flops.items() if p not in precisions},
                    bytes={lv: v for lv, v in k.bytes.items() if lv not in levels}) for k in kernels]
    missing = ", ".join([*(f"compute {p}" for p in precisions), *(f"memory {lv}" for lv in levels)])
    note = (f"machine {machine.name!r} has no ceiling for {missing}: that work is left out of the lower bound, "
            "so the fraction is a lower estimate")
    return kept, [note]
