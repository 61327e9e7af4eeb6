"""A test's A/B block (``tests[].compare`` in results.json and the history): what ``--roofline-compare`` decided
against REF (``ab.verdict`` writes it), typed for its readers (the A/B report, the summary, the CI report, the
nightly chain, bisect). Lives here, below the history, because the history and the outputs read it.

A block read and written again is the block that was read: fields no reader names stay in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_roofline.record.json_values import JsonObject, finite_number, text_of
from pytest_roofline.record.outcomes import AB_VERDICTS, ABVerdict, word_of

# keys of the block held in typed fields; the rest (sites' diagnosis, the REF twin's outcome ...) stay in extra
_KNOWN = ("verdict", "explanation", "failed_on", "fail_on", "changes", "ref", "commit", "pairs", "max_drop",
          "max_slowdown", "auto_band", "process_pairs", "pair_ratios", "between_cv", "interval")
_MOVED = ("now", "reference", "ratio", "ci", "claim_ci", "claim_level", "verdict")


def _interval(value: object) -> tuple[float, float] | None:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    low, high = finite_number(value[0]), finite_number(value[1])
    return None if low is None or high is None else (low, high)


def claim_level_of(value: object) -> float | None:
    """A record's claim level (a number in (0.5, 1)); None for anything else (a record from before it was kept)."""
    level = finite_number(value)
    return level if level is not None and 0.5 < level < 1 else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _words(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (list, tuple)) else ()


@dataclass(frozen=True)
class Moved:
    """One quantity of the block (``changes.time``, ``changes.fraction``): this side, REF, their ratio and its
    intervals, the quantity's own verdict (``worse``, ``same`` ...)."""

    now: float | None = None
    reference: float | None = None
    ratio: float | None = None
    ci: tuple[float, float] | None = None  # 95 %
    claim_ci: tuple[float, float] | None = None  # what "worse" / "better" must clear 1 with
    claim_level: float | None = None  # its level; None: a record from before it was kept (99 %)
    verdict: str | None = None
    extra: JsonObject = field(default_factory=dict)  # spread, equivalence_ci ... as written

    @classmethod
    def from_dict(cls, data: object) -> Moved | None:
        if not isinstance(data, Mapping):
            return None
        return cls(now=finite_number(data.get("now")), reference=finite_number(data.get("reference")),
                   ratio=finite_number(data.get("ratio")), ci=_interval(data.get("ci")),
                   claim_ci=_interval(data.get("claim_ci")), claim_level=claim_level_of(data.get("claim_level")),
                   verdict=text_of(data.get("verdict")),
                   extra={k: v for k, v in data.items() if k not in _MOVED})

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"now": self.now, "reference": self.reference, "ratio": self.ratio,
                                  "ci": None if self.ci is None else list(self.ci), "verdict": self.verdict}
        if self.claim_ci is not None:
            out["claim_ci"] = list(self.claim_ci)
        if self.claim_level is not None:
            out["claim_level"] = self.claim_level
        return {**out, **self.extra}


@dataclass(frozen=True)
class ABRecord:
    """The A/B block of one test. ``time`` is None where the test was not compared (``verdict`` then says
    ``error``: REF's twin could not measure it, ``new``: REF has no such test, or ``unchanged``: no change
    reaches it)."""

    verdict: ABVerdict | None = None  # a gate's verdict, or why it was not compared
    explanation: str = ""
    time: Moved | None = None
    fraction: Moved | None = None
    work: JsonObject | None = None  # measure.work.WorkChange.to_dict, as written
    failed_on: tuple[str, ...] = ()
    fail_on: tuple[str, ...] = ()
    ref: str | None = None  # the revision given (HEAD~1, main ...)
    commit: str | None = None  # what it resolved to
    pairs: int | None = None  # turns taken, all call sites together
    max_drop: float | None = None
    max_slowdown: float | None = None  # the time band it was judged with
    auto_band: bool = False  # the band was chosen by the pairs' spread, not given
    process_pairs: int | None = None
    pair_ratios: tuple[float, ...] = ()  # per process pair, over the test's call sites
    between_cv: float | None = None
    interval: str | None = None  # which interval decided ("t over process pairs", "signed-rank ..." ...)
    extra: JsonObject = field(default_factory=dict)  # every other key, as written

    @property
    def compared(self) -> bool:
        """Whether both sides were measured and paired (the block has its ``changes``)."""
        return self.time is not None and self.fraction is not None

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ABRecord:
        """The block as read (a field of the wrong type reads as unset: disk records were validated first)."""
        changes = data.get("changes")
        changes = changes if isinstance(changes, Mapping) else {}
        work = changes.get("work")
        ratios = data.get("pair_ratios")
        return cls(
            verdict=word_of(data.get("verdict"), AB_VERDICTS), explanation=text_of(data.get("explanation")) or "",
            time=Moved.from_dict(changes.get("time")), fraction=Moved.from_dict(changes.get("fraction")),
            work=work if isinstance(work, Mapping) else None,
            failed_on=_words(data.get("failed_on")), fail_on=_words(data.get("fail_on")),
            ref=text_of(data.get("ref")), commit=text_of(data.get("commit")), pairs=_count(data.get("pairs")),
            max_drop=finite_number(data.get("max_drop")), max_slowdown=finite_number(data.get("max_slowdown")),
            auto_band=data.get("auto_band") is True, process_pairs=_count(data.get("process_pairs")),
            pair_ratios=tuple(r for v in ratios if (r := finite_number(v)) is not None)
            if isinstance(ratios, (list, tuple)) else (),
            between_cv=finite_number(data.get("between_cv")), interval=text_of(data.get("interval")),
            extra={k: v for k, v in data.items() if k not in _KNOWN})

    def to_dict(self) -> dict[str, object]:
        """The JSON object written (keys left unset are left out)."""
        out: dict[str, object] = {}
        if self.verdict is not None:
            out["verdict"] = self.verdict
        if self.failed_on or self.fail_on or self.time is not None:
            out["failed_on"], out["fail_on"] = list(self.failed_on), list(self.fail_on)
        if self.explanation:
            out["explanation"] = self.explanation
        if self.time is not None or self.fraction is not None or self.work is not None:
            out["changes"] = {"time": None if self.time is None else self.time.to_dict(),
                              "fraction": None if self.fraction is None else self.fraction.to_dict(),
                              "work": self.work}
        for name in ("ref", "commit", "pairs", "max_drop", "max_slowdown", "process_pairs", "between_cv",
                     "interval"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        if self.auto_band or self.max_slowdown is not None:
            out["auto_band"] = self.auto_band
        if self.pair_ratios:
            out["pair_ratios"] = list(self.pair_ratios)
        return {**out, **self.extra}
