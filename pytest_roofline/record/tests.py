"""One test's record: what ``results.json``, a history file, the gates and the site all read (docs/results.md).

The fields a reader uses by name are typed here; every other field a counter or a gate wrote (``clock_policy``,
``definitions``, ``ncu``, ``confirmed`` ...) is kept as written in ``extra``, so a record read and written
again is the record that was read. Records read back from disk are checked first (``record.loader``):
:meth:`TestRecord.from_dict` does not judge trust, it only gives each field its type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from pytest_roofline.model import Machine, Verdict
from pytest_roofline.record.ab_record import ABRecord
from pytest_roofline.record.baseline_record import BaselineRecord
from pytest_roofline.record.json_values import JsonObject, finite_number, migrated, text_of
from pytest_roofline.record.outcomes import NOT_GATED, OUTCOMES, NotGated, Outcome, word_of
from pytest_roofline.record.region_record import KernelRecord, RegionRecord

SCHEMA = 1  # the newest test-record schema this package writes and reads (results.json's and history's "schema")

# The fields every record carries, written even when empty (a test with no verdict has fraction null).
_ALWAYS = ("nodeid", "outcome", "min_fraction", "artifacts", "counter", "fraction", "bound", "time_s", "flops",
           "bytes", "kernels", "regions")
# The typed fields written only where set.
_OPTIONAL = ("function", "params", "device", "t_min_s", "flops_by_precision", "ai", "judged_roofs", "compare",
             "baseline", "nothing_counted", "not_gated", "contended")
# A test's parameters as recorded: each a plain value (the loader refuses any other kind)
Params = Mapping[str, "str | float | bool | None"]
# A field's key in results.json and the history where it differs from the field's name (a JUnit property too)
KEYS = {"nothing_counted": "no_work"}
# every key the typed fields read; the rest of a record is kept in ``extra``
_KNOWN = frozenset(_ALWAYS) | {KEYS.get(name, name) for name in _OPTIONAL}

# How an unprofiled call site's time was taken (results.json's clock_policy); the ncu counter sets its own.
UNPROFILED_CLOCK_POLICY: dict[str, str] = {
    "time": "bare timed loop in the pytest process: unprofiled, device-synchronized, normal clocks",
}

# schema -> the step that turns a record of that schema into one of the next; none yet (schema 1 is the first)
MIGRATIONS: dict[int, Callable[[dict[str, object]], dict[str, object]]] = {}


def _object(value: object) -> JsonObject | None:
    return value if isinstance(value, Mapping) else None


def _params(value: object) -> Params | None:
    """The parameters' plain values (str, number, bool, null); any other value left out."""
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items() if v is None or isinstance(v, (str, int, float, bool))}


def _ab(value: object) -> ABRecord | None:
    return ABRecord.from_dict(value) if isinstance(value, Mapping) else None


def _counts(value: object) -> dict[str, float]:
    """A ``{name: number}`` object (FLOPs per precision, bytes per level); entries that are not numbers left out."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): n for k, v in value.items() if (n := finite_number(v)) is not None}


def _objects(value: object) -> tuple[JsonObject, ...]:
    return tuple(v for v in value if isinstance(v, Mapping)) if isinstance(value, (list, tuple)) else ()


def _texts(value: object) -> tuple[str, ...]:
    """The strings of a JSON list (an empty or missing one: none); a value that is not iterable is a TypeError."""
    items = value or ()
    if not isinstance(items, Iterable):
        raise TypeError(f"{type(items).__name__!r} object is not iterable")
    return tuple(a for a in items if isinstance(a, str))


def migrate(data: Mapping[str, object], schema: int) -> dict[str, object]:
    """A record of ``schema`` brought to :data:`SCHEMA`; ValueError for a schema newer than this package's."""
    return migrated(data, schema, SCHEMA, MIGRATIONS)


@dataclass(frozen=True)
class NothingCounted:
    """A measured test whose calls counted no FLOPs and no bytes: the ops the counter saw, and what to say."""

    ops: tuple[str, ...]
    message: str

    @classmethod
    def from_dict(cls, value: object) -> NothingCounted | None:
        if not isinstance(value, Mapping):
            return None
        ops = value.get("ops")
        return cls(_texts(ops) if isinstance(ops, (list, tuple)) else (), text_of(value.get("message")) or "")

    def to_dict(self) -> dict[str, object]:
        return {"ops": list(self.ops), "message": self.message}


@dataclass(frozen=True)
class Contended:
    """A test measured on a contended core and measured again at the end of the session: what came of it."""

    remeasured: bool  # measured again (False: no call fit the budget again)
    still_contended: bool  # contended the second time too
    judged: bool = False  # judged all the same (--roofline-contended judge), its tolerance widened
    spread: float | None = None  # that widening: the spread of its two contended measurements
    failed_when_remeasured: bool = False
    message: str | None = None  # the failure it was reported again with
    raw: JsonObject = field(default_factory=dict, repr=False)  # the block as written

    @classmethod
    def from_dict(cls, block: object) -> Contended | None:
        """The record's ``contended`` block (None where there is none); a field of the wrong type reads as unset."""
        if not isinstance(block, Mapping):
            return None
        return cls(remeasured=block.get("remeasured") is True, still_contended=block.get("still_contended") is True,
                   judged=block.get("judged") is True, spread=finite_number(block.get("spread")),
                   failed_when_remeasured=block.get("failed_when_remeasured") is True,
                   message=text_of(block.get("message")), raw=block)

    def to_dict(self) -> JsonObject:
        return dict(self.raw)


@dataclass(frozen=True)
class Measured:
    """What a test's call sites measured, read once from its recorder (``Recorder.measured``): what the gates
    judge and what its record holds. Nothing measured: every field empty."""

    verdict: Verdict | None = None  # the call sites' combined verdict
    judged: Machine | None = None  # the roofs it was judged on (those of the cores its calls ran on)
    device: str | None = None  # the device whose thresholds gate it: cuda if any call site ran on a GPU
    devices: tuple[str, ...] = ()  # every device its call sites ran on
    counter: str | None = None  # "analytic", "ncu", "declared+ncu" for a mix ...
    regions: tuple[RegionRecord, ...] = ()  # per call site, as results.json writes it

    @property
    def kernels(self) -> tuple[KernelRecord, ...]:
        """Every call site's kernels, call site after call site."""
        return tuple(k for region in self.regions for k in region.get("kernels", ()))


@dataclass(frozen=True)
class TestRecord:
    """One measured (or skipped, or failed) test of a session."""

    __test__: ClassVar[bool] = False  # not a test class, despite its name

    nodeid: str
    outcome: Outcome = "not run"  # pytest's outcome: passed, failed, skipped, xfailed ...
    min_fraction: float | None = None  # the threshold it was held to
    fraction: float | None = None  # attained fraction of the roof that binds; None: no counted work
    bound: str | None = None  # "compute:fp32", "memory:DRAM" ...
    time_s: float | None = None  # median time of one call, summed over its call sites
    t_min_s: float | None = None  # the time the roofs allow
    flops: float | None = None  # all FLOPs of one call
    flops_by_precision: Mapping[str, float] | None = None
    bytes: Mapping[str, float] = field(default_factory=dict)  # per memory level
    ai: Mapping[str, float] | None = None  # arithmetic intensity per memory level
    counter: str | None = None  # "analytic", "ncu", "declared", "declared+ncu" ...
    device: str | None = None  # cpu, cuda, cpu+cuda: whose roofs judged it
    function: str | None = None  # the test function's id without parameters, where a runner recorded it
    params: Params | None = None  # the test's parameters, where recorded
    artifacts: tuple[str, ...] = ()
    kernels: tuple[JsonObject, ...] = ()
    regions: tuple[JsonObject, ...] = ()  # per call site: its counts, timing, cores (Region.to_dict)
    judged_roofs: JsonObject | None = None  # the roofs the fraction was judged on
    compare: ABRecord | None = None  # the A/B verdict (--roofline-compare)
    baseline: BaselineRecord | None = None  # the baseline gate's verdict (--roofline-baseline)
    nothing_counted: NothingCounted | None = None  # no FLOPs and no bytes: the ops seen and the message
    not_gated: NotGated | None = None  # why a failing fraction did not fail it: "contended", "warn-only"
    contended: Contended | None = None  # measured again at the end of the session, and what came of it
    extra: JsonObject = field(default_factory=dict)  # every other field, as written

    @classmethod
    def from_dict(cls, data: Mapping[str, object], schema: int = SCHEMA) -> TestRecord:
        """The record of a ``results.json`` / history test object (migrated from ``schema``). A field of the
        wrong type reads as unset: records read from disk were checked by ``record.loader`` already."""
        record = migrate(data, schema)
        nodeid = record.get("nodeid")
        if not isinstance(nodeid, str) or not nodeid:
            raise ValueError(f"nodeid: {nodeid!r} is not a non-empty string")
        flops_by, ai = record.get("flops_by_precision"), record.get("ai")
        return cls(
            nodeid=nodeid, outcome=word_of(record.get("outcome"), OUTCOMES) or "not run",
            min_fraction=finite_number(record.get("min_fraction")), fraction=finite_number(record.get("fraction")),
            bound=text_of(record.get("bound")), time_s=finite_number(record.get("time_s")),
            t_min_s=finite_number(record.get("t_min_s")), flops=finite_number(record.get("flops")),
            flops_by_precision=_counts(flops_by) if isinstance(flops_by, Mapping) else None,
            bytes=_counts(record.get("bytes")), ai=_counts(ai) if isinstance(ai, Mapping) else None,
            counter=text_of(record.get("counter")),
            device=text_of(record.get("device")), function=text_of(record.get("function")),
            params=_params(record.get("params")),
            artifacts=_texts(record.get("artifacts")),
            kernels=_objects(record.get("kernels")), regions=_objects(record.get("regions")),
            judged_roofs=_object(record.get("judged_roofs")), compare=_ab(record.get("compare")),
            baseline=BaselineRecord.from_dict(record.get("baseline")),
            nothing_counted=NothingCounted.from_dict(record.get(KEYS["nothing_counted"])),
            not_gated=word_of(record.get("not_gated"), NOT_GATED),
            contended=Contended.from_dict(record.get("contended")),
            extra={k: v for k, v in record.items() if k not in _KNOWN},
        )

    def to_dict(self) -> dict[str, object]:
        """The JSON object written to ``results.json`` and the history (lists as lists)."""
        out: dict[str, object] = {}
        for name in _ALWAYS:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        out["bytes"] = dict(self.bytes)
        for name in _OPTIONAL:
            value = getattr(self, name)
            if isinstance(value, (ABRecord, BaselineRecord, Contended, NothingCounted)):
                out[KEYS.get(name, name)] = value.to_dict()
            elif value is not None:
                out[KEYS.get(name, name)] = dict(value) if name in ("flops_by_precision", "ai") else value
        return {**out, **self.extra}

    @classmethod
    def of(cls, measured: Measured, *, nodeid: str, outcome: Outcome, min_fraction: float | None,
           artifacts: Sequence[str], nothing_counted: NothingCounted | None,
           fields: Mapping[str, object]) -> TestRecord:
        """The record of a test measured in this session: its measurement, its outcome, and the ``fields`` its
        gates, counter and runner added (``clock_policy``, ``baseline``, ``failure`` ...). The one place a live
        test's record is made."""
        extra = dict(fields)
        clock_policy = extra.pop("clock_policy", dict(UNPROFILED_CLOCK_POLICY) if measured.regions else None)
        base: dict[str, object] = {
            "nodeid": nodeid, "outcome": outcome, "min_fraction": min_fraction, "artifacts": list(artifacts),
            "counter": measured.counter or ("ncu" if "ncu" in extra else None), "clock_policy": clock_policy,
            **extra,
        }
        verdict, judged = measured.verdict, measured.judged
        fields_measured: dict[str, object] = {"fraction": None, "bound": None, "time_s": None, "flops": None,
                                              "bytes": {}, "kernels": [], "regions": []}
        if verdict is not None and judged is not None:
            # no counted work: a time, but no fraction or bound (none to chart, gate or compare with later sessions)
            nothing = {"fraction": None, "bound": None, "headroom": None} if nothing_counted is not None else {}
            fields_measured = {
                **verdict.to_dict(), **nothing,
                "device": "+".join(measured.devices) or None,  # cpu|cuda (cpu+cuda): the devices whose roofs judged it
                # the roofs the fraction was judged against (those of the cores it ran on), for charts drawn later
                "judged_roofs": {"name": judged.name, "peak_flops": dict(judged.peak_flops),
                                 "bandwidth": dict(judged.bandwidth)},
                "kernels": list(measured.kernels), "regions": list(measured.regions),
            }
        return replace(cls.from_dict({**base, **fields_measured}), nothing_counted=nothing_counted)

    @property
    def measured(self) -> bool:
        """Whether it has a fraction a gate or a chart can use (counted work, a positive fraction)."""
        return self.fraction is not None and self.fraction > 0

    @property
    def test_function(self) -> str:
        """The test function's id: the recorded one, else the node id without its parameters."""
        return self.function or self.nodeid.split("[", 1)[0]

    @property
    def threads(self) -> int | None:
        """The cores its calls ran on (the most of its call sites' ``cores.count``), where recorded."""
        return threads_of(self.regions)

    @property
    def gpu_l2(self) -> str | None:
        """How its GPU call sites' timed calls found the L2 (:func:`gpu_l2_of`)."""
        return gpu_l2_of(self.regions)


def gpu_l2_of(regions: Sequence[JsonObject]) -> str | None:
    """How a test's GPU call sites' timed calls found the L2: ``flushed``, ``warm`` or both (``flushed+warm``);
    None for a test with no GPU call site. A GPU call site recorded before ``--roofline-gpu-l2`` existed was
    timed warm."""
    gpu = [r for r in regions if r.get("device") == "cuda" or "gpu_l2" in r]
    states = {str(r.get("gpu_l2") or "warm") for r in gpu}
    return "+".join(sorted(states)) if states else None


def threads_of(regions: Sequence[JsonObject]) -> int | None:
    """The cores a test's call sites ran on (the most of their ``cores.count``), where recorded."""
    counts = [c for r in regions if isinstance(cores := r.get("cores"), Mapping)
              and isinstance(c := cores.get("count"), int) and not isinstance(c, bool)]
    return max(counts) if counts else None


def records_by_id(tests: Sequence[TestRecord]) -> dict[str, TestRecord]:
    """Node id -> record; a node id listed twice keeps its last record."""
    return {t.nodeid: t for t in tests}
