"""A call site's record as results.json writes it (``regions[]``, docs/results.md), key by key: what
``measure.regions.Region.to_dict`` builds and what the A/B gate (``ab.verdict``) reads back of both sides.

TypedDicts, not classes: the record crosses processes as JSON (a REF twin sends its region over the channel) and
is written to results.json as it is. A record read back from history stays a :data:`.json_values.JsonObject`
(``record.tests.TestRecord.regions``): nothing here validates; the loader does.
"""

from __future__ import annotations

from typing import TypedDict

from pytest_roofline.model.roofline import KernelDict, VerdictDict
from pytest_roofline.record.json_values import JsonObject


class OpFields(TypedDict, total=False):
    """What the per-op timing pass (``--roofline-ops``) adds to a kernel's record."""

    t_min_s: float | None
    bound: str | None
    fraction: float | None
    lost_s: float | None


class KernelRecord(KernelDict, OpFields, total=False):
    """A kernel's (or op's) record in a region: its counts, and its op times where the per-op pass ran."""


class TimingRecord(TypedDict):
    """How a call site was timed (``measure.timing.TimingStats.to_dict``): the statistics of its timed calls
    and an evenly spaced subset of their samples."""

    median_s: float
    min_s: float
    max_s: float
    q1_s: float
    q3_s: float
    mean_s: float
    stdev_s: float
    iqr_rel: float
    cv: float
    rounds: int
    warmup_rounds: int
    stable: bool
    measure_s: float
    budget_limited: bool
    faults_per_call: float
    samples_s: list[float]
    minor_faults: list[int]
    major_faults: list[int]


class PartRecord(TypedDict):
    """A call site timed apart from others judged with it as one."""

    label: str
    timing: TimingRecord


class Confirmed(TypedDict):
    """The fractions of a first measurement and of its confirming re-measure (``--roofline-confirm``)."""

    first: float
    second: float


class PairSummary(TypedDict):
    """One process pair at a call site (``ab.pairs.PairTimes.summary``): its own ratio and interval, for
    diagnosis."""

    ratio: float
    ci: list[float] | None
    turns: int
    batch: int
    this_first: int
    warm_first: str
    alloc_first: str
    budget_limited: bool
    measure_s: float
    rewarm: bool
    set_aside: int
    calm_warmup: bool
    warmup: dict[str, int]  # this|ref -> warm-up turns
    faulting_turns: dict[str, int]  # this|ref -> turns whose calls faulted on fresh pages


class PairedSite(TypedDict, total=False):
    """A call site measured over process pairs (``ab.pairs.SiteResult.summary``, which fills every field): the
    top level first. Not total, so that :class:`SiteCompare` can hold none of it."""

    ratio: float
    ci: list[float] | None
    claim_ci: list[float] | None
    claim_level: float | None
    last_look: int
    equivalence_ci: list[float] | None
    interval: str
    process_pairs: int
    pair_ratios: list[float]
    between_cv: float
    pairs: int
    batch: int
    this_time_s: float
    ref_time_s: float
    budget_limited: bool
    measure_s: float
    max_slowdown: float
    settled: bool
    within: list[PairSummary]


class SiteCompare(PairedSite, total=False):
    """A region's ``compare`` block (``--roofline-compare``). A call site not compared has ``compared`` (and
    ``unchanged`` where the change does not reach it) only; a compared one has every field of
    :class:`PairedSite`, REF's region and the turns of REF's side."""

    compared: bool
    unchanged: bool
    ref: RegionRecord | None  # REF's region as its twin judged it, with REF's paired time
    ref_timing: TimingRecord


class _RegionBase(VerdictDict):
    label: str
    counter: str
    notes: list[str]
    uncounted_ops: dict[str, int]  # FLOP-bearing ops without a rule -> their bytes


class RegionRecord(_RegionBase, total=False):
    """One call site: its verdict's numbers (time, t_min, fraction, bound, work), where it ran and how it was
    timed. A REF twin's region (:attr:`SiteCompare.ref`) comes without ``kernels`` and ``timing``."""

    timing: TimingRecord
    kernels: list[KernelRecord]
    parts: list[PartRecord]
    cores: JsonObject  # ``host.cores.Placement.to_dict``
    probe: JsonObject  # ``measure.probes.ProbeSummary``
    confirmed: Confirmed
    ops: JsonObject  # ``measure.ops.times.OpReport.to_dict``
    compare: SiteCompare
    device: str
    gpu_l2: str  # a GPU call site's timed calls began with their L2 "flushed" or "warm" (--roofline-gpu-l2)
