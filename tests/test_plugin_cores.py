"""Cores of its own through pytester: the option, the placement in results.json, contended measurements.

The load is faked (a sampler that says which cores are busy), so the choice of cores is known exactly; the
pinned machine file's roofs are for every core, so the gate's numbers stay those of tests/test_plugin.py.
numpy and matplotlib are imported here, once: a failing inner test draws its chart, and pytester's in-process
runs drop modules first imported during a run (importing numpy twice in one process crashes it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

from pytest_roofline.host import cores

# 1e6 FLOPs is 10 us at 100 GFLOP/s: a 10 ms sleep reaches about 0.001 of the roof, far below 0.5.
SLOW_TEST = """
import time, pytest

def sleep_10ms():
    time.sleep(0.01)

@pytest.mark.roofline(min_fraction=0.5)
def test_slow(roofline):
    roofline.declare(flops=1e6).measure(sleep_10ms)
"""



def results(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / ".roofline" / "results.json").read_text())



def busy(*values: float) -> Callable[[], Iterator[Mapping[int, float]]]:
    return lambda: iter([dict(zip(cores.base_affinity(), values))] * 10)


def test_bad_cores_option_is_a_usage_error(pytester: pytest.Pytester, machine_file: Path,
                                           run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run_roofline(machine_file, "--roofline-cores", "two")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-cores / ini roofline_cores must be auto, all, a number of cores N*"])


def test_pinned_ceilings_measure_on_every_core_without_looking(pytester: pytest.Pytester,
                                                               machine_file: Path,
                                                               run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(SLOW_TEST.replace("min_fraction=0.5", ""))
    result = run_roofline(machine_file)
    assert result.ret == 0
    placement = results(pytester)["tests"][0]["regions"][0]["cores"]
    assert placement["used"] == cores.base_affinity() and placement["setting"] == "all"
    assert placement["load"] == {} and placement["contended"] is False


def test_contended_measurement_is_reported_not_failed(pytester: pytest.Pytester, machine_file: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      run_roofline: Callable[..., pytest.RunResult],
                                                      fake_core_load: Callable[..., None]) -> None:
    fake_core_load(busy(1.0, 0.9, 1.0, 1.0)())
    pytester.makepyfile(SLOW_TEST)
    result = run_roofline(machine_file)
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    # [c], and on a loaded host maybe another flag with it (on the H100 with 14 workers: [cf])
    result.stdout.re_match_lines([r".*test_slow .* passed \(below min, not gated\) \[c[a-z]*\]$"])
    result.stdout.fnmatch_lines(["[[]c] contended (core 1 of 2 90% busy): no free core, measured again at the end*",
                                 "roofline: 1 of 1 test not gated: 1 measured under contention (no free core) and*"])
    test = results(pytester)["tests"][0]
    assert test["outcome"] == "passed" and test["not_gated"] == "contended"
    assert test["contended"] == {"remeasured": True, "still_contended": True}
    region = test["regions"][0]
    assert region["cores"]["contended"] is True and region["cores"]["load_on"] == 0.9  # the least loaded
    assert "measured again at the end of the session, still contended" in region["notes"][-1]


def test_strict_lets_a_contended_measurement_fail(pytester: pytest.Pytester, machine_file: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  run_roofline: Callable[..., pytest.RunResult],
                                                  fake_core_load: Callable[..., None]) -> None:
    fake_core_load(busy(1.0, 1.0, 1.0, 1.0)())
    pytester.makepyfile(SLOW_TEST)
    result = run_roofline(machine_file, "--roofline-strict")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*attained fraction 0.00* is below min_fraction 0.5*"])


def test_contended_then_free_at_the_end_fails_the_session(pytester: pytest.Pytester, machine_file: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          run_roofline: Callable[..., pytest.RunResult],
                                                          fake_core_load: Callable[..., None]) -> None:
    allowed = cores.base_affinity()
    fake_core_load(iter([{c: 1.0 for c in allowed}, {c: 0.0 for c in allowed}]))
    pytester.makepyfile(SLOW_TEST)
    result = run_roofline(machine_file, "--junitxml", "junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    test = results(pytester)["tests"][0]
    assert test["outcome"] == "failed" and "not_gated" not in test
    message = test["contended"].pop("message")
    assert test["contended"] == {"remeasured": True, "still_contended": False, "failed_when_remeasured": True}
    assert test["regions"][0]["cores"]["contended"] is False
    result.stdout.fnmatch_lines(["*test_slow*failed (below min)*"])
    # pytest's own report agrees with results.json: one test, failed, with the message of its last measurement
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED *test_slow - *"])  # in pytest's own list, as FAILED
    from pytest_roofline.output.text import fraction_digits

    assert message.startswith(f"roofline: attained fraction {fraction_digits(test['fraction'])} is below "
                              "min_fraction 0.5")
    result.stdout.fnmatch_lines(["*= FAILURES =*", "*roofline: attained fraction * is below min_fraction 0.5",
                                 "*contended at first: measured again at the end of the session, uncontended*"])
    import xml.etree.ElementTree as ET

    (case,) = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    assert case.find("failure") is not None
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["roofline_fraction"] == f"{test['fraction']:.6g}"


def test_ini_key_and_explicit_list(pytester: pytest.Pytester, machine_file: Path,
                                   run_roofline: Callable[..., pytest.RunResult]) -> None:
    first = cores.base_affinity()[0]
    pytester.makeini(f"[pytest]\nroofline_cores = {first}-{first}\n")
    pytester.makepyfile(SLOW_TEST.replace("min_fraction=0.5", ""))
    assert run_roofline(machine_file).ret == 0
    placement = results(pytester)["tests"][0]["regions"][0]["cores"]
    assert placement["used"] == [first] and placement["setting"] == str(first)  # a list of one


WHERE_TEST = """
import json, os, pytest, time

def sleep_10ms():
    time.sleep(0.01)

@pytest.mark.parametrize("i", range(4))
@pytest.mark.roofline
def test_where(roofline, i):
    roofline.declare(flops=1e6).measure(sleep_10ms)
    placement = roofline.regions[-1].placement
    with open(f"where-{os.environ['PYTEST_XDIST_WORKER']}-{i}.json", "w") as out:
        json.dump({"affinity": sorted(os.sched_getaffinity(0)), "used": list(placement.used)}, out)
"""


def test_xdist_workers_get_disjoint_cores(pytester: pytest.Pytester, machine_file: Path) -> None:
    pytest.importorskip("xdist")
    machine_cores = cores.base_affinity()
    if len(machine_cores) < 2:
        pytest.skip("needs 2 cores")
    pytester.makepyfile(WHERE_TEST)
    result = pytester.runpytest_subprocess("--roofline", "--roofline-machine", str(machine_file), "-n", "2",
                                           "-p", "no:cacheprovider", "--roofline-max-time", "0.05")
    assert result.ret == 0
    by_worker: dict[str, set[tuple[int, ...]]] = {}
    for path in pytester.path.glob("where-gw*.json"):
        seen = json.loads(path.read_text())
        assert seen["affinity"] == seen["used"]  # pinned for the whole test, measured on all of its share
        by_worker.setdefault(path.name.split("-")[1], set()).add(tuple(seen["used"]))
    half = len(machine_cores) // 2
    expected = {"gw0": {tuple(machine_cores[:half])}, "gw1": {tuple(machine_cores[half:])}}
    assert by_worker == expected  # xdist's load scheduling hands each worker some of the 4 tests
