"""What a roofline session keeps: its settings (:mod:`.settings`), the machine, the counter in use, and each
test's entry.

Plain Python (no pytest import), so the plugin stays a thin layer of hooks over it.
"""

from __future__ import annotations

import datetime as _dt
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_roofline.history.results_dir import new_session_id, session_dir
from pytest_roofline.record.outcomes import Outcome
from pytest_roofline.record.tests import NothingCounted, TestRecord
from pytest_roofline.session.settings import MarkerOptions, Settings

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pytest_roofline.counters import Counter
    from pytest_roofline.counters.ncu.deferred import CounterChoice, NcuBatches
    from pytest_roofline.history.baseline import Baseline
    from pytest_roofline.host.cores import Planner
    from pytest_roofline.measure.gpu_l2 import L2Flush
    from pytest_roofline.measure.probes import RateProbe
    from pytest_roofline.measure.regions import Recorder
    from pytest_roofline.model import Machine


@dataclass
class TestEntry:
    __test__: ClassVar[bool] = False  # not a test class, despite its name

    nodeid: str
    min_fraction: float | None
    recorder: Recorder = None  # type: ignore[assignment]  # set when the test asks for the fixture
    outcome: Outcome = "not run"
    artifacts: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # results.json fields: clock_policy, definitions, ncu
    details: list[str] = field(default_factory=list)  # extra lines for a failure message (ncu diagnostics)
    nothing_counted: NothingCounted | None = None  # no FLOPs, no bytes (gates.judge.keep)
    options: MarkerOptions | None = None  # the marker's arguments, read once when the fixture is made
    # its record, built once when the test is done (plugin.ci_output.finish_record) and read by every output
    record: TestRecord | None = None


class RooflineState:
    """Everything the plugin keeps for one session (in ``config.stash``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tests: dict[str, TestEntry] = {}
        self._machine: Machine | None = None
        self.malloc = "default"
        self._choice: CounterChoice | None = None  # resolved on first need
        self._warned = False
        self.ncu_denied: str | None = None  # explicit ncu got ERR_NVGPUCTRPERM: later tests skip at once
        self.ncu_batches: NcuBatches | None = None  # the batched ncu runs of this session
        self.started = _dt.datetime.now(_dt.timezone.utc)
        self.session_id = new_session_id(self.started)
        self.write_error: str | None = None  # results could not be written; said in the summary
        self.results_written = False  # this session's results.json is on disk (the summary names it only then)
        self._by_cores: dict[int, Machine] = {}  # machine per core count, measured or interpolated on first need
        self._host: Machine | None = None  # a CUDA session's CPU roofs, for host code (device_roofs)
        self._host_by_cores: dict[int, Machine] = {}
        self.planner: Planner | None = None  # of this session (or xdist worker), made on first need
        # live probes per (threads, working set): built once a session
        self.probe_cache: dict[tuple[int, int] | int, RateProbe] = {}  # the Recorder's, kept for the session
        self.l2_flushes: dict[int, L2Flush] = {}  # a GPU's L2 flush buffer per device (gpu_l2), built once
        self.make_counter: Callable[[str], Counter | None] = builtin_counter  # the hook, once configured
        # an xdist worker's pinning to its share, held for the whole session
        self._worker_pin: AbstractContextManager[None] | None = None
        self.history_file: str | None = None  # this session's history entry, once written
        self.history_unsent = False  # a remote store refused this session's entry (kept locally): the run fails
        self.store_error: str | None = None  # the baseline's store could not be read: every gate would pass blind
        self.baseline: Baseline | None = None  # loaded before the first test (--roofline-baseline)
        # ab.pool.PoolLink of the test running now (--roofline-compare); that layer sits above this one
        self.compare_link: object = None
        self.compare_ref: dict[str, str] | None = None  # {"ref", "commit", "worktree"} once the twin started
        self.compare_error: str | None = None  # why --roofline-compare could not run; said in the summary
        self.compare_commit: str | None = None  # REF's commit when --roofline-compare last resolved it
        self.compare_skipped: str | None = None  # why --roofline-compare last runs no A/B (the baseline judges)

    @property
    def session_dir(self) -> Path:
        """This session's own folder under ``--roofline-dir``: its results.json and its artifacts."""
        return session_dir(self.settings.directory, self.session_id)

    @property
    def loaded_machine(self) -> Machine | None:
        """The machine if it was characterized or loaded already, else None (never measures)."""
        return self._machine

    def machine(self, progress: Callable[[str], None] | None = None) -> Machine:
        if self._machine is None:
            from pytest_roofline.characterize import machine as machine_mod

            s = self.settings
            if s.machine_file is not None:
                self._machine = machine_mod.load_machine_file(s.machine_file)
            else:
                self._machine = machine_mod.characterize(resolve_device(s.device), fresh=s.recharacterize,
                                                         progress=progress)
        return self._machine

    def machine_for_cores(self, count: int, progress: Callable[[str], None] | None = None) -> Machine:
        """Roofs for ``count`` cores: the session's machine for all of them (and for pinned ceilings, which
        are for the whole machine); fewer are characterized at the core counts around ``count`` on first
        need and interpolated between (``cores.interpolate``)."""
        from pytest_roofline.host import cores

        full = self.machine(progress)
        if count >= len(cores.base_affinity()) or self.settings.machine_file is not None:
            return full
        device = resolve_device_if_loaded(self.settings.device)
        if device != "cpu":
            return full  # a GPU's roofs do not depend on the host cores that launch its work
        total = len(cores.base_affinity())
        if count not in self._by_cores:
            from pytest_roofline.characterize import machine as machine_mod

            measured = {c: full if c == total else machine_mod.characterize(device, cores=c, progress=progress,
                                                                          fresh=self.settings.recharacterize)
                        for c in sorted(set(cores.bracket(count, total)))}
            self._by_cores[count] = cores.interpolate({total: full, **measured}, count)
        return self._by_cores[count]

    def machine_for_device(self, device: str, count: int | None = None,
                           progress: Callable[[str], None] | None = None) -> Machine:
        """Roofs for work that ran on ``device`` when the session's roofs are another device's: in a CUDA
        session, host code (numpy, declared work, CPU tensors) is judged on the CPU's roofs, characterized (or
        loaded from the cache) on first need, for ``count`` cores as :meth:`machine_for_cores` does. A pinned
        machine file is used for every device (the user chose those ceilings); a device other than the CPU
        gets the session's roofs."""
        full = self.machine(progress)
        if device != "cpu" or self.settings.machine_file is not None:
            return full
        from pytest_roofline.characterize import machine as machine_mod
        from pytest_roofline.host import cores

        if self._host is None:
            self._host = machine_mod.characterize("cpu", fresh=self.settings.recharacterize, progress=progress)
        total = len(cores.base_affinity())
        if count is None or count >= total:
            return self._host
        if count not in self._host_by_cores:
            measured = {c: self._host if c == total else machine_mod.characterize("cpu", cores=c, progress=progress,
                                                                                fresh=self.settings.recharacterize)
                        for c in sorted(set(cores.bracket(count, total)))}
            self._host_by_cores[count] = cores.interpolate({total: self._host, **measured}, count)
        return self._host_by_cores[count]

    @property
    def host_machine(self) -> Machine | None:
        """The CPU's roofs a CUDA session judged host code against, once loaded (None before, or never)."""
        return self._host

    @property
    def machines_by_cores(self) -> dict[int, Machine]:
        """Roofs of fewer cores than the machine's that call sites were judged against so far."""
        full = self._machine
        return {count: machine for count, machine in self._by_cores.items() if machine is not full}

    def core_planner(self) -> Planner | None:
        """The session's ``cores.Planner`` (None when cores are not chosen): an xdist worker plans within its
        own share of the cores; with pinned ceilings (for the whole machine) ``auto`` means ``all``."""
        if self.settings.cores is None:
            return None
        if self.planner is None:
            from pytest_roofline.host import cores

            setting = self.settings.cores
            if self.settings.machine_file is not None and setting.mode == "auto":
                setting = cores.CoresSetting("all")
            worker = cores.xdist_worker()
            allowed = cores.base_affinity() if worker is None else cores.worker_share(cores.base_affinity(), *worker)
            kind, _, index = resolve_device_if_loaded(self.settings.device).partition(":")
            self.planner = cores.Planner(setting, allowed, gpu_index=int(index or 0) if kind == "cuda" else None,
                                         machine_cores=len(cores.base_affinity()))
        return self.planner

    def pin_worker(self) -> None:
        """In an xdist worker, keep the whole process (setup code too) on its own share of the cores, thread
        pools sized to it, until :meth:`unpin_worker`; so workers never run on each other's cores."""
        from pytest_roofline.host import cores

        worker = cores.xdist_worker()
        if worker is None or self.settings.cores is None or self._worker_pin is not None:
            return
        self._worker_pin = cores.pinned(cores.worker_share(cores.base_affinity(), *worker))
        self._worker_pin.__enter__()

    def unpin_worker(self) -> None:
        if self._worker_pin is not None:
            self._worker_pin.__exit__(None, None, None)
            self._worker_pin = None

    def choose_counter(self) -> CounterChoice:
        """The session's counter (``ncu_gate.CounterChoice``). ``auto`` is decided here, on first need, so that
        torch or CuPy are imported only once a measurement needs a counter; raises ``NcuUnavailable``."""
        if self._choice is None:
            from pytest_roofline.counters.ncu import deferred as ncu_gate

            self._choice = ncu_gate.choose_counter(self.settings.requested_counter)
            if self._choice.warning:
                self.warn_once(self._choice.warning)
        return self._choice

    @property
    def counter_label(self) -> str | None:
        if self._choice is None:
            return None
        return self._choice.name + (" (auto)" if self.settings.counter == "auto" else "")

    def fall_back_to_analytic(self, reason: str, warn: Callable[[Warning], None] | None = None) -> None:
        """``auto`` found ncu unusable: the analytic counter for the rest of the session, one warning."""
        from pytest_roofline.counters.ncu import deferred as ncu_gate

        self._choice = ncu_gate.CounterChoice("analytic")
        self.warn_once(ncu_gate.fallback_message(reason), warn)

    def warn_once(self, message: str, warn: Callable[[Warning], None] | None = None) -> None:
        """One RooflineWarning per session; ``warn`` attaches it to a test (pytest's ``item.warn``)."""
        if self._warned:
            return
        from pytest_roofline.errors import RooflineWarning

        self._warned = True
        if warn is not None:
            warn(RooflineWarning(message))
        else:
            warnings.warn(RooflineWarning(message), stacklevel=2)

    def counter(self) -> Counter:
        """The counter for the next measured call site, made through ``pytest_roofline_make_counter``."""
        from pytest_roofline.measure.regions import CounterUnavailableError

        name = self._counter_name()
        counter = self.make_counter(name)
        if counter is None:
            raise CounterUnavailableError(
                f"--roofline-counter={name}: no plugin provides a counter of that name (built-in: analytic, "
                "declared, ncu; a plugin adds one with the pytest_roofline_make_counter hook)")
        return counter

    def _counter_name(self) -> str:
        from pytest_roofline.counters.ncu.deferred import NcuUnavailable
        from pytest_roofline.measure.regions import CounterUnavailableError

        try:
            return str(self.choose_counter().name)
        except NcuUnavailable as exc:  # explicit ncu is checked at session start; this is a late fixture
            raise CounterUnavailableError(str(exc)) from None


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device_if_loaded(device: str) -> str:
    """``resolve_device`` without importing torch: ``auto`` in a process that has not imported torch is the
    CPU (declared-work tests with pinned ceilings never load it)."""
    if device == "auto" and "torch" not in sys.modules:
        return "cpu"
    return resolve_device(device)


def builtin_counter(name: str) -> Counter | None:
    """The built-in counters by name (None for any other name); the plugin offers them through the
    ``pytest_roofline_make_counter`` hook."""
    from pytest_roofline.measure.regions import CounterUnavailableError

    if name == "ncu":
        from pytest_roofline.counters.ncu.deferred import NcuDeferredCounter

        return NcuDeferredCounter()
    if name == "declared":
        raise CounterUnavailableError(
            "--roofline-counter=declared: this roofline.measure() call declares no counts; use "
            "roofline.declare(flops=..., bytes=...).measure(fn, *args)"
        )
    if name != "analytic":
        return None
    try:
        from pytest_roofline.counters.analytic import AnalyticCounter
    except ImportError as exc:
        raise CounterUnavailableError(
            f"the analytic counter needs PyTorch ({exc}); install pytest-roofline[torch], or declare the "
            "work with roofline.declare(flops=..., bytes=...).measure(fn, *args)"
        ) from None
    return AnalyticCounter()
