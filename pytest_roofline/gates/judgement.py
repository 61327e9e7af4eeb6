"""What the gates decided of one test: a value, so that judging writes nothing to the test it judges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_roofline.record.json_values import JsonObject
from pytest_roofline.record.outcomes import NotGated
from pytest_roofline.record.tests import NothingCounted


class _Same:
    """Judgement.adding's default: the verdict field stays as it is."""


SAME = _Same()

# the fields a judgement adds to the test's record, in the order they are written
RECORD_FIELDS = ("min_fraction_by_device", "roof_notes", "roof_warning", "confirmed", "baseline", "not_gated",
                 "compare")


@dataclass(frozen=True)
class Judgement:
    """What the gates decided of one test, each decision a typed field. Judging writes nothing to the test:
    ``gates.judge.keep`` puts :meth:`record_fields`, ``nothing_counted``, ``artifacts`` and the threshold it
    was held to on its entry. ``dataclasses.replace`` sets a field; :meth:`adding` adds artifacts and changes
    the failure, warning or error."""

    failure: str | None = None  # the test fails with this message
    warning: str | None = None  # --roofline-warn-only: what would have failed it, as a warning
    error: str | None = None  # an error of the test (a fraction no roof allows), raised in its teardown
    artifacts: tuple[str, ...] = ()  # charts and kernel tables written for it
    min_fraction: float | None = None  # the threshold it was held to (a per-device marker's, chosen here)
    nothing_counted: NothingCounted | None = None  # no FLOPs, no bytes: no fraction to gate or compare
    min_fraction_by_device: Mapping[str, float] | None = None  # the marker's per-device thresholds
    roof_notes: tuple[str, ...] = ()  # emulated precisions among the roofs that judged it
    roof_warning: str | None = None  # an A/B session's fraction no cached roof allows (the A/B verdict stands)
    confirmed: tuple[float, float] | None = None  # measured once more before failing: (first, second) fraction
    baseline: JsonObject | None = None  # the baseline gate's block
    not_gated: NotGated | None = None
    compare: JsonObject | None = None  # the A/B gate's block

    def adding(self, artifacts: Sequence[str] = (), *, failure: str | None | _Same = SAME,
               warning: str | None | _Same = SAME, error: str | None | _Same = SAME) -> Judgement:
        """This judgement with more artifacts, and ``failure``/``warning``/``error`` changed where given."""
        return replace(self, failure=self.failure if isinstance(failure, _Same) else failure,
                       warning=self.warning if isinstance(warning, _Same) else warning,
                       error=self.error if isinstance(error, _Same) else error,
                       artifacts=(*self.artifacts, *artifacts))

    def record_fields(self) -> dict[str, object]:
        """What it adds to the test's record, as results.json writes it: the fields set, nothing for the rest."""
        out: dict[str, object] = {}
        for name in RECORD_FIELDS:
            value = getattr(self, name)
            if value is None or value == ():
                continue
            if name == "confirmed":
                value = {"first": value[0], "second": value[1]}
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out
