"""A fraction above one: a call that beat the roof it was judged on, which the model says it cannot. The
roofs or the counts are wrong, not the call fast; every layer names it the same way."""

from __future__ import annotations

from pytest_roofline.model.roofline import Machine, Verdict

ABOVE_ONE = 1.05  # a fraction above this beat its roof: a modeling error to name, not a speed to celebrate


def above_one_note(verdict: Verdict, machine: Machine) -> str | None:
    """Why a fraction above :data:`ABOVE_ONE` cannot be real, naming the roof it was judged against."""
    if verdict.fraction <= ABOVE_ONE:
        return None
    kind, _, name = verdict.bound.partition(":")
    if kind == "memory":
        roof = f"the {name} bandwidth roof ({machine.bandwidth_for(name) / 1e9:.4g} GB/s)"
        cause = (f"its data sat partly in a level nearer than {name} (the placement judged {name}), or that roof "
                 "is below the machine's real one")
    else:
        roof = f"the {name} compute roof ({machine.peak_for(name) / 1e9:.4g} GFLOP/s)"
        cause = "that roof is below the machine's real one (a disturbed or pinned value), or FLOPs are over-counted"
    return f"fraction {verdict.fraction:.3f} is above 1: the call beat {roof}; likely {cause}"
