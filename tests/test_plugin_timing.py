"""Under --roofline: page faults of the timed calls and the whole-measurement budget reach the reader."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": "100 GFLOP/s"},
           "bandwidth": {"DRAM": "10 GB/s"}, "info": {"source": "test"}}


def results(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / ".roofline" / "results.json").read_text())


def test_a_call_that_touches_fresh_pages_every_time_is_marked(pytester: pytest.Pytester,
                                                              write_machine: Callable[..., Path],
                                                              fast_args: tuple[str, ...]) -> None:
    # 64 MiB is above glibc's largest mmap threshold (32 MiB), so every call maps fresh pages and touching
    # one byte per 4 KiB page faults 16,384 times per call, whatever the malloc tuning.
    pytester.makepyfile(
        """
        import mmap
        import pytest

        SIZE = 64 * 1024 * 1024

        def touch_fresh_pages():
            block = mmap.mmap(-1, SIZE)
            for offset in range(0, SIZE, 4096):
                block[offset] = 1
            block.close()

        @pytest.mark.roofline(min_fraction=0.99)
        def test_faulting(roofline):
            roofline.declare(bytes={"DRAM": SIZE}).measure(touch_fresh_pages)
        """
    )
    machine = write_machine(MACHINE)
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine), "--roofline-cores", "all",
                                *fast_args)
    result.assert_outcomes(failed=1)
    (test,) = results(pytester)["tests"]
    (region,) = test["regions"]
    timing = region["timing"]
    pages = 64 * 1024 * 1024 // 4096
    assert timing["faults_per_call"] >= pages
    assert len(timing["minor_faults"]) == timing["rounds"] == len(timing["samples_s"])
    assert any("page faults per timed call: the time includes first touch" in note for note in region["notes"])
    result.stdout.fnmatch_lines(["*note:*page faults per timed call*", "*test_faulting*failed (below min) [[]f]*",
                                 "[[]f] page faults (*/call): its timed calls page-faulted*"])


def test_a_call_longer_than_the_budget_gets_the_minimum_and_a_note(pytester: pytest.Pytester,
                                                                   write_machine: Callable[..., Path],
                                                                   fast_args: tuple[str, ...]) -> None:
    pytester.makepyfile(
        """
        import time
        import pytest

        calls = []

        def slow():
            calls.append(1)
            time.sleep(0.06)

        @pytest.mark.roofline
        def test_slow(roofline):
            roofline.declare(flops=1e9).measure(slow)
            # 1 counted call, 1 warm-up, 3 timed calls: a 60 ms call under a 50 ms budget.
            assert len(calls) == 5
        """
    )
    machine = write_machine(MACHINE)
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine), "--roofline-cores", "all",
                                *fast_args)
    result.assert_outcomes(passed=1)
    (region,) = results(pytester)["tests"][0]["regions"]
    assert region["timing"]["budget_limited"] and region["timing"]["rounds"] == 3
    assert region["timing"]["measure_s"] >= 4 * 0.06
    assert any(note.startswith("3 timed calls of") and "--roofline-max-time" in note for note in region["notes"])


def test_setup_resets_an_in_place_op_before_every_call(pytester: pytest.Pytester,
                                                       write_machine: Callable[..., Path],
                                                       fast_args: tuple[str, ...]) -> None:
    pytester.makepyfile(
        """
        import pytest

        state = {"x": 0, "calls": 0, "seen": []}

        def reset():
            state["x"] = 0

        def add_one_in_place():
            state["seen"].append(state["x"])
            state["x"] += 1
            state["calls"] += 1

        @pytest.mark.roofline
        def test_in_place(roofline):
            roofline.declare(flops=1).measure(add_one_in_place, setup=reset)
            assert state["calls"] >= 5 and set(state["seen"]) == {0}  # every call saw fresh state

        def test_without_roofline_calls_once():
            pass
        """
    )
    machine = write_machine(MACHINE)
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine), "--roofline-cores", "all",
                                *fast_args)
    result.assert_outcomes(passed=2)
