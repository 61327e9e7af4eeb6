"""The text ``compare A B`` prints: which sessions, one row per test, the explanation of every test that is not
steady, and the count per verdict."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_roofline.gates.baseline_stats import Spread
from pytest_roofline.gates.comparison import ratio_text
from pytest_roofline.gates.history_compare import Plan, Row
from pytest_roofline.history.selectors import describe
from pytest_roofline.output.summary import wrap
from pytest_roofline.output.table import MIN_ID, shorten_id
from pytest_roofline.output.table import fraction_text as ft
from pytest_roofline.record.outcomes import GATE_VERDICTS

HEAD = ("test", "A time", "B time", "time ratio [95% CI]", "fraction A → B", "work", "verdict")
ORDER = (*GATE_VERDICTS, "removed")


def seconds(value: float | None) -> str:
    """Three significant digits, trailing zeros kept (2.00 ms beside 1.98 ms)."""
    if value is None:
        return "—"
    scaled, unit = (value, "s") if value >= 1 else (value * 1e3, "ms") if value >= 1e-3 else (value * 1e6, "us")
    return f"{f'{scaled:#.3g}'.rstrip('.')} {unit}"


def _cells(row: Row) -> list[str]:
    c = row.comparison
    if c is None:  # new or removed: the side that measured it
        now, then = row.now, row.reference
        return [row.nodeid, seconds(then.time_s if then else None), seconds(now.time_s if now else None), "—",
                f"{ft(then.fraction)} → —" if then else f"— → {ft(now.fraction)}" if now else "—", "—", row.verdict]
    ratio = f"×{c.time.ratio:.2f}"
    ratio += f" [{c.time.ci[0]:.2f}, {c.time.ci[1]:.2f}]" if c.time.ci is not None else " [no spread]"
    if c.work is None:
        work = "not counted"
    elif c.work.verdict == "same":
        work = "same"
    else:
        scale = "" if c.work.ratio is None else f" ×{ratio_text(c.work.ratio)}"
        # the count that binds is the same, others moved: "more ×1.00" would read as no change
        work = "other counts moved" if c.work.ratio == 1.0 else f"{c.work.verdict}{scale}"
    return [row.nodeid, seconds(c.time.reference), seconds(c.time.now), ratio,
            f"{ft(c.fraction.reference)} → {ft(c.fraction.now)}", work, row.verdict]


def _sides(plan: Plan) -> list[str]:
    a, b = plan.a, plan.b
    count = len(plan.reference)
    a_text = describe(plan.reference[0]) if count == 1 else (
        f"{count} sessions, {describe(plan.reference[0])} to {describe(plan.reference[-1])} "
        f"(per test its last 5 that measured it)")
    return [f"A {a.selector}: {a_text}", f"B {b.selector}: {describe(plan.current)}",
            f"machine {plan.machine}" + (f" ({plan.other_machines} session(s) of other machines left out; "
                                         "--machine-key picks)" if plan.other_machines else "")]


def _spread_text(pooled: dict[str, Spread | None]) -> str:
    time = pooled.get("time")
    if time is None:
        return ("tests with fewer than 3 sessions in A are inconclusive: the history up to B holds too little "
                "spread to pool")
    fraction = pooled.get("fraction")
    also = f"; fraction sd {fraction.sigma:.1%}" if fraction is not None else ""
    return f"tests with fewer than 3 sessions in A use the time's {time.describe()}{also}"


def table(plan: Plan, rows: Sequence[Row], pooled: dict[str, Spread | None], width: int = 0) -> str:
    """The sessions compared, the table, each explanation under its row, the counts; with ``width``, test ids
    are shortened from the middle and the other lines wrapped so that every line fits."""
    cells = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEAD)]
    if width:
        widths[0] = min(widths[0], max(MIN_ID, width - sum(widths[1:]) - 2 * (len(HEAD) - 1)))
    numeric = {1, 2, 3}

    def line(values: Sequence[str]) -> str:
        values = [shorten_id(values[0], widths[0]), *values[1:]]
        return "  ".join(v.rjust(w) if i in numeric else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths))).rstrip()

    out = [*wrap([*_sides(plan), _spread_text(pooled)], width), "", line(HEAD)]
    for row, values in zip(rows, cells):
        out.append(line(values))
        if row.comparison is not None and row.verdict != "steady":
            out += wrap([f"    {row.comparison.explanation}"], width)
    counts = {v: sum(r.verdict == v for r in rows) for v in ORDER}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    out += ["", f"{len(rows)} test(s): {summary or 'none measured'}"]
    return "\n".join(out)
