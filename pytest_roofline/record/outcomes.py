"""The closed sets a record's words come from: a test's outcome, why a failing gate did not fail it, and what
the baseline and A/B gates decided. Each is a ``Literal`` for the type checker and a tuple for the loader,
which rejects a word outside its set (``record.loader``); ``*_of`` reads a word back as its type."""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

# pytest's outcome of a test as its record keeps it; "not run": collected, never reported (a session cut short)
Outcome = Literal["passed", "failed", "skipped", "xfailed", "xpassed", "error", "not run"]
# why a fraction or a regression below its gate did not fail the test
NotGated = Literal["contended", "warn-only"]
# what a gate decided of a test against its reference (the baseline sessions, or REF); "changed": worse, or
# other work, in a quantity the test is not failed on (reported)
GateVerdict = Literal["regressed", "improved", "steady", "noisy", "inconclusive", "changed", "new"]
# the A/B block's verdict: a gate's, or why the test was not compared ("error": REF's twin failed;
# "unchanged": the change does not reach it)
ABVerdict = Literal[GateVerdict, "error", "unchanged"]

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
NOT_GATED: tuple[NotGated, ...] = get_args(NotGated)
GATE_VERDICTS: tuple[GateVerdict, ...] = get_args(GateVerdict)
AB_VERDICTS: tuple[ABVerdict, ...] = get_args(ABVerdict)  # the nested Literal, flattened

Word = TypeVar("Word", bound=str)


def word_of(value: object, words: tuple[Word, ...]) -> Word | None:
    """``value`` as a word of ``words``; None for anything else (a record read from disk was checked first)."""
    return next((word for word in words if word == value), None)
