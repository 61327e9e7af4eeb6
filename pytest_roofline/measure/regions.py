"""Measuring regions: count the work in one pass, time the callable bare in another, judge it.

Plain Python; the pytest fixture in :mod:`pytest_roofline.plugin` is a thin wrapper around
:class:`Recorder`, and scripts can use it directly.

A *deferred* counter (``deferred = True``, the ncu counter) cannot count in this process: its regions are
timed here and kept as :class:`PendingRegion` s until the counts arrive from a profiled re-run of the test
(:meth:`Recorder.judge_pending`), or until another counter counts them after all (:meth:`Recorder.count_pending`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from pytest_roofline.counters import Counter
from pytest_roofline.counters.declared import DeclaredCounter
from pytest_roofline.errors import CounterUnavailableError  # noqa: F401 (re-exported under its old name)
from pytest_roofline.fixture_types import Setup
from pytest_roofline.host.devices import cuda_in_use, synchronizer
from pytest_roofline.measure import probes
from pytest_roofline.measure.cuda_probe import device_index
from pytest_roofline.measure.device_roofs import (
    gating_device,
    judge_live,
    machine_device,
    main_memory,
    placement_view,
    work_device,
)
from pytest_roofline.measure.gpu_l2 import ON_CPU, L2Flush, L2Plan, mixed, plan, torch_flush, wants_flush
from pytest_roofline.measure.ops.times import op_fields, time_ops
from pytest_roofline.measure.timing import (
    DEFAULT_POLICY,
    TimingPolicy,
    TimingStats,
    prepared_arguments,
    time_callable,
)
from pytest_roofline.model import KernelSample, Machine, Verdict, combine, evaluate_region, sum_maps
from pytest_roofline.model.above_one import above_one_note
from pytest_roofline.model.placement import place_working_set
from pytest_roofline.record.region_record import KernelRecord, RegionRecord, SiteCompare
from pytest_roofline.record.tests import Measured

if TYPE_CHECKING:
    from pytest_roofline.host.cores import Placement, Planner
    from pytest_roofline.measure.ops.times import OpReport
    from pytest_roofline.measure.probes import ProbeSchedule, ProbeSummary, RateProbe
    from pytest_roofline.model.op_trace import TracedOp

R = TypeVar("R")  # what the measured callable returns: handed back to the test as it is

# A call the Recorder can time again (confirm, the contended re-measure): counter, fn, args, kwargs, setup.
Call = tuple[Counter, Callable[..., object], tuple[object, ...], dict[str, object], "Setup | None"]

# A call site whose one call outlasts --roofline-max-time runs 1 + 1 + 3 calls (counted, warm-up, timed), once:
# neither --roofline-confirm nor the contended re-measure times it again (docs/writing-tests.md).
OVER_BUDGET_NOTE = ("not measured again: one call takes longer than the time budget (--roofline-max-time), so it "
                    "runs its minimum of calls once")


class SiteTimer(Protocol):
    """Times a call site in place of the Recorder's own loop: in an A/B session, the comparing side's process
    pairs (``ab.site_timer.PairedSites``) and the turns a twin answers (``ab.follower.Follower``). It counts and
    times through the Recorder's public steps (:meth:`Recorder.count`, :meth:`Recorder.region`,
    :meth:`Recorder.add_region`, :meth:`Recorder.measure_here`) and returns the call's result."""

    def measure_site(self, recorder: Recorder, counter: Counter, label: str, fn: Callable[..., R],
                     args: tuple[object, ...], kwargs: Mapping[str, object], setup: Setup | None) -> R: ...


@dataclass(frozen=True)
class Region:
    """One measured call site: its kernels, its timing and its verdict."""

    label: str
    counter: str
    kernels: list[KernelSample]
    timing: TimingStats
    verdict: Verdict
    notes: list[str] = field(default_factory=list)
    parts: list[tuple[str, TimingStats]] = field(default_factory=list)  # call sites timed apart, then judged as one
    placement: Placement | None = None  # where it was measured (None: not placed)
    uncounted: dict[str, int] = field(default_factory=dict)  # FLOP-bearing ops without a rule -> their bytes
    probe: ProbeSummary | None = None  # the live DRAM probe beside its timed calls (probes.summary)
    confirmed: tuple[float, float] | None = None  # fractions of a first and a confirming measurement
    ops: OpReport | None = None  # the per-op timing pass (--roofline-ops), None when not run
    compare: SiteCompare | None = None  # --roofline-compare: the pairs with REF's twin and REF's region
    device: str | None = None  # cpu|cuda: where its work ran, whose roofs judged it (device_roofs)
    gpu_l2: str | None = None  # a GPU call site's timed calls began with their L2 flushed or warm (gpu_l2)

    def kernel_dicts(self) -> list[KernelRecord]:
        """Each kernel's record; with per-op times, also its t_min, bound, own fraction and lost time."""
        out: list[KernelRecord] = []
        for kernel in self.kernels:
            record: KernelRecord = {**kernel.to_dict()}
            row = self.ops.row(kernel.name) if self.ops is not None else None
            if row is not None:
                record.update(op_fields(row))
            out.append(record)
        return out

    def to_dict(self) -> RegionRecord:
        out: RegionRecord = {
            "label": self.label,
            "counter": self.counter,
            "timing": self.timing.to_dict(),
            **self.verdict.to_dict(),
            "kernels": self.kernel_dicts(),
            "notes": list(self.notes),
            "uncounted_ops": dict(self.uncounted),
        }
        if self.parts:
            out["parts"] = [{"label": label, "timing": timing.to_dict()} for label, timing in self.parts]
        if self.placement is not None:
            out["cores"] = self.placement.to_dict()
        if self.probe is not None:
            out["probe"] = dict(self.probe)
        if self.confirmed is not None:
            out["confirmed"] = {"first": self.confirmed[0], "second": self.confirmed[1]}
        if self.ops is not None:
            out["ops"] = self.ops.to_dict()
        if self.compare is not None:
            out["compare"] = self.compare.copy()
        if self.device is not None:
            out["device"] = self.device
        if self.gpu_l2 is not None:
            out["gpu_l2"] = self.gpu_l2
        return out


@dataclass
class PendingRegion:
    """A call site timed here whose counts come later (a deferred counter such as ncu)."""

    label: str
    timing: TimingStats
    # The call, kept so that another counter can count it if profiling is unavailable; dropped once judged,
    # so a session does not hold every test's tensors.
    call: tuple[Callable[..., object], tuple[object, ...], dict[str, object]] | None
    l2: L2Plan = ON_CPU  # how its timed calls found the GPU's L2 (gpu_l2)


def sum_timings(timings: Sequence[TimingStats]) -> TimingStats:
    """Timing of call sites run one after another: medians, quartiles and means add (an approximation for the
    quartiles, as the parts were timed apart); the spread adds in quadrature, as for independent noise."""
    if len(timings) == 1:
        return timings[0]
    return TimingStats(
        median_s=sum(t.median_s for t in timings),
        min_s=sum(t.min_s for t in timings),
        max_s=sum(t.max_s for t in timings),
        q1_s=sum(t.q1_s for t in timings),
        q3_s=sum(t.q3_s for t in timings),
        mean_s=sum(t.mean_s for t in timings),
        stdev_s=math.sqrt(sum(t.stdev_s**2 for t in timings)),
        rounds=sum(t.rounds for t in timings),
        warmup_rounds=sum(t.warmup_rounds for t in timings),
        stable=all(t.stable for t in timings),
        measure_s=sum(t.measure_s for t in timings),
        budget_limited=any(t.budget_limited for t in timings),
        # Per-call samples and faults stay with each part: the parts' calls do not pair up.
    )


def timing_notes(timing: TimingStats) -> list[str]:
    """What the reader of a verdict must know about how its time was taken."""
    notes = []
    if timing.budget_limited:
        notes.append(f"{timing.rounds} timed calls of {timing.median_s:.3g} s (the minimum): the budget was spent; "
                     "raise --roofline-max-time for more")
    if timing.faults_per_call > 0:
        notes.append(f"{timing.faults_per_call:.0f} page faults per timed call: the time includes first touch of "
                     "fresh memory")
    return notes


def counter_notes(counter: Counter) -> list[str]:
    """Blind spots a counter reported: ops it ran but could not count FLOPs for, when they moved data."""
    uncounted: dict[str, int] = dict(counter.uncounted_bytes)
    errors: dict[str, str] = dict(counter.errors)
    notes = [f"could not count {op}: {error}" for op, error in errors.items()]
    if uncounted:
        names = ", ".join(sorted(uncounted, key=lambda op: -uncounted[op])[:5])
        notes.append(f"no FLOP rule for {names}: their FLOPs are missing (bytes are counted)")
    return notes


def _label_of(fn: Callable[..., object]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


class Recorder:
    """Measures the regions of one test.

    When ``enabled`` is false, :meth:`measure` only calls the function once and returns its result, so a
    suite still checks correctness without paying for measurement.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        machine: Callable[[], Machine],
        counter: Callable[[], Counter],
        policy: TimingPolicy = DEFAULT_POLICY,
    ) -> None:
        self.enabled = enabled
        self._machine = machine
        self._counter = counter
        self.policy = policy
        self.regions: list[Region] = []
        self.pending: list[PendingRegion] = []
        self.cores: Planner | None = None  # measure on cores of its own (None: wherever the OS runs it)
        self.machine_for_cores: Callable[[int], Machine] | None = None  # roofs for that many cores
        self.contended: list[tuple[int, Counter, Callable[..., object], tuple[object, ...], dict[str, object],
                                   Setup | None]] = []
        self.probe_mode = "off"  # "live": time DRAM-bound call sites beside a probe of the DRAM roof
        self.ops_mode = "off"  # always|failed|off: the per-op timing pass (op_times); "failed": see time_ops()
        # probes.DramProbe per (threads, working set) (cuda_probe.CudaDramProbe under a negative key), shared by
        # the session
        self.probe_cache: dict[tuple[int, int] | int, RateProbe] = {}
        self.gpu_l2 = "auto"  # auto|flush|warm: a GPU call site's L2 before each timed call (gpu_l2)
        self.l2_flushes: dict[int, L2Flush] = {}  # per CUDA device, shared by the session
        # index of each region measured here -> (counter, fn, args, kwargs, setup): what confirm() times again
        self.calls: dict[int, Call] = {}
        self.site_timer: SiteTimer | None = None  # --roofline-compare: call sites timed in process pairs
        # roofs of another device than the session's, for a core count (None: all cores): in a CUDA session,
        # host code is judged on the CPU's (device_roofs); None: every call site on the session's roofs
        self.machine_for_device: Callable[[str, int | None], Machine] | None = None

    def measure(self, fn: Callable[..., R], /, *args: object, setup: Setup | None = None, **kwargs: object) -> R:
        """Count and time ``fn(*args, **kwargs)``; return the result of its counted call.

        ``setup``, if given, runs before every call (the counted one too), untimed and uncounted: it resets
        state that ``fn`` changes in place, or returns fresh ``(args, kwargs)`` for the call.
        """
        if not self.enabled:
            call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
            return fn(*call_args, **call_kwargs)
        return self._measure(self._counter(), _label_of(fn), fn, args, kwargs, setup)

    def declare(
        self,
        flops: float | Mapping[str, float] | None = None,
        bytes: float | Mapping[str, float] | None = None,
        *,
        precision: str = "fp32",
        level: str | None = None,
        name: str | None = None,
        device: str = "cpu",
    ) -> DeclaredRegion:
        """Declare the work of code no counter can see; ``.measure(fn, *args)`` then times it. ``device`` is
        where that work runs: ``"cpu"`` (host code: judged on the CPU's roofs, bytes at ``DRAM`` by default)
        or ``"cuda"`` (bytes at ``HBM`` by default)."""
        counter = DeclaredCounter.from_user(flops, bytes, precision=precision, level=level,
                                            name=name or "declared", device=device)
        return DeclaredRegion(self, counter, name)

    def _measure(
        self, counter: Counter, label: str, fn: Callable[..., R], args: tuple[object, ...],
        kwargs: Mapping[str, object], setup: Setup | None = None,
    ) -> R:
        _refuse_lazy(fn, label)
        if self.site_timer is not None:
            return self.site_timer.measure_site(self, counter, label, fn, args, kwargs, setup)
        return self.measure_here(counter, label, fn, args, kwargs, setup)

    def count(self, counter: Counter, label: str, fn: Callable[..., R], args: tuple[object, ...],
              kwargs: Mapping[str, object], setup: Setup | None) -> tuple[R, list[KernelSample]]:
        """The counted call: its result and the kernels the counter saw."""
        result, kernels = counter.count(fn, *prepared_arguments(setup, args, kwargs))
        _refuse_lazy(fn, label, result)
        return result, kernels

    def measure_here(self, counter: Counter, label: str, fn: Callable[..., R], args: tuple[object, ...],
                     kwargs: Mapping[str, object], setup: Setup | None) -> R:
        """Count the call once, time it bare in this process (beside a live probe where one is wanted), judge it."""
        result, kernels = self.count(counter, label, fn, args, kwargs, setup)
        with self.placement() as placed:
            probe = None if counter.deferred else self.probe_for(counter, kernels, placed)
            l2 = self.l2_plan(counter, kernels, placed)
            timing = time_callable(fn, args, kwargs, policy=self.policy, synchronize=synchronizer(), setup=setup,
                                   before_timed_call=probe, flush=l2.flush)
        if counter.deferred:
            self.pending.append(PendingRegion(label, timing, (fn, args, dict(kwargs)), l2))
        else:
            self.add_region(self.region(counter, label, kernels, timing, placed, probe, l2=l2),
                            (counter, fn, args, dict(kwargs), setup))
            if self.ops_mode == "always":
                self.time_ops([len(self.regions) - 1])
            if placed is not None and placed.contended:  # measured again at the end of the session
                self.contended.append((len(self.regions) - 1, counter, fn, args, dict(kwargs), setup))
        return result

    def placement(self) -> AbstractContextManager[Placement | None]:
        """Cores of its own for one call site (None: wherever the OS runs it)."""
        return self.cores.scope() if self.cores is not None else nullcontext()

    def add_region(self, region: Region, call: Call) -> None:
        """Keep a judged region and the call that made it (what :meth:`confirm` times again)."""
        self.regions.append(region)
        self.calls[len(self.regions) - 1] = call

    def confirm(self) -> bool:
        """Time every region measured here once more and keep, per region, the faster of its two measurements;
        return whether anything was measured again. A gate below its threshold calls this before it fails: a
        real slowdown is slow both times, a host hiccup of a few seconds rarely is. Regions counted by a
        deferred counter (their counts came from another process) are left as they are."""
        again = False
        for index, (counter, fn, args, kwargs, setup) in sorted(self.calls.items()):
            old = self.regions[index]
            if old.compare is not None and old.compare.get("compared"):
                continue  # A/B: paired numbers only, never a solo re-measure
            if old.timing.median_s > self.policy.max_time_s:  # its stated calls once, no more
                self.regions[index] = replace(old, notes=[*old.notes, OVER_BUDGET_NOTE])
                continue
            with self.placement() as placed:
                probe = self.probe_for(counter, old.kernels, placed)
                l2 = self.l2_plan(counter, old.kernels, placed)
                timing = time_callable(fn, args, kwargs, policy=self.policy, synchronize=synchronizer(),
                                       setup=setup, before_timed_call=probe, flush=l2.flush)
            new = self.region(counter, old.label, old.kernels, timing, placed, probe, l2=l2)
            again = True
            first, second = old.verdict.fraction, new.verdict.fraction
            kept = new if second > first else old
            note = (f"below its threshold at first: measured again at once, fraction {first:.3g} then {second:.3g}; "
                    f"the {'second' if kept is new else 'first'} is kept (the faster of the two)")
            # the pairs with REF stay: a confirmation times this side alone
            self.regions[index] = replace(kept, notes=[*kept.notes, note], confirmed=(first, second),
                                          compare=old.compare)
        return again

    def time_ops(self, indices: Sequence[int] | None = None) -> None:
        """Run the per-op timing pass (:mod:`~pytest_roofline.measure.ops.times`) for the regions measured here
        that have none yet and whose counter traced its ops (the analytic counter): each op gets a time from
        ``torch.profiler``, apart from the bare timed loop, whose verdict stands. The gate calls this for a test
        below its threshold under ``--roofline-ops failed``. A failure of the pass becomes a note."""
        if self.ops_mode == "off":
            return
        for index in sorted(self.calls) if indices is None else indices:
            region = self.regions[index]
            counter, fn, args, kwargs, setup = self.calls[index]
            trace = getattr(counter, "trace", None)
            if region.ops is not None or not trace:
                continue
            try:
                kernels, report = self._op_pass(counter, region, trace, fn, args, kwargs, setup)
            except Exception as error:  # noqa: BLE001 - a profiler problem must not hide the verdict
                self.regions[index] = replace(region, notes=[*region.notes, f"per-op timing failed: {error!r}"])
                continue
            self.regions[index] = replace(region, kernels=kernels, ops=report)

    def _op_pass(self, counter: Counter, region: Region, trace: Sequence[TracedOp], fn: Callable[..., object],
                 args: tuple[object, ...], kwargs: Mapping[str, object], setup: Setup | None,
                 ) -> tuple[list[KernelSample], OpReport]:
        wait = synchronizer()
        with self.placement() as placed:
            # the same DRAM probes between calls as the timed loop had: the same cache state at each call's start
            probe = self.probe_for(counter, region.kernels, placed) if region.probe is not None else None
            return time_ops(region.kernels, trace, self.machine_for(placed, region.device), region.timing.median_s,
                            fn, args,
                            kwargs, prepare=lambda: prepared_arguments(setup, args, kwargs),
                            synchronize=wait or (lambda: None), budget_s=self.policy.max_time_s,
                            device="cpu" if wait is None else "cuda", before_call=probe)

    def probe_for(self, counter: Counter, kernels: list[KernelSample], placed: Placement | None,
                   ) -> ProbeSchedule | None:
        """A ``probes.ProbeSchedule`` under ``--roofline-probe live``, else None: for a call site whose bytes
        stream from DRAM (CPU roofs characterized by the ERT kernel), or a memory-bound one whose working set is
        in or at the edge of the last cache (a probe at its own size, ``probes.ProbeSpec.at_footprint``). Runs
        inside the call site's core placement. Work judged on a GPU's roofs gets no probe: it is judged on the
        record's roofs (see ``cuda_probe``)."""
        if self.probe_mode != "live":
            return None

        machine = self.machine_for(placed, work_device(counter))
        if machine_device(machine) == "cuda":
            return None
        footprint = counter.footprint_bytes
        placed_kernels = self.placed_kernels(counter, kernels, machine)[0]
        level_bytes = sum_maps(k.bytes for k in placed_kernels)
        if probes.wants_probe(footprint, machine, level_bytes.get(probes.PROBE_LEVEL, 0.0)):
            spec = probes.ProbeSpec.from_machine(machine)
        elif probes.roofline_bound(placed_kernels, machine)[1].startswith("memory:"):
            # a memory-bound working set in or at the edge of the last cache: probe at its own size
            edge = probes.wants_footprint_probe(footprint, machine, level_bytes)
            spec = probes.ProbeSpec.at_footprint(machine, edge, float(footprint or 0)) if edge else None
        else:
            spec = None
        if spec is None:
            return None
        key = (spec.threads, spec.working_set_bytes)
        probe = self.probe_cache.get(key)
        if probe is None or probe.spec != spec:
            probe = self.probe_cache[key] = probes.DramProbe.build(spec)
        return probes.ProbeSchedule(probe)

    def l2_plan(self, counter: Counter, kernels: list[KernelSample], placed: Placement | None) -> L2Plan:
        """How a call site's timed calls find the GPU's L2 (``gpu_l2.wants_flush``): nothing to say on a CPU;
        a deferred counter (ncu) counts with cold caches. The flush is torch's, on the GPU whose roofs judge it."""
        machine = self.machine_for(placed, work_device(counter)) if cuda_in_use() else None
        if machine is None or machine_device(machine) != "cuda":
            return ON_CPU
        bound = "" if counter.deferred else probes.roofline_bound(
            self.placed_kernels(counter, kernels, machine)[0], machine)[1]
        wanted = wants_flush(self.gpu_l2, counter.deferred, bound, main_memory(machine))
        return plan(wanted, torch_flush(self.l2_flushes, device_index(machine)) if wanted else None)

    @staticmethod
    def placed_kernels(counter: Counter, kernels: list[KernelSample], machine: Machine) -> tuple[list[KernelSample],
                                                                                           str | None]:
        footprint = counter.footprint_bytes  # counters that assume no cache reuse
        if not footprint:
            return kernels, None
        return place_working_set(kernels, footprint, placement_view(machine), from_level=main_memory(machine),
                                 write_allocate=counter.write_allocate_bytes)

    def region(self, counter: Counter, label: str, kernels: list[KernelSample], timing: TimingStats,
               placement: Placement | None = None, probe: ProbeSchedule | None = None,
               roofs: Machine | None = None, l2: L2Plan = ON_CPU) -> Region:
        """One call site judged: against ``roofs`` where given (a twin judges on the comparing side's), else
        the roofs for the cores it ran on and the device its work ran on. Timed with a flushed L2, its bytes
        stay where counted (main memory): the placement's caches were empty."""
        device = work_device(counter)
        machine = roofs if roofs is not None else self.machine_for(placement, device)
        notes = counter_notes(counter) + timing_notes(timing)
        kernels, placed = (kernels, None) if l2.flushed else self.placed_kernels(counter, kernels, machine)
        notes.extend([placed] if placed else [])
        verdict = evaluate_region(kernels, machine, timing.median_s)
        probed = None
        if probe is not None and probe.rates:
            verdict, probed, note = judge_live(kernels, machine, timing, probe, verdict)
            notes.append(note)
        elif unprobed := getattr(probe, "note", None):  # wanted a live probe, could not have one (cuda_probe.Unprobed)
            notes.append(unprobed)
        notes.extend(note for note in [above_one_note(verdict, machine)] if note)
        notes.extend([l2.note] if l2.note else [])
        uncounted = dict(counter.uncounted_bytes)
        return Region(label, counter.name, kernels, timing, verdict, notes, placement=placement,
                      uncounted=uncounted, probe=probed, device=device or machine_device(machine), gpu_l2=l2.state)

    def judge_pending(self, counter_name: str, kernels: Sequence[KernelSample], notes: Sequence[str] = ()) -> Region:
        """Judge every pending region as one: ``kernels`` (from all of them) against the sum of their times.

        A profiler that scopes its kernels to all measured call sites at once (ncu's NVTX filter) cannot tell
        which call site ran which kernel, so the pending regions become one region; their timings stay in
        ``parts``.
        """
        if not self.pending:
            raise ValueError("no pending region to judge")
        parts = [(p.label, p.timing) for p in self.pending]
        timing = sum_timings([t for _, t in parts])
        label = parts[0][0] if len(parts) == 1 else " + ".join(label for label, _ in parts)
        machine = self._machine()
        verdict = evaluate_region(kernels, machine, timing.median_s)
        notes = [*notes, *(note for _, part in parts for note in timing_notes(part))]
        l2 = mixed([p.l2 for p in self.pending])
        notes.extend([l2.note] if l2.note else [])
        region = Region(label, counter_name, list(kernels), timing, verdict, notes,
                        parts if len(parts) > 1 else [], device=machine_device(machine), gpu_l2=l2.state)
        self.regions.append(region)
        self.pending.clear()
        return region

    def count_pending(self, counter: Counter, note: str | None = None) -> None:
        """Count the pending regions with ``counter`` after all (one more call each) and judge them; ``note``
        (why) goes with each region."""
        for pending in self.pending:
            if pending.call is None:
                raise ValueError(f"pending region {pending.label!r} was released and cannot be counted")
            fn, args, kwargs = pending.call
            _, kernels = counter.count(fn, args, kwargs)
            self.regions.append(self.region(counter, pending.label, kernels, pending.timing, l2=pending.l2))
            if note:
                self.regions[-1] = replace(self.regions[-1], notes=[*self.regions[-1].notes, note])
        self.pending.clear()

    def release_pending(self) -> None:
        """Forget the pending calls (their arguments may hold device memory); their timings stay."""
        for pending in self.pending:
            pending.call = None

    def judged_machine(self) -> Machine:
        """The roofs the regions were judged against: those for the cores they ran on (the first placed
        region's when they differ), so that a failure's message and chart agree with its fraction."""
        placements = [r.placement for r in self.regions if r.placement is not None]
        device = self.regions[0].device if self.regions else None
        return self.machine_for(placements[0] if placements else None, device)

    def device(self) -> str | None:
        """The device whose thresholds gate the test (``cuda`` if any call site ran on a GPU)."""
        return gating_device(r.device for r in self.regions)

    def machine_for(self, placed: Placement | None, device: str | None = None) -> Machine:
        """The roofs for a call site on ``placed`` cores whose work ran on ``device`` (None: the session's)."""
        if device is not None and self.machine_for_device is not None and device != machine_device(self._machine()):
            return self.machine_for_device(device, None if placed is None else placed.count)
        if placed is None or self.machine_for_cores is None:
            return self._machine()
        return self.machine_for_cores(placed.count)

    def remeasure_contended(self) -> int:
        """Time the regions that were measured without a free core once more (cores chosen anew) and judge
        them again, notes and all. An uncontended measurement replaces the first; one still contended replaces
        it only when faster (it stays marked contended), else the first is kept. Returns how many regions were
        timed again (a call longer than the budget is not)."""
        redo, self.contended = self.contended, []
        timed = 0
        for index, counter, fn, args, kwargs, setup in redo:
            old = self.regions[index]
            if old.timing.median_s > self.policy.max_time_s:  # its stated calls once, no more
                self.regions[index] = replace(old, notes=[*old.notes, OVER_BUDGET_NOTE])
                continue
            timed += 1
            with self.placement() as placed:
                probe = self.probe_for(counter, old.kernels, placed)
                l2 = self.l2_plan(counter, old.kernels, placed)
                timing = time_callable(fn, args, kwargs, policy=self.policy, synchronize=synchronizer(),
                                       setup=setup, before_timed_call=probe, flush=l2.flush)
            new = self.region(counter, old.label, old.kernels, timing, placed, probe, l2=l2)
            still = placed is not None and placed.contended
            first, second = old.verdict.fraction, new.verdict.fraction
            if still and second <= first:
                note = (f"contended at first (load {_load_text(old.placement)}); measured again at the end of the "
                        f"session, still contended: fraction {second:.3g}; the first ({first:.3g}) is kept")
                self.regions[index] = replace(old, notes=[*old.notes, note])
            else:
                note = (f"contended at first (load {_load_text(old.placement)}, fraction {first:.3g}); measured "
                        f"again at the end of the session" + (", still contended" if still else "")
                        + f": fraction {second:.3g}")
                self.regions[index] = replace(new, notes=[*new.notes, note], ops=old.ops, confirmed=old.confirmed)
            if still:
                self.contended.append((index, counter, fn, args, kwargs, setup))
        return timed

    def is_contended(self) -> bool:
        """Whether any region's last measurement had no free core."""
        return any(r.placement is not None and r.placement.contended for r in self.regions)

    def verdict(self) -> Verdict | None:
        """The combined verdict of every region measured so far (None if nothing was measured)."""
        return combine(r.verdict for r in self.regions) if self.regions else None

    def measured(self) -> Measured:
        """What the call sites measured so far, read at once: what the gates judge and the record holds."""
        verdict = self.verdict()
        if verdict is None:
            return Measured()
        return Measured(verdict, self.judged_machine(), self.device(),
                        tuple(sorted({str(r.device) for r in self.regions if r.device})),
                        "+".join(sorted({r.counter for r in self.regions})), tuple(r.to_dict() for r in self.regions))


def _load_text(placement: Placement | None) -> str:
    load = getattr(placement, "load_on", None)
    return "unknown" if load is None else f"{load:.0%}"


@dataclass(frozen=True)
class DeclaredRegion:
    """Returned by :meth:`Recorder.declare`."""

    recorder: Recorder
    counter: Counter
    name: str | None

    def measure(self, fn: Callable[..., R], /, *args: object, setup: Setup | None = None, **kwargs: object) -> R:
        if not self.recorder.enabled:
            call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
            return fn(*call_args, **call_kwargs)
        return self.recorder._measure(self.counter, self.name or _label_of(fn), fn, args, kwargs, setup)


def _refuse_lazy(fn: Callable[..., object], label: str, result: object = None) -> None:
    """A generator or coroutine function returns at once without running its body: timing it would time
    nothing and read as an impossible fraction ("the roofs are wrong"). Said as what it is, before timing."""
    import inspect

    kind = None
    if inspect.isgeneratorfunction(fn) or inspect.isgenerator(result):
        kind = "a generator"
    elif inspect.isasyncgenfunction(fn) or inspect.isasyncgen(result):
        kind = "an async generator"
    elif inspect.iscoroutinefunction(fn) or inspect.iscoroutine(result):
        if inspect.iscoroutine(result):
            result.close()  # never awaited: no "was never awaited" warning on top of this error
        kind = "a coroutine"
    if kind is not None:
        raise TypeError(f"roofline.measure({label}): the function returns {kind}, so calling it does not run "
                        "its body and there is no work to time; measure a function that does the work, e.g. "
                        "roofline.measure(lambda: list(gen())) for a generator")
