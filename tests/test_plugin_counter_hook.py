"""A third-party counter registered from a conftest through pytest_roofline_make_counter."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_roofline.counters import Counter, CounterBase
from pytest_roofline.counters.declared import DeclaredCounter

CONFTEST = """
from pytest_roofline.counters import CounterBase
from pytest_roofline.model import KernelSample

class FixedCounter(CounterBase):
    name = "fixed"

    def count(self, fn, args, kwargs):
        # 1e9 FLOPs and 1e8 bytes per call, whatever fn does: 10 ms at 100 GFLOP/s, 10 ms at 10 GB/s
        return fn(*args, **kwargs), [KernelSample("fixed-kernel", {"fp32": 1e9}, {"DRAM": 1e8})]

def pytest_roofline_make_counter(name, config):
    if name == "fixed":
        return FixedCounter()
"""

TEST = """
import time, pytest

def step(x):
    time.sleep(0.02)
    return x * 2

@pytest.mark.roofline
def test_step(roofline):
    assert roofline.measure(step, 21) == 42
"""



def test_a_conftest_counter_counts_the_measured_call(pytester: pytest.Pytester, machine_file: Path,
                                                     run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(TEST)
    result = run_roofline(machine_file, "--roofline-counter", "fixed")
    assert result.ret == 0
    (test,) = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"]
    region = test["regions"][0]
    assert region["counter"] == "fixed"
    assert region["kernels"][0]["flops"] == {"fp32": 1e9}
    assert region["t_min_s"] == pytest.approx(0.01)  # max(1e9 / 100e9, 1e8 / 10e9)
    assert 0.3 < region["fraction"] < 0.5  # 10 ms of a 20 ms sleep


def test_a_name_no_plugin_provides_is_a_usage_error_naming_it(pytester: pytest.Pytester, machine_file: Path,
                                                              run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(TEST)
    result = run_roofline(machine_file, "--roofline-counter", "rocprof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at start, not in every test (issue 35)
    result.stderr.fnmatch_lines([("*--roofline-counter / ini roofline_counter: no plugin provides a counter named "
                                 "'rocprof'*")])


def test_a_malformed_name_is_a_usage_error(pytester: pytest.Pytester, machine_file: Path,
                                           run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(TEST)
    result = run_roofline(machine_file, "--roofline-counter", "no such")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-counter must be one of auto, analytic, declared, ncu or the name*"])


def test_the_base_gives_every_optional_member() -> None:
    class Bare(CounterBase):
        name = "bare"

        def count(self, fn, args, kwargs):  # type: ignore[no-untyped-def]
            return fn(*args, **kwargs), []

    bare = Bare()
    assert isinstance(bare, Counter)
    assert (bare.deferred, bare.footprint_bytes, dict(bare.uncounted_bytes), dict(bare.errors),
            dict(bare.write_allocate_bytes)) == (False, None, {}, {}, {})
    assert isinstance(DeclaredCounter.from_user(flops=1.0), Counter)
