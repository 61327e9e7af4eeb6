"""The twin's side of a call site: run the call, answer this side's turns (:func:`.lockstep.follow`), and, when
asked (one REF twin per site), count one more call and send back its own region (time, work, fraction judged on
the roofs the comparing side used)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_roofline.ab.channel import Channel
from pytest_roofline.ab.cuda_turns import event_runner
from pytest_roofline.ab.lockstep import follow
from pytest_roofline.counters import Counter
from pytest_roofline.fixture_types import Setup
from pytest_roofline.host.devices import synchronizer
from pytest_roofline.measure.regions import R, Recorder
from pytest_roofline.measure.timing import TimingStats, calls_for, prepared_arguments
from pytest_roofline.model import Machine
from pytest_roofline.model.roofline import MachineDict
from pytest_roofline.record.region_record import RegionRecord


class Follower:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.site = 0
        self.following = True  # False once the comparing side ended this test's comparison

    def start_test(self) -> None:
        self.site = 0
        self.following = True

    def measure_site(self, recorder: Recorder, counter: Counter, label: str, fn: Callable[..., R],
                     args: tuple[object, ...], kwargs: Mapping[str, object], setup: Setup | None) -> R:
        """The twin's site timer (``Recorder.site_timer``): run the call, then answer the comparing side's turns."""
        call_args, call_kwargs = prepared_arguments(setup, args, kwargs)
        result = fn(*call_args, **call_kwargs)  # counted only if the comparing side asks for this twin's region
        if not self.following:
            return result
        site = self.site
        self.site += 1

        def judge(timing: TimingStats, roofs: MachineDict | None) -> RegionRecord:
            _, kernels = counter.count(fn, *prepared_arguments(setup, args, kwargs))
            judged_on = Machine.from_dict(roofs) if roofs else None
            region = recorder.region(counter, label, kernels, timing, roofs=judged_on)
            record = region.to_dict()
            record.pop("kernels", None)  # the comparing side needs the sums, not every op
            return record

        wait = synchronizer()
        calls = calls_for(fn, args, kwargs, setup=setup, synchronize=wait)
        runner = None
        if wait is not None:  # a GPU: CUDA events inside each turn, the host synchronized between turns

            runner = event_runner()
        self.following = follow(self.channel, calls, site, label, judge, runner)
        return result
