"""The comparing side's site timer: each call site of a test timed in process pairs, twins of this checkout
against twins of REF (:class:`.pool.PoolLink`); the Recorder hands its call sites here (``Recorder.site_timer``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from pytest_roofline.ab.pool import PoolLink
from pytest_roofline.counters import Counter
from pytest_roofline.host.devices import synchronizer
from pytest_roofline.measure.device_roofs import work_device
from pytest_roofline.measure.probes import rewarm_pays, roofline_bound
from pytest_roofline.measure.regions import R, Recorder, Region
from pytest_roofline.measure.timing import Setup, side_stats, time_callable


class PairedSites:
    """``link``: this test's view of the pool; ``tolerance``: ``--roofline-compare-max-slowdown`` (or the
    marker's), when the turns may stop early; None: the auto band."""

    def __init__(self, link: PoolLink, tolerance: float | None) -> None:
        self.link = link
        self.tolerance = tolerance

    def measure_site(self, recorder: Recorder, counter: Counter, label: str, fn: Callable[..., R],
                     args: tuple[object, ...], kwargs: Mapping[str, object], setup: Setup | None) -> R:
        """Count the call here, then time it in turns with REF's twins, both sides on the cores chosen here.
        No live probe: both sides see the same roofs, and the pairing cancels the host's drift. A deferred
        counter's call site (its counts come from another process) is timed here alone."""
        if counter.deferred:
            return recorder.measure_here(counter, label, fn, args, kwargs, setup)
        result, kernels = recorder.count(counter, label, fn, args, kwargs, setup)
        with recorder.placement() as placed:
            cores = list(placed.used) if placed is not None else None
            roofs = recorder.machine_for(placed, work_device(counter))
            # an untimed call before each timed turn where it warms what matters (this side's numbers rule both)
            placed_kernels, _ = recorder.placed_kernels(counter, kernels, roofs)  # bytes at the level serving them
            rewarm = rewarm_pays(counter.footprint_bytes, roofline_bound(placed_kernels, roofs)[0], roofs)
            site = self.link.measure_site(label, cores, roofs.to_dict(), recorder.policy, self.tolerance, rewarm)
            region: Region
            if site is None:
                timing = time_callable(fn, args, kwargs, policy=recorder.policy, synchronize=synchronizer(),
                                       setup=setup)
                region = recorder.region(counter, label, kernels, timing, placed)
                region = replace(region, compare={"compared": False},
                                 notes=[*region.notes, "not compared: REF's test has no call site here"])
            else:  # this side's time and fraction: this checkout's twins' paired turns (this process times none)
                timing = side_stats(site.pooled("this"), not site.budget_limited, site.measure_s)
                region = recorder.region(counter, label, kernels, timing, placed)
                region = replace(region, compare={"compared": True, **site.summary(), "ref": site.ref_region(),
                                                  "ref_timing": side_stats(site.pooled("ref"), True, 0.0).to_dict()})
        recorder.add_region(region, (counter, fn, args, dict(kwargs), setup))
        return result
