"""The comparing side's site timer: each call site of a test timed in process pairs, twins of this checkout
against twins of REF (:class:`.pool.PoolLink`); the Recorder hands its call sites here (``Recorder.site_timer``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from pytest_roofline.ab.code_trace import untraced
from pytest_roofline.ab.reach import TestReach
from pytest_roofline.counters import Counter
from pytest_roofline.fixture_types import Setup
from pytest_roofline.host.devices import synchronizer
from pytest_roofline.measure.device_roofs import machine_device, work_device
from pytest_roofline.measure.gpu_l2 import paired
from pytest_roofline.measure.probes import rewarm_pays, roofline_bound
from pytest_roofline.measure.regions import R, Recorder, Region
from pytest_roofline.measure.timing import side_stats, time_callable
from pytest_roofline.model import KernelSample
from pytest_roofline.record.region_record import SiteCompare

UNCHANGED_NOTE = "unchanged at REF: not compared (no change between REF and this checkout reaches it)"


class PairedSites:
    """``reach``: this test's comparison (its view of the pool once the change reaches it); ``tolerance``:
    ``--roofline-compare-max-slowdown`` (or the marker's), when the turns may stop early; None: the auto band."""

    def __init__(self, reach: TestReach, tolerance: float | None) -> None:
        self.reach = reach
        self.tolerance = tolerance

    def measure_site(self, recorder: Recorder, counter: Counter, label: str, fn: Callable[..., R],
                     args: tuple[object, ...], kwargs: Mapping[str, object], setup: Setup | None) -> R:
        """Count the call here, then time it in turns with REF's twins, both sides on the cores chosen here.
        No live probe: both sides see the same roofs, and the pairing cancels the host's drift. A deferred
        counter's call site (its counts come from another process) is timed here alone."""
        if counter.deferred:
            return recorder.measure_here(counter, label, fn, args, kwargs, setup)
        result, kernels = recorder.count(counter, label, fn, args, kwargs, setup)  # traced: what the call runs
        link = self.reach.next_site()
        if link is None:
            with untraced():  # a trace hook beside timed calls would change the fraction
                self._time_here(recorder, counter, label, kernels, fn, args, kwargs, setup)
            return result
        started = time.monotonic()
        with recorder.placement() as placed:
            cores = list(placed.used) if placed is not None else None
            roofs = recorder.machine_for(placed, work_device(counter))
            # an untimed call before each timed turn where it warms what matters (this side's numbers rule both,
            # with the call's time the pair measures)
            placed_kernels, _ = recorder.placed_kernels(counter, kernels, roofs)  # bytes at the level serving them
            t_min = roofline_bound(placed_kernels, roofs)[0]  # the call takes at least this long

            def rewarm(call_s: float) -> bool:
                return rewarm_pays(counter.footprint_bytes, max(t_min, call_s), roofs)

            site = link.measure_site(label, cores, roofs.to_dict(), recorder.policy, self.tolerance, rewarm)
            self.reach.cost.paired_s += time.monotonic() - started
            region: Region
            if site is None:
                l2 = recorder.l2_plan(counter, kernels, placed)
                timing = time_callable(fn, args, kwargs, policy=recorder.policy, synchronize=synchronizer(),
                                       setup=setup, flush=l2.flush)
                region = recorder.region(counter, label, kernels, timing, placed, l2=l2)
                region = replace(region, compare=SiteCompare(compared=False),
                                 notes=[*region.notes, "not compared: REF's test has no call site here"])
            else:  # this side's time and fraction: this checkout's twins' paired turns (this process times none)
                timing = side_stats(site.pooled("this"), not site.budget_limited, site.measure_s)
                region = recorder.region(counter, label, kernels, timing, placed,
                                         l2=paired(machine_device(roofs) == "cuda"))
                compare: SiteCompare = {"compared": True, **site.summary(), "ref": site.ref_region(),
                                        "ref_timing": side_stats(site.pooled("ref"), True, 0.0).to_dict()}
                region = replace(region, compare=compare)
        recorder.add_region(region, (counter, fn, args, dict(kwargs), setup))
        return result

    def _time_here(self, recorder: Recorder, counter: Counter, label: str, kernels: list[KernelSample],
                   fn: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object],
                   setup: Setup | None) -> None:
        """Time a call site this side alone, as a plain session does (the live probe included), with the counts
        already made: unchanged at REF, or no pair could run the test (its record says which)."""
        with recorder.placement() as placed:
            probe = recorder.probe_for(counter, kernels, placed)
            l2 = recorder.l2_plan(counter, kernels, placed)
            timing = time_callable(fn, args, kwargs, policy=recorder.policy, synchronize=synchronizer(), setup=setup,
                                   before_timed_call=probe, flush=l2.flush)
        region = recorder.region(counter, label, kernels, timing, placed, probe, l2=l2)
        if self.reach.unchanged:
            region = replace(region, compare=SiteCompare(compared=False, unchanged=True),
                             notes=[*region.notes, UNCHANGED_NOTE])
        else:
            region = replace(region, compare=SiteCompare(compared=False),
                             notes=[*region.notes, "not compared: no process pair could run the test"])
        recorder.add_region(region, (counter, fn, args, dict(kwargs), setup))
