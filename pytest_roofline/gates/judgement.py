"""What the gates decided of one test: a value, so that judging writes nothing to the test it judges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pytest_roofline.record.tests import NothingCounted


class _Same:
    """Judgement.adding's default: the verdict field stays as it is."""


SAME = _Same()


@dataclass(frozen=True)
class Judgement:
    """What the gates decided of one test. Judging writes nothing to the test: ``gates.judge.keep`` puts ``fields``
    (the record's ``not_gated``, ``confirmed``, ``baseline``, ``compare`` ...), ``nothing_counted``,
    ``artifacts`` and the threshold it was held to on its entry."""

    failure: str | None = None  # the test fails with this message
    warning: str | None = None  # --roofline-warn-only: what would have failed it, as a warning
    error: str | None = None  # an error of the test (a fraction no roof allows), raised in its teardown
    fields: Mapping[str, object] = field(default_factory=dict)  # results.json fields of the test
    artifacts: tuple[str, ...] = ()  # charts and kernel tables written for it
    min_fraction: float | None = None  # the threshold it was held to (a per-device marker's, chosen here)
    nothing_counted: NothingCounted | None = None  # no FLOPs, no bytes: no fraction to gate or compare

    def adding(self, fields: Mapping[str, object] | None = None, artifacts: Sequence[str] = (), *,
               failure: str | None | _Same = SAME, warning: str | None | _Same = SAME,
               error: str | None | _Same = SAME) -> Judgement:
        """This judgement with more record fields and artifacts, and ``failure``/``warning``/``error`` changed
        where given."""
        return replace(self, failure=self.failure if isinstance(failure, _Same) else failure,
                       warning=self.warning if isinstance(warning, _Same) else warning,
                       error=self.error if isinstance(error, _Same) else error,
                       fields={**self.fields, **(fields or {})}, artifacts=(*self.artifacts, *artifacts))
