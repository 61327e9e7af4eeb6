"""The baseline gate's block of a test's record (``tests[].baseline``, docs/history-format.md), typed: what the
summary, the JUnit properties, the step summary and the site read of it. The block as written is kept whole
(``raw``), so a record read and written again is unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_roofline.record.json_values import JsonObject, finite_number, text_of
from pytest_roofline.record.outcomes import GATE_VERDICTS, GateVerdict, word_of


@dataclass(frozen=True)
class BaselineRecord:
    """What the baseline gate decided of a test against its past sessions."""

    verdict: GateVerdict | None  # None: not recorded
    statistic: str = ""  # the interval or test it rests on ("inconclusive: ..." without one)
    explanation: str = ""  # what moved and why, where the gate said so
    excused: str | None = None  # why a regression did not fail the test ("contended")
    fraction: float | None = None  # the baseline sessions' fraction
    drop: float | None = None  # 1 - fraction now / the baseline's
    time_ratio: float | None = None  # time per call now / the baseline's
    sessions: tuple[str, ...] = ()  # the baseline sessions' ids
    raw: JsonObject = field(default_factory=dict, repr=False)  # the block as written

    @classmethod
    def from_dict(cls, block: object) -> BaselineRecord | None:
        """The block of a record (None where there is none); a field of the wrong type reads as unset."""
        if not isinstance(block, Mapping):
            return None
        changes = block.get("changes")
        time = changes.get("time") if isinstance(changes, Mapping) else None
        sessions = block.get("sessions")
        return cls(verdict=word_of(block.get("verdict"), GATE_VERDICTS),
                   statistic=text_of(block.get("statistic")) or "",
                   explanation=text_of(block.get("explanation")) or "", excused=text_of(block.get("excused")),
                   fraction=finite_number(block.get("fraction")), drop=finite_number(block.get("drop")),
                   time_ratio=finite_number(time.get("ratio")) if isinstance(time, Mapping) else None,
                   sessions=tuple(str(s) for s in sessions) if isinstance(sessions, list) else (), raw=block)

    def to_dict(self) -> JsonObject:
        return dict(self.raw)
