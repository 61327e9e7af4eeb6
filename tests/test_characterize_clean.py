"""When a characterization is kept: clean.py's rules with hand-made numbers, the load watch on made-up
/proc/stat text, and the cache around them (not kept, kept, spot-checked) with fake measurements."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401 - pytester's in-process run must not be the first to import these:
import pytest
import torch  # noqa: F401 - it drops modules first imported during the run, and torch cannot load twice

from pytest_roofline.characterize import clean, cpu_ert, dram_samples, spot_check
from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.host.load_watch import Disturbance, LoadWatch, parse_core_ticks
from pytest_roofline.model import Machine

GB = 1e9


# --- one pass ---------------------------------------------------------------------------------------------

def test_a_quiet_pass_is_not_disturbed() -> None:
    assert clean.pass_reason(Disturbance(others_ticks=0, steal_ticks=0, wall_ticks=10, cores=2)) is None
    assert clean.pass_reason(None) is None  # nothing known (no /proc): nothing flagged


def test_one_tick_of_other_work_in_a_short_pass_is_noise() -> None:
    assert clean.pass_reason(Disturbance(others_ticks=1, steal_ticks=1, wall_ticks=2, cores=2)) is None


def test_a_busy_neighbour_disturbs_a_pass() -> None:
    # A Python loop beside two kernel threads on 2 vCPUs gets about a third of the time: 7 of 20 ticks.
    reason = clean.pass_reason(Disturbance(others_ticks=7, steal_ticks=0, wall_ticks=10, cores=2))
    assert reason is not None and "35%" in reason
    assert clean.pass_reason(Disturbance(others_ticks=3, steal_ticks=0, wall_ticks=10, cores=2)) is None  # 15 %


def test_steal_disturbs_a_pass() -> None:
    reason = clean.pass_reason(Disturbance(others_ticks=0, steal_ticks=2, wall_ticks=10, cores=2))
    assert reason is not None and "steal" in reason


def _stat(*cores: tuple[int, int, int, int]) -> str:
    """/proc/stat text; per core (user, system, idle, steal)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{i} {u} 0 {s} {idle} 0 0 0 {st} 0 0" for i, (u, s, idle, st) in enumerate(cores)]
    return "\n".join(lines) + "\nintr 1 2 3\n"


def _own(ticks: int) -> str:
    fields = ["S"] + ["0"] * 10 + [str(ticks), "0"] + ["0"] * 30
    return f"123 (py thon) {' '.join(fields)}"


def test_load_watch_leaves_out_our_own_ticks() -> None:
    texts = iter([_stat((100, 10, 50, 0), (200, 0, 50, 0)), _stat((120, 10, 50, 0), (220, 0, 50, 3))])
    owns = iter([_own(1000), _own(1030)])
    watch = LoadWatch.start([0, 1], read=lambda: next(texts), read_own=lambda: next(owns))
    assert watch is not None
    seen = watch.stop()
    # 40 busy ticks on the two cores, 30 of them ours; 3 stolen; 43 ticks in all over 2 cores
    assert seen == Disturbance(others_ticks=10, steal_ticks=3, wall_ticks=21.5, cores=2)


def test_load_watch_counts_only_the_cores_measured_on() -> None:
    texts = iter([_stat((0, 0, 0, 0), (0, 0, 0, 0)), _stat((0, 0, 20, 0), (20, 0, 0, 0))])
    owns = iter([_own(0), _own(0)])
    watch = LoadWatch.start([0], read=lambda: next(texts), read_own=lambda: next(owns))
    assert watch is not None and watch.stop() == Disturbance(0, 0, 20.0, 1)  # the neighbour sits on core 1


def test_parse_core_ticks_skips_the_total_line() -> None:
    assert sorted(parse_core_ticks(_stat((1, 2, 3, 4)))) == [0]


def test_pass_guard_remembers_why() -> None:
    class Watch:
        def __init__(self, others: int) -> None:
            self.others = others

        def stop(self) -> Disturbance:
            return Disturbance(self.others, 0, 10, 2)

    others = iter([0, 9])
    guard = clean.PassGuard(lambda: Watch(next(others)), [])
    assert guard.run(lambda: 1) == (1, None)
    value, reason = guard.run(lambda: 2)
    assert value == 2 and reason is not None and guard.reasons == [reason]


# --- a record's rules ---------------------------------------------------------------------------------------

def _row(size: int, rate: float, clean_: bool = True, quiet: bool = True) -> dict[str, Any]:
    return {"working_set_bytes": size, "bytes_per_s": rate, "clean": clean_, "quiet": quiet}


def _info(update_rows: list[dict[str, Any]], update_samples: list[float], disturbed: int = 0) -> dict[str, Any]:
    return {"method": "ert", "levels": {
        "L1": {"kernel": "ert-update", "window_bytes": [0, 100], "update_bytes_per_s": 500 * GB},
        "DRAM": {"kernel": "ert-update", "window_bytes": [1000, 2000],
                 "samples": {"working_set_bytes": 1500, "update_samples": update_samples, "triad_samples": [],
                             "update_bytes_per_s": 40 * GB, "disturbed_samples": disturbed}}},
        "sweep": {"update": update_rows, "triad": []}}


QUIET_SAMPLES = [40 * GB + i * 0.2 * GB for i in range(16)]  # 40.0-43.0 GB/s
THREE_CLEAN = [_row(10, 500 * GB), _row(20, 505 * GB), _row(40, 498 * GB), _row(200, 300 * GB, False)]


def test_a_record_with_enough_undisturbed_passes_is_clean() -> None:
    assert clean.record_reasons({"L1": 500 * GB, "DRAM": 41 * GB}, _info(THREE_CLEAN, QUIET_SAMPLES)) == []


def test_a_level_with_too_few_undisturbed_points_is_not_clean() -> None:
    rows = [_row(10, 500 * GB), _row(20, 505 * GB, quiet=False), _row(40, 498 * GB, clean_=False)]
    reasons = clean.record_reasons({"L1": 500 * GB, "DRAM": 41 * GB}, _info(rows, QUIET_SAMPLES))
    assert reasons == ["L1: 1 undisturbed sweep point(s) of 3 in its window (at least 3 needed)"]


def test_too_few_dram_samples_is_not_clean() -> None:
    # The case: every pass but four left out, the roof set by what remained.
    reasons = clean.dram_sample_reasons(_info(THREE_CLEAN, QUIET_SAMPLES[:4], disturbed=60))
    assert reasons == ["DRAM: 4 undisturbed update passes (60 disturbed; at least 12 needed)"]


def test_widely_spread_dram_samples_are_not_clean() -> None:
    spread = [20 * GB, 26 * GB, 32 * GB, 44 * GB, 56 * GB, 62 * GB] * 2  # quartiles 26, 56; median 38: 0.79
    reasons = clean.dram_sample_reasons(_info(THREE_CLEAN, spread))
    assert len(reasons) == 1 and "spread 79%" in reasons[0]
    quiet_evening = [36.8, 37.1, 37.5, 38.9, 39.7, 40.5, 42.2, 43.6, 44.3, 47.6, 48.9, 49.5, 50.7, 52.8, 53.3]
    assert clean.dram_sample_reasons(_info(THREE_CLEAN, [v * GB for v in quiet_evening])) == []  # ~0.25, kept
    assert clean.relative_spread(QUIET_SAMPLES) == pytest.approx(0.0375, abs=0.005)


def test_dram_without_samples_is_not_clean() -> None:
    info = _info(THREE_CLEAN, QUIET_SAMPLES)
    del info["levels"]["DRAM"]["samples"]
    assert clean.dram_sample_reasons(info) == ["DRAM: no single-pass samples, only the sweep's plateau"]


def test_dram_above_the_last_cache_is_not_clean() -> None:
    assert clean.dram_vs_cache_reasons({"L1": 600 * GB, "L3": 90 * GB, "DRAM": 103 * GB}) == [
        "DRAM 103 GB/s is above L3 (90 GB/s)"]
    assert clean.dram_vs_cache_reasons({"L1": 600 * GB, "L3": 370 * GB, "DRAM": 56 * GB}) == []


def test_records_without_ert_evidence_are_judged_on_their_roofs_only() -> None:
    assert clean.record_reasons({"DRAM": 20 * GB}, {"method": "blas-fallback"}) == []


@pytest.mark.parametrize(("all_cores", "one_core", "expected"), [
    (57 * GB, 52 * GB, None),           # DRAM saturates: fine
    (114.5 * GB, 40 * GB, "above"),     # a busy all-core DRAM of 114.5 against a 1-core 40: above 1.3 x 2 x 40
    (114.5 * GB, 50 * GB, None),        # ... against 50 it is within the margin host drift needs (1.3 x 2 x 50)
    (39 * GB, 50 * GB, "below"),        # the too-low one: 0.78 x
    (41 * GB, 50 * GB, None),           # 0.82 x: within the 0.8 floor
    (412 * GB, 174 * GB, None),         # a clean all-core L1 against a 1-core one cached in a slower moment
])
def test_all_core_roofs_between_one_core_and_cores_times_it(all_cores: float, one_core: float,
                                                             expected: str | None) -> None:
    reasons = clean.core_count_reasons({"bandwidth": {"DRAM": all_cores}}, {"bandwidth": {"DRAM": one_core}}, 2)
    assert (reasons == []) if expected is None else (len(reasons) == 1 and expected in reasons[0])


def test_spot_check_margin() -> None:
    assert clean.spot_reasons({"DRAM": (41 * GB, 40 * GB), "L1": (470 * GB, 560 * GB)}) == []
    reasons = clean.spot_reasons({"DRAM": (56 * GB, 39 * GB), "L1": (600 * GB, 358 * GB)})
    assert [r.split(":")[0] for r in reasons] == ["DRAM", "L1"]
    assert clean.spot_directions({"DRAM": (56 * GB, 39 * GB), "L1": (280 * GB, 358 * GB)}) == {"DRAM": 1, "L1": -1}


@pytest.mark.parametrize(("spot", "band", "off"), [
    (53, (38.9, 48.3), False),  # a fast moment of the quiet host (its 28 passes read 36.8-53.3; median 42.5)
    (37, (38.9, 48.3), False),  # a slow one
    (60, (38.9, 48.3), True),   # 60 / 48.3 = 1.24: outside by more than 20 %
    (45, (33.0, 36.0), True),   # a record measured in a slow moment throughout: 45 / 36 = 1.25
    (30, (38.9, 48.3), True),   # 30 / 38.9 = 0.77
])
def test_dram_spot_is_judged_against_the_records_own_passes(spot: float, band: tuple[float, float],
                                                            off: bool) -> None:
    reading = clean.Spot.of(spot * GB, 42.5 * GB if band[0] > 35 else 34.5 * GB, (band[0] * GB, band[1] * GB))
    reasons = clean.spot_reasons({"DRAM": reading})
    assert bool(reasons) is off
    if off:
        assert "its passes" in reasons[0] and "at most 20% outside" in reasons[0]


# --- the sweeps and samples under a guard -------------------------------------------------------------------

def test_an_undisturbed_pass_wins_over_a_faster_disturbed_one() -> None:
    calm = cpu_ert.SweepPoint("fp64", 256, 1, 1024, 10, 1.0)
    fast_but_busy = cpu_ert.SweepPoint("fp64", 256, 1, 1024, 10, 0.5, quiet=False)
    assert cpu_ert.faster_of([calm], [fast_but_busy]) == [calm]
    assert cpu_ert.faster_of([fast_but_busy], [calm]) == [calm]
    faster_calm = cpu_ert.SweepPoint("fp64", 256, 1, 1024, 10, 0.8)
    assert cpu_ert.faster_of([calm], [faster_calm]) == [faster_calm]


def test_guarded_sweep_marks_a_disturbed_segment() -> None:
    reasons = iter([None, "busy"])

    class Guard:
        def run(self, body: Any) -> tuple[Any, str | None]:
            return body(), next(reasons)

    def one(size: int) -> cpu_ert.SweepPoint:
        return cpu_ert.SweepPoint("fp64", 256, 1, size, 1, 1.0)

    points = cpu_ert.guarded([1, 2, 30, 40], one, Guard(), lambda size: size < 10)  # type: ignore[arg-type]
    assert [p.quiet for p in points] == [True, True, False, False]


def test_a_disturbed_moment_leaves_out_all_its_dram_passes() -> None:
    class Rates:
        def update_rate(self, working_set_bytes: int) -> float | None:
            return 100 * GB  # reads high, as beside a neighbour

        def triad_rate(self, working_set_bytes: int) -> float | None:
            return 30 * GB

        def scale_rate(self, working_set_bytes: int) -> float | None:
            return 40 * GB

        def copy_rate(self, working_set_bytes: int) -> float | None:
            return 45 * GB

        copy_source = "torch-copy"

    class Guard:
        def run(self, body: Any) -> tuple[Any, str | None]:
            return body(), "other processes used 40% of the cores measured on"

    sampler = dram_samples.DramSampler(Rates(), 1024, guard=Guard())  # type: ignore[arg-type]
    sampler.take()
    assert sampler.update == sampler.triad == sampler.scale == sampler.copy == [] and sampler.disturbed == 16
    assert sampler.to_info()["moments_disturbed"] == ["other processes used 40% of the cores measured on"]


# --- the cache: not kept, kept, spot-checked -----------------------------------------------------------------

FINGERPRINT = {"device": "cpu", "cpu_model": "test", "core_count": 2}


def _ert_machine(dram: float, samples: list[float], rows: list[dict[str, Any]] = THREE_CLEAN) -> Machine:
    info = _info(rows, samples)
    info["kernel"] = {"libraries": {"256": "/nonexistent/ert.so"}, "chains": 8}
    info["levels"]["DRAM"]["samples"]["update_bytes_per_s"] = dram  # the roof is the record's own median
    info["date"] = dt.datetime.now(dt.timezone.utc).isoformat()  # as _measure stamps it
    return Machine("fake", {"fp64": 50 * GB}, {"L1": 500 * GB, "DRAM": dram}, info)


@pytest.fixture
def measurements(monkeypatch: pytest.MonkeyPatch) -> list[Machine]:
    """Fake measurements: each characterization pops the next machine of the returned list."""
    queue: list[Machine] = []

    def measure(kind: str, index: int, fields: dict[str, Any], digest: str, report: Any, cache_dir: Path) -> Machine:
        return queue.pop(0)

    monkeypatch.setattr(machine_api, "fingerprint", lambda device="cpu": dict(FINGERPRINT))
    monkeypatch.setattr(machine_api, "_measure", measure)
    monkeypatch.setattr(machine_api, "_neighbour_still_there", lambda report: False)
    monkeypatch.setattr(machine_api, "SPOT_CONFIRM_PAUSE", 0.0)
    return queue


def _cache_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("machine-*.json"))


def test_a_disturbed_record_is_not_cached(tmp_path: Path, measurements: list[Machine]) -> None:
    busy = _ert_machine(36 * GB, QUIET_SAMPLES[:4])  # four passes left of 32: the "median of 4 samples"
    measurements += [busy, busy, _ert_machine(41 * GB, QUIET_SAMPLES)]
    messages: list[str] = []
    with pytest.warns(machine_api.DisturbedCharacterizationWarning, match="not kept"):
        first = machine_api.characterize(cache_dir=tmp_path, progress=messages.append)
    assert "4 undisturbed update passes" in first.info["not_kept"]
    assert _cache_files(tmp_path) == []  # never written
    assert any(m.startswith("not kept, used by this session only (DRAM: 4 undisturbed") for m in messages)
    second = machine_api.characterize(cache_dir=tmp_path)  # the next session measures again: clean, kept
    assert second.bandwidth["DRAM"] == 41 * GB and "not_kept" not in second.info
    assert len(_cache_files(tmp_path)) == 1


def test_a_clean_attempt_is_used_alone(tmp_path: Path, measurements: list[Machine]) -> None:
    measurements += [_ert_machine(103 * GB, QUIET_SAMPLES[:4]), _ert_machine(41 * GB, QUIET_SAMPLES)]
    machine = machine_api.characterize(cache_dir=tmp_path)
    assert machine.bandwidth["DRAM"] == 41 * GB  # not the disturbed attempt's 103 merged in
    assert len(_cache_files(tmp_path)) == 1


def test_no_second_attempt_beside_the_same_neighbour(tmp_path: Path, measurements: list[Machine],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine_api, "_neighbour_still_there", lambda report: True)
    measurements += [_ert_machine(36 * GB, QUIET_SAMPLES[:4])]
    with pytest.warns(machine_api.DisturbedCharacterizationWarning):
        machine = machine_api.characterize(cache_dir=tmp_path)
    assert len(machine.info["attempts"]) == 1 and measurements == []


def test_xdist_workers_of_one_run_share_a_record_that_is_not_kept(tmp_path: Path, measurements: list[Machine],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run-1")
    busy = _ert_machine(36 * GB, QUIET_SAMPLES[:4])
    measurements += [busy, busy]
    with pytest.warns(machine_api.DisturbedCharacterizationWarning):
        machine_api.characterize(cache_dir=tmp_path)
    assert _cache_files(tmp_path) == ["machine-cpu-" + machine_api.fingerprint_hash(FINGERPRINT) + ".run-run-1.json"]
    again = machine_api.characterize(cache_dir=tmp_path)  # another worker of the same run: no measurement
    assert again.info["not_kept"] and measurements == []


def test_an_all_core_record_far_above_the_cached_one_core_roofs_is_not_kept(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.characterize import ceiling_cache
    from pytest_roofline.host import cores

    monkeypatch.setattr(cores, "base_affinity", lambda: [0, 1])
    one_fields = cores.core_count_fingerprint(FINGERPRINT, 1, [0, 1])
    one_core = Machine("one", {"fp64": 25 * GB}, {"L1": 300 * GB, "DRAM": 50 * GB}, {"method": "fake"})
    ceiling_cache.write_cached(ceiling_cache.cache_path(tmp_path, "cpu", machine_api.fingerprint_hash(one_fields)),
                               one_fields, one_core)
    high = _ert_machine(134 * GB, [134 * GB] * 16)
    high.bandwidth["L1"] = 500 * GB
    measurements += [high, _ert_machine(57 * GB, QUIET_SAMPLES)]
    monkeypatch.setattr(machine_api, "_neighbour_still_there", lambda report: True)
    with pytest.warns(machine_api.DisturbedCharacterizationWarning):
        machine = machine_api.characterize(cache_dir=tmp_path)
    assert "DRAM on all 2 cores (134 GB/s) is above 1.3 x 2 x its 1-core roof (50)" in machine.info["not_kept"]
    assert len(_cache_files(tmp_path)) == 1  # the 1-core record only: nothing written, nothing dropped


def test_two_clean_attempts_that_disagree_only_with_the_other_core_count_replace_it(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.characterize import ceiling_cache
    from pytest_roofline.host import cores

    monkeypatch.setattr(cores, "base_affinity", lambda: [0, 1])
    one_fields = cores.core_count_fingerprint(FINGERPRINT, 1, [0, 1])
    one_path = ceiling_cache.cache_path(tmp_path, "cpu", machine_api.fingerprint_hash(one_fields))
    slow_moment = Machine("one", {"fp64": 25 * GB}, {"L1": 150 * GB, "DRAM": 30 * GB}, {"method": "fake"})
    ceiling_cache.write_cached(one_path, one_fields, slow_moment)
    first, second = _ert_machine(41 * GB, QUIET_SAMPLES), _ert_machine(40 * GB, QUIET_SAMPLES)  # L1 500 each
    measurements += [first, second]
    messages: list[str] = []
    machine = machine_api.characterize(cache_dir=tmp_path, progress=messages.append)
    assert "not_kept" not in machine.info and machine.bandwidth["DRAM"] == 40 * GB  # the last attempt, alone
    assert machine.info["dropped_other_core_count"]["reasons"] == [
        "L1 on all 2 cores (500 GB/s) is above 1.3 x 2 x its 1-core roof (150)"]
    assert not one_path.exists() and len(_cache_files(tmp_path)) == 1  # kept; the odd 1-core record is gone
    assert any(m.startswith("both attempts are clean by their own evidence") for m in messages)
    assert any(m.startswith(f"removed {one_path}") for m in messages)


def test_one_attempt_refused_by_the_other_core_count_then_a_clean_one_keeps_both(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.characterize import ceiling_cache
    from pytest_roofline.host import cores

    monkeypatch.setattr(cores, "base_affinity", lambda: [0, 1])
    one_fields = cores.core_count_fingerprint(FINGERPRINT, 1, [0, 1])
    one_path = ceiling_cache.cache_path(tmp_path, "cpu", machine_api.fingerprint_hash(one_fields))
    ceiling_cache.write_cached(one_path, one_fields,
                               Machine("one", {"fp64": 25 * GB}, {"L1": 250 * GB, "DRAM": 30 * GB}, {"method": "fake"}))
    odd = _ert_machine(41 * GB, QUIET_SAMPLES)
    odd.bandwidth["L1"] = 700 * GB  # 1.4 x 2 x 250
    measurements += [odd, _ert_machine(40 * GB, QUIET_SAMPLES)]
    machine = machine_api.characterize(cache_dir=tmp_path)
    assert machine.bandwidth["L1"] == 500 * GB and "dropped_other_core_count" not in machine.info
    assert one_path.exists()


def _cached_ert(tmp_path: Path, machine: Machine) -> None:
    from pytest_roofline.characterize import ceiling_cache

    ceiling_cache.write_cached(ceiling_cache.cache_path(tmp_path, "cpu", machine_api.fingerprint_hash(FINGERPRINT)),
                               FINGERPRINT, machine)


def test_a_cached_record_failing_the_spot_check_is_measured_again(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch) -> None:
    _cached_ert(tmp_path, _ert_machine(39 * GB, [39 * GB] * 16))  # the too-low DRAM roof
    monkeypatch.setattr(spot_check, "plan", lambda info: {"planned": True})
    monkeypatch.setattr(spot_check, "run", lambda info, **_: (
        {"DRAM": (56 * GB, 39 * GB), "L1": (500 * GB, 500 * GB)}, "checked", []))
    measurements.append(_ert_machine(56 * GB, [56 * GB + i * 1e8 for i in range(16)]))
    messages: list[str] = []
    machine = machine_api.characterize(cache_dir=tmp_path, progress=messages.append)
    assert machine.bandwidth["DRAM"] == 56 * GB and measurements == []
    assert any("spot check: the cached roofs disagree" in m and "1.44x" in m for m in messages)
    stored = json.loads(next(tmp_path.glob("machine-*.json")).read_text())
    assert stored["machine"]["bandwidth"]["DRAM"] == 56 * GB  # the re-measured clean record replaced it


@pytest.mark.parametrize(("second", "measured"), [
    ({"DRAM": (40 * GB, 39 * GB)}, False),   # a moment of the host: the second check agrees
    ({"DRAM": (25 * GB, 39 * GB)}, False),   # off on the other side: no confirmation either
    ({"DRAM": (55 * GB, 39 * GB)}, True),    # off on the same side twice: measured again
])
def test_a_spot_check_that_disagrees_is_confirmed_before_measuring_again(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch,
        second: dict[str, tuple[float, float]], measured: bool) -> None:
    _cached_ert(tmp_path, _ert_machine(39 * GB, [39 * GB] * 16))
    monkeypatch.setattr(spot_check, "plan", lambda info: {"planned": True})
    checks = [({"DRAM": (56 * GB, 39 * GB)}, "checked", []), (second, "checked", [])]
    monkeypatch.setattr(spot_check, "run", lambda info, **_: checks.pop(0))
    measurements.append(_ert_machine(56 * GB, [56 * GB + i * 1e8 for i in range(16)]))
    messages: list[str] = []
    machine = machine_api.characterize(cache_dir=tmp_path, progress=messages.append)
    assert checks == [] and machine.bandwidth["DRAM"] == (56 * GB if measured else 39 * GB)
    assert any(m.startswith("spot check disagrees (DRAM: a spot pass read 56 GB/s") for m in messages)
    assert any("spot check unconfirmed" in m for m in messages) is not measured


@pytest.mark.parametrize("spots", [({"DRAM": (40 * GB, 39 * GB)}, "checked", []), (None, "not judged: busy", [])])
def test_a_cached_record_is_used_when_the_spot_check_agrees_or_cannot_judge(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch, spots: Any) -> None:
    _cached_ert(tmp_path, _ert_machine(39 * GB, [39 * GB] * 16))
    monkeypatch.setattr(spot_check, "plan", lambda info: {"planned": True})
    monkeypatch.setattr(spot_check, "run", lambda info, **_: spots)
    assert machine_api.characterize(cache_dir=tmp_path).bandwidth["DRAM"] == 39 * GB  # nothing measured


def test_the_spot_check_can_be_switched_off(tmp_path: Path, measurements: list[Machine],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _cached_ert(tmp_path, _ert_machine(39 * GB, [39 * GB] * 16))
    monkeypatch.setattr(spot_check, "plan", lambda info: {"planned": True})
    monkeypatch.setattr(spot_check, "run", lambda info, **_: pytest.fail("must not run"))
    monkeypatch.setenv(spot_check.ENV, "0")
    assert machine_api.characterize(cache_dir=tmp_path).bandwidth["DRAM"] == 39 * GB


def test_spot_check_plan_needs_the_records_kernel_library(tmp_path: Path) -> None:
    machine = _ert_machine(40 * GB, QUIET_SAMPLES)
    assert spot_check.plan(dict(machine.info)) is None  # /nonexistent/ert.so
    library = tmp_path / "ert.so"
    library.write_bytes(b"")
    machine.info["kernel"]["libraries"] = {"256": str(library)}
    steps = spot_check.plan(dict(machine.info))
    # L1 at the sweep size nearest the window's geometric middle (10 .. 100: 31.6), not its fastest point (20)
    assert steps is not None and steps["l1_bytes"] == 40 and steps["dram_bytes"] == 1500 and steps["width"] == 32
    assert steps["dram_band"] == pytest.approx((40.65 * GB, 42.35 * GB))  # quartiles of 40.0 .. 43.0 in 0.2 steps
    assert steps["compute"] == {}  # no FMA sweep nor FLOP roof handed in: L1 and DRAM only
    assert spot_check.plan({"method": "fake"}) is None


def test_spot_check_plan_takes_the_fma_point_that_set_the_fp64_peak(tmp_path: Path) -> None:
    machine = _ert_machine(40 * GB, QUIET_SAMPLES)
    library = tmp_path / "ert.so"
    library.write_bytes(b"")
    machine.info["kernel"]["libraries"] = {"256": str(library)}
    fma = [{"precision": "fp64", "vector_bits": 256, "flops_per_element": f, "working_set_bytes": 16384,
            "flop_per_s": rate * GB} for f, rate in ((64, 90.0), (512, 99.8), (1024, 99.1))]
    machine.info["sweep"]["flops"] = [*fma, {**fma[1], "vector_bits": 128, "flop_per_s": 120 * GB}]  # not 256-bit
    machine.info["isa_peaks"] = {"fp64": {"256": 99.8 * GB, "128": 40.2 * GB}}
    steps = spot_check.plan(dict(machine.info))
    assert steps is not None and steps["compute"] == {"fp64": {"flops": 512, "bytes": 16384, "cached": 99.8 * GB}}
    halved = clean.Spot.of(53.5 * GB, 99.8 * GB, unit="GFLOP/s")  # two vCPUs on one core's SMT siblings
    assert clean.spot_reasons({"fp64": halved}) == [
        "fp64: a spot pass read 53.5 GFLOP/s, the cache says 99.8 (0.54x; at most 20% outside)"]


def _fp32_tenth(tmp_path: Path) -> Machine:
    """A cached ERT record whose fp32 roof (and the FMA sweep behind it) was edited to a tenth of a machine that
    does 100 GFLOP/s fp64 and 200 fp32 at 256 bits."""
    machine = _ert_machine(40 * GB, QUIET_SAMPLES)
    library = tmp_path / "ert.so"
    library.write_bytes(b"")
    machine.info["kernel"]["libraries"] = {"256": str(library)}
    machine.info["sweep"]["flops"] = [
        {"precision": p, "vector_bits": 256, "flops_per_element": 512, "working_set_bytes": 16384,
         "flop_per_s": rate * GB} for p, rate in (("fp64", 100.0), ("fp32", 20.0))]
    machine.info["isa_peaks"] = {"fp64": {"256": 100 * GB}, "fp32": {"256": 20 * GB}}
    return Machine("fake", {"fp64": 100 * GB, "fp32": 20 * GB}, machine.bandwidth, machine.info)


class _Watch:
    """What the load watch saw beside the probes: ``others`` busy ticks of other processes in 10 on 2 cores."""

    def __init__(self, others: int) -> None:
        self.others = others

    def stop(self) -> Disturbance:
        return Disturbance(self.others, 0, 10, 2)


def _rates(slowdown: float, clean_: bool) -> spot_check.Rates:
    """The probes' rates on the machine ``_fp32_tenth`` describes, ``slowdown`` x slower (other work)."""
    def one(rate: float) -> list[spot_check.Reading]:
        return [spot_check.Reading(rate / slowdown, clean_)]

    return {"DRAM": [spot_check.Reading(41 * GB / slowdown, clean_)] * spot_check.DRAM_PASSES,
            "L1": one(500 * GB), "fp64": one(100 * GB), "fp32": one(200 * GB)}


@pytest.mark.parametrize(("others", "slowdown", "clean_"), [
    (0, 1.0, True),   # a quiet host
    (9, 1.0, True),   # the guard saw other work beside the probes (90 % of the cores): not judged before
    (9, 2.5, False),  # and it took 60 % of the probes' time, every call disturbed
])
def test_a_record_with_a_tenth_of_the_fp32_roof_is_refused_busy_or_quiet(
        tmp_path: Path, others: int, slowdown: float, clean_: bool) -> None:
    machine = _fp32_tenth(tmp_path)
    guard = clean.PassGuard(lambda: _Watch(others), [])
    spots, done, low_roofs = spot_check.run(dict(machine.info), guard, peak_flops=machine.peak_flops,
                                            bandwidth=machine.bandwidth, measure=lambda steps: _rates(slowdown, clean_))
    assert [reason.split(":")[0] for reason in low_roofs] == ["fp32"]
    assert low_roofs[0].startswith(f"fp32: a probe read {200 / slowdown:.4g} GFLOP/s now, the cached roof is 20 ")
    assert (spots is None) is (others > 0) and done == ("checked" if others == 0 else f"not judged: {guard.reasons[0]}")


@pytest.mark.parametrize("roof", ["fp64", "DRAM", "L1"])
def test_a_tenth_of_any_probed_roof_is_refused_on_a_busy_host(tmp_path: Path, roof: str) -> None:
    machine = _fp32_tenth(tmp_path)
    peak_flops = {"fp64": 100 * GB, "fp32": 200 * GB}
    bandwidth = dict(machine.bandwidth)
    if roof == "fp64":
        peak_flops["fp64"] = 10 * GB
    else:
        bandwidth[roof] /= 10
    machine.info["isa_peaks"] = {"fp64": {"256": 100 * GB}, "fp32": {"256": 200 * GB}}
    guard = clean.PassGuard(lambda: _Watch(9), [])
    verdict = spot_check.run(dict(machine.info), guard, peak_flops=peak_flops, bandwidth=bandwidth,
                             measure=lambda steps: _rates(2.5, False))
    assert verdict.spots is None and [reason.split(":")[0] for reason in verdict.low_roofs] == [roof]


def test_a_record_the_probes_read_within_the_factor_is_not_refuted() -> None:
    probes = {"fp64": clean.Probe(1.8 * 100 * GB, 100 * GB, "GFLOP/s"),  # the Zen 3 VM's shared FMA units
              "DRAM": clean.Probe(2.1 * 53 * GB, 53 * GB)}              # the EPYC VM's DRAM beside other work
    assert clean.low_roof_reasons(probes) == []
    assert clean.low_roof_reasons({"fp32": clean.Probe(3.1 * GB, 1 * GB, "GFLOP/s")}) != []


def test_the_rules_that_need_no_probe_name_themselves(tmp_path: Path) -> None:
    machine = _fp32_tenth(tmp_path)
    reasons = clean.structure_reasons(machine.peak_flops, machine.bandwidth, machine.info)
    assert any("rule: fp32 at least fp64," in r for r in reasons)
    assert any("rule: fp32 at least fp64 at the same vector width" in r for r in reasons)
    edited_roof_only = {"fp64": 100 * GB, "fp32": 150 * GB, "bf16": 15 * GB}
    info = {**machine.info, "isa_peaks": {"fp64": {"256": 100 * GB}, "fp32": {"256": 200 * GB}}}
    bandwidth = {**machine.bandwidth, "L1": 50 * GB}
    reasons = clean.structure_reasons(edited_roof_only, bandwidth, info)
    assert [r.split(" ")[0] for r in reasons] == ["fp32", "L1", "bf16"]
    assert "rule: a roof at least its own measurement" in reasons[0] and "own update kernel rate" in reasons[1]
    assert "rule: a reduced precision at least the roof that computes it exactly" in reasons[2]
    honest = {"fp64": 100 * GB, "fp32": 200 * GB, "bf16": 200 * GB}
    assert clean.structure_reasons(honest, machine.bandwidth, info) == []
    assert clean.structure_reasons(honest, machine.bandwidth, {"isa_peaks": "junk", "levels": [1]}) == []


def test_a_cached_record_with_a_tenth_of_the_fp32_roof_is_measured_again_with_a_warning(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.characterize import ceiling_cache

    cached = _fp32_tenth(tmp_path)  # fp32 below fp64: the rule alone refuses it, no probe needed
    _cached_ert(tmp_path, cached)
    monkeypatch.setattr(spot_check, "run", lambda info, **_: pytest.fail("refused before any probe"))
    measurements.append(_ert_machine(41 * GB, QUIET_SAMPLES))
    with pytest.warns(ceiling_cache.CacheWarning, match="rule: fp32 at least fp64"):
        machine = machine_api.characterize(cache_dir=tmp_path)
    assert measurements == [] and "fp32" not in machine.peak_flops


def test_a_cached_record_a_busy_probe_refutes_is_measured_again_with_a_warning(
        tmp_path: Path, measurements: list[Machine], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.characterize import ceiling_cache

    tenth = _fp32_tenth(tmp_path)  # every FLOP roof a tenth: consistent, only a probe can tell
    info = {**tenth.info, "isa_peaks": {"fp64": {"256": 10 * GB}, "fp32": {"256": 20 * GB}}}
    _cached_ert(tmp_path, Machine("fake", {"fp64": 10 * GB, "fp32": 20 * GB}, tenth.bandwidth, info))
    monkeypatch.setattr(spot_check, "probe", lambda steps: _rates(2.5, False))
    monkeypatch.setattr(clean.PassGuard, "for_cores", classmethod(lambda cls, cores=None: cls(lambda: _Watch(9), [])))
    measurements.append(_ert_machine(41 * GB, QUIET_SAMPLES))
    messages: list[str] = []
    with pytest.warns(ceiling_cache.CacheWarning, match="far below what this machine does now"):
        machine = machine_api.characterize(cache_dir=tmp_path, progress=messages.append)
    assert measurements == [] and "fp32" not in machine.peak_flops
    assert any(m.startswith("spot check: the cached roofs are far below") and "fp64" in m and "fp32" in m
               for m in messages)


# --- the plugin: a session beside a neighbour uses its record, says it is not kept, caches nothing -----------

def test_plugin_session_names_a_record_that_is_not_kept(pytester: pytest.Pytester, measurements: list[Machine],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = pytester.path / "cache"
    monkeypatch.setenv("PYTEST_ROOFLINE_CACHE", str(cache))
    busy = _ert_machine(36 * GB, QUIET_SAMPLES[:4])
    busy.peak_flops["fp32"] = 100 * GB
    measurements += [busy, busy]
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.roofline(min_fraction=1e-9)
        def test_x(roofline):
            assert roofline.declare(flops={"fp32": 1}).measure(lambda: 7) == 7
        """
    )
    # The CPU's rules are under test: on a GPU machine "auto" would characterize the GPU.
    result = pytester.runpytest("--roofline", "--roofline-device", "cpu", "--roofline-cores", "all",
                                "--roofline-max-time", "0.05",
                                "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
                                "-W", "ignore::pytest_roofline.errors.DisturbedCharacterizationWarning")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["roofline: not kept, used by this session only (DRAM: 4 undisturbed update passes*",
                                 "machine: fake: *DRAM 36 GB/s -- NOT KEPT*"])
    assert _cache_files(cache) == []


def test_a_neighbour_seen_in_more_than_a_tenth_of_the_spans_makes_a_record_not_clean() -> None:
    info = _info(THREE_CLEAN, QUIET_SAMPLES)
    info.update(watched_spans=28, disturbed_spans=["other processes used 37% of the cores measured on"] * 2)
    assert clean.span_reasons(info) == []  # 2 of 28: within a tenth
    info["disturbed_spans"] *= 4  # 8 of 28, the rest of them quiet-looking
    reasons = clean.record_reasons({"L1": 337 * GB, "DRAM": 59 * GB}, info)
    assert reasons == [("other work beside 8 of 28 watched spans (at most 10%; other processes used 37% of the "
                        "cores measured on)")]


def test_an_emulated_precision_is_compared_at_its_fp32_floor() -> None:
    # Zen 3 (no native bf16): a fresh all-core record holds the raw emulated bf16 GEMM (1 GFLOP/s), the cached
    # 1-core record the fp32 floor it was judged on (100 GFLOP/s); both floored, they agree
    from pytest_roofline.characterize.clean import core_count_reasons

    all_cores = {"peak_flops": {"fp32": 204e9, "bf16": 1.04e9}, "bandwidth": {"L1": 413e9}}
    one_core = {"peak_flops": {"fp32": 99.8e9, "bf16": 99.8e9}, "bandwidth": {"L1": 207e9}}
    assert core_count_reasons(all_cores, one_core, 2) == []
    slow = {"peak_flops": {"fp32": 60e9, "bf16": 1.04e9}, "bandwidth": {"L1": 413e9}}
    assert [r.split(" on")[0] for r in core_count_reasons(slow, one_core, 2)] == ["fp32", "bf16"]
