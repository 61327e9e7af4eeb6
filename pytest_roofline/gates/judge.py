"""The gate: decide whether a measured test passes, from its verdict, its threshold and the session's policies.

Plain Python; the pytest glue turns a :class:`Judgement` into a failure or a teardown error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pytest_roofline.gates.judgement import Judgement
from pytest_roofline.measure import contention
from pytest_roofline.output.session_output import failure_report, impossible_fraction_message, roof_notes
from pytest_roofline.output.text import regions_uncounted
from pytest_roofline.record.tests import Measured, NothingCounted
from pytest_roofline.session.settings import MarkerOptions
from pytest_roofline.session.state import RooflineState, TestEntry

if TYPE_CHECKING:
    from pytest_roofline.gates.comparison import TestComparison
    from pytest_roofline.measure.regions import Recorder
    from pytest_roofline.model import Machine, Verdict


def keep(entry: TestEntry, judgement: Judgement) -> None:
    """Put what the gates decided on the test's entry, for its record; a test with nothing counted has nothing
    to measure again at the end of the session."""
    entry.min_fraction = judgement.min_fraction
    entry.extra.update(judgement.record_fields())
    entry.artifacts.extend(judgement.artifacts)
    if judgement.nothing_counted is not None:
        entry.nothing_counted = judgement.nothing_counted
        entry.recorder.contended.clear()


# The A/B gate (pytest_roofline.ab.verdict.judge_compare): its judgement (the failure message, the record's
# "compare" and the charts). It sits above the gates (it runs the twins), so the caller hands it in.
CompareJudge = Callable[[RooflineState, TestEntry, Measured, "MarkerOptions | None"], Judgement]


def judge(state: RooflineState, entry: TestEntry, measured: Measured, options: MarkerOptions | None, xfail: bool,
          compare: CompareJudge | None = None) -> Judgement:
    """Gate one measured test (:func:`judge_threshold`, then the baseline gate, or ``compare``, the A/B gate, in
    an A/B session); under ``--roofline-warn-only`` a failure becomes a warning (an error, a fraction no roof
    allows, stays an error: the roofs are wrong; in an A/B session it is a warning, and the A/B verdict is still
    given: :func:`judge_threshold`).

    A per-device threshold (``min_fraction={"cpu": ..., "cuda": ...}``) is chosen here, by where the test's
    call sites ran: ``cuda`` if any ran on a GPU. ``measured``: what its call sites measured
    (``Recorder.measured``), read once before judging. Nothing is written to ``entry``: :func:`keep` does that."""
    min_fraction, by_device = entry.min_fraction, None
    if options is not None and options.min_fraction_by_device is not None:
        min_fraction = options.fraction_for(measured.device)
        by_device = dict(options.min_fraction_by_device)
    # after a confirmation, ``measured`` is the measurement kept: the later gates judge that one
    outcome, measured = judge_threshold(state, entry, measured, options, xfail, min_fraction)
    outcome = replace(outcome, min_fraction_by_device=by_device)
    if outcome.error is not None or outcome.nothing_counted is not None:  # no fraction to compare
        return outcome
    if state.baseline is not None:  # numpy is imported only when there is a baseline to compare with
        outcome = _with_baseline(state, entry, measured, options, xfail, outcome)
    if state.compare_error is not None and outcome.failure is None:  # the A/B gate could not run: never a pass
        outcome = outcome.adding(failure=f"roofline: {state.compare_error}", warning=None)
    elif state.compare_ref is not None and outcome.failure is None:
        if compare is None:
            raise ValueError("an A/B session's tests are judged with its A/B gate: pass compare=judge_compare")
        paired = compare(state, entry, measured, options)  # keeps a roof warning
        outcome = replace(outcome.adding(paired.artifacts, failure=paired.failure), compare=paired.compare)
    if outcome.failure is not None and state.settings.warn_only:
        warned = f"{outcome.failure}\n  (--roofline-warn-only: reported, not failed)"
        return replace(outcome, not_gated="warn-only").adding(
            failure=None, warning=warned if outcome.warning is None else f"{outcome.warning}\n{warned}")
    return outcome


def paired(entry: TestEntry) -> bool:
    """Whether any call site of the test was timed in process pairs with REF (``--roofline-compare``)."""
    return any((getattr(region, "compare", None) or {}).get("compared") for region in entry.recorder.regions)


def _with_baseline(state: RooflineState, entry: TestEntry, measured: Measured, options: MarkerOptions | None,
                   xfail: bool, outcome: Judgement) -> Judgement:
    from pytest_roofline.gates.baseline_gate import compare_entry, judge_baseline, tolerances_of

    if outcome.failure is None:
        return judge_baseline(state, entry, measured, options, xfail, outcome)
    _, block = compare_entry(state, entry, measured, tolerances_of(state, options))  # failed on its threshold: recorded
    return replace(outcome, baseline=block) if block is not None else outcome


def judge_threshold(state: RooflineState, entry: TestEntry, measured: Measured, options: MarkerOptions | None,
                    xfail: bool, min_fraction: float | None) -> tuple[Judgement, Measured]:
    """Gate one measured test: uncounted work, an impossible fraction, then its threshold.

    Below the threshold, a contended measurement (no free core) is excused unless ``--roofline-strict`` (it is
    measured again at the end of the session), and ``--roofline-confirm on`` measures the test once more at
    once and keeps the faster: the test fails only when both measurements are below. Returns the judgement and
    the measurement it rests on (the one kept, after a confirmation), for the gates after it.
    """
    held = Judgement(min_fraction=min_fraction)
    policy = (options.uncounted if options and options.uncounted else None) or state.settings.uncounted
    if policy == "fail":
        missing = regions_uncounted(entry.recorder.regions)
        if missing:
            return held.adding(failure=(
                f"roofline: FLOP-bearing ops without a counting rule ran ({missing}); the fraction would be too "
                "low. Declare the work (roofline.declare) or set uncounted='warn'.")), measured
    verdict = measured.verdict
    nothing = nothing_counted_message(entry, verdict)
    if nothing is not None:
        held = replace(held, nothing_counted=NothingCounted(tuple(seen_ops(entry.recorder)), nothing))
        # with a threshold there is nothing to hold it to: an error of the test, never a pass
        return held.adding(error=f"roofline: {nothing}") if min_fraction is not None else held, measured
    machine = measured.judged
    if verdict is None or machine is None:  # nothing measured: nothing to gate
        return held, measured
    held = replace(held, roof_notes=tuple(roof_notes(machine, verdict.flops)))  # emulated precisions
    impossible = roof_check(state, machine, verdict)
    if impossible is not None and state.compare_ref is not None and paired(entry):
        # an A/B session has no live probe (both sides on the cached roofs): on a host running faster than when
        # it was characterized, a memory-bound call passes its cached roof; the A/B verdict compares times and
        # does not rest on it, so it is still given (an error here lost it), with the roof named as a warning
        return replace(held, roof_warning=impossible).adding(warning=(
            f"{impossible}\n  (an A/B session judges on the cached roofs, with no live probe: the A/B verdict "
            "compares times and stands; the fraction does not)")), measured
    if impossible is not None:
        return held.adding(error=impossible), measured
    if min_fraction is None or verdict.fraction >= min_fraction:
        return held, measured
    if not state.settings.strict and not xfail and entry.recorder.is_contended():
        return replace(held, not_gated="contended"), measured  # measured again at the end of the session
    if state.settings.confirm == "on" and not xfail:
        first = verdict.fraction
        again = entry.recorder.measured() if entry.recorder.confirm() else None  # the faster one is kept
        if again is not None and again.verdict is not None and again.judged is not None:
            measured, verdict, machine = again, again.verdict, again.judged
            held = replace(held, confirmed=(first, verdict.fraction))
            if verdict.fraction >= min_fraction:
                return held, measured
    entry.recorder.time_ops()  # per-op times for its artifacts (--roofline-ops failed|always)
    message, paths = failure_report(state.session_dir, entry.nodeid, machine, entry.recorder.regions, verdict,
                                    min_fraction, entry.details)
    return held.adding(artifacts=[str(p) for p in paths], failure=message), measured


def roof_check(state: RooflineState, machine: Machine, verdict: Verdict) -> str | None:
    """The error for a fraction no roof of ``machine`` (the roofs that judged it) allows, else None."""
    s = state.settings
    origin = (f"pinned file {s.machine_file}" if s.machine_file is not None else
              f"the characterization cache (fingerprint {state.machine().info.get('fingerprint_hash', '?')})")
    return impossible_fraction_message(verdict, machine, origin)


def has_work(verdict: Verdict | None) -> bool:
    return verdict is not None and (verdict.total_flops > 0 or any(v > 0 for v in verdict.bytes.values()))


def seen_ops(recorder: Recorder) -> list[str]:
    """The ops the counter saw in the test's calls (the analytic counter's trace), in order of first call."""
    names: dict[str, None] = {}
    for counter, *_ in recorder.calls.values():
        for op in getattr(counter, "trace", None) or ():
            names.setdefault(str(getattr(op, "op", op)), None)
    for region in recorder.regions:
        names.update((str(op), None) for op in getattr(region, "uncounted", {}) or {})
    return list(names)


def nothing_counted_message(entry: TestEntry, verdict: Verdict | None) -> str | None:
    """What to say of a measured test whose calls counted no FLOPs and no bytes (None when they did), from its
    ``verdict``."""
    if verdict is None or has_work(verdict):
        return None
    ops = seen_ops(entry.recorder)
    shown = ", ".join(ops[:8]) + (f" and {len(ops) - 8} more" if len(ops) > 8 else "")
    saw = f"the counter saw {shown}" if ops else "the counter saw no op it can count (numpy, C or other code)"
    ncu = (entry.extra.get("ncu") or {}).get("error") if isinstance(entry.extra, dict) else None
    why = f"\n  before it, ncu: {ncu}" if ncu else ""  # ncu saw no kernel either: the work is outside the ranges
    return ("no work counted: declare it with roofline.declare(flops=..., bytes=...).measure(fn, *args)\n"
            f"  {saw}; {len(entry.recorder.regions)} call site(s), {verdict.time_s * 1e3:.3g} ms per call{why}")


@dataclass(frozen=True)
class Remeasured:
    """A test measured again at the end of the session; ``failure``: its message when it fails now."""

    entry: TestEntry
    failure: str | None = None


def remeasure_contended(state: RooflineState) -> list[Remeasured]:
    """Measure contended call sites again now that the session's own work is done, for the tests that passed
    with a contended measurement (a test that failed, or was gated under ``--roofline-strict``, keeps the
    measurement its verdict was given on). A region still contended keeps the better of its two timings.
    A test still below its threshold, or regressed against the baseline, uncontended is failed now; one still
    contended is failed too under ``--roofline-contended judge``, its tolerance widened by the spread of its two
    contended measurements (:mod:`pytest_roofline.measure.contention`)."""
    judge_mode = contention.resolve(state.settings.contended, baseline=state.baseline is not None,
                                    compare=state.compare_ref is not None or bool(state.settings.compare))
    done: list[Remeasured] = []
    for entry in state.tests.values():
        if entry.recorder is None or not entry.recorder.contended:
            continue
        if state.settings.strict or entry.outcome != "passed" or entry.nothing_counted is not None:
            entry.recorder.contended.clear()
            continue
        first_times = contention.region_times(entry.recorder.regions)
        remeasured = entry.recorder.remeasure_contended() > 0  # not a call longer than the budget
        contended = entry.recorder.is_contended()
        entry.extra["contended"] = {"remeasured": remeasured, "still_contended": contended}
        judged = contended and judge_mode == "judge"
        widen = 0.0
        if judged:  # judged all the same, with the tolerance its own contended measurements need
            widen = contention.spread(first_times, contention.region_times(entry.recorder.regions),
                                      contention.region_iqr(entry.recorder.regions))
            entry.extra["contended"].update(judged=True, spread=round(widen, 4))
        measured = entry.recorder.measured()
        verdict = measured.verdict
        threshold = (None if entry.min_fraction is None else
                     contention.widened_min_fraction(entry.min_fraction, widen) if judged else entry.min_fraction)
        below = threshold is not None and verdict is not None and verdict.fraction < threshold
        compared = None
        if state.baseline is not None and verdict is not None and "baseline" in entry.extra:
            from pytest_roofline.gates.baseline_gate import compare_entry, tolerances_from_record

            # compared again on the new measurement; a regression fails like a fraction below its threshold
            tolerances = tolerances_from_record(entry.extra["baseline"])
            if judged:
                drop, slowdown = contention.widened_tolerances(tolerances.max_drop, tolerances.max_slowdown, widen)
                tolerances = type(tolerances)(drop, slowdown, tolerances.fail_on)
            compared, block = compare_entry(state, entry, measured, tolerances)
            if block is not None:
                entry.extra["baseline"] = block
            if compared is not None and compared.verdict == "regressed" and contended and not judged:
                entry.extra["baseline"]["excused"] = "contended"
        regressed = compared is not None and compared.verdict == "regressed"
        entry.extra.pop("not_gated", None)
        failure = None
        if (below or regressed) and contended and not judged:
            entry.extra["not_gated"] = "contended"
        elif (below or regressed) and state.settings.warn_only:
            entry.extra["not_gated"] = "warn-only"
        elif below or regressed:
            failure = _late_failure(state, entry, measured, compared if regressed and not below else None,
                                    contention.describe(widen) if judged else None)
            entry.outcome = "failed"
            entry.extra["contended"]["failed_when_remeasured"] = True
        entry.recorder.contended.clear()
        entry.record = None  # a new measurement: its record is built again
        done.append(Remeasured(entry, failure))
    return done


def _late_failure(state: RooflineState, entry: TestEntry, measured: Measured, regression: TestComparison | None,
                  judged: str | None = None) -> str:
    """The failure message of a test failed after it was measured again, as the gate would have said it."""
    if regression is not None or entry.min_fraction is None:
        from pytest_roofline.gates.baseline_gate import regression_report

        assert regression is not None  # without a threshold only a regression fails a test late

        confirmed = entry.extra.get("confirmed")  # Judgement.record_fields wrote it
        message, paths = regression_report(state, entry, measured, regression, entry.extra["baseline"],
                                           None if confirmed is None else (confirmed["first"], confirmed["second"]))
        entry.artifacts.extend(paths)
    else:
        verdict, machine = measured.verdict, measured.judged
        assert verdict is not None and machine is not None  # below its threshold: it was measured

        message, written = failure_report(state.session_dir, entry.nodeid, machine, entry.recorder.regions, verdict,
                                          entry.min_fraction, entry.details)
        entry.artifacts.extend(str(p) for p in written)
    if judged is not None:
        return message + f"\n  (contended: measured again at the end of the session, still contended; {judged})"
    return message + "\n  (contended at first: measured again at the end of the session, uncontended)"
