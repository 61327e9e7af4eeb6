"""Option values checked at start (issue 35): a usage error naming the option and what it accepts, before any
test runs; and a generator function given to ``roofline.measure`` said as such."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

DECLARED = """
import time
import pytest

@pytest.mark.roofline
def test_declared(roofline):
    roofline.declare(flops=1e6).measure(time.sleep, 0.001)
"""


@pytest.mark.parametrize(("option", "expected"), [
    ("--roofline-cores=999", "*--roofline-cores / ini roofline_cores: 999 cores asked for, this process may run on*"),
    ("--roofline-cores=0,4097", "*--roofline-cores / ini roofline_cores: core(s) 4097 are not available*"),
    ("--roofline-compare-python=/no/such/python", ("*--roofline-compare-python / ini roofline_compare_python: "
                                                  "'/no/such/python' is not an executable Python interpreter*")),
    ("--roofline-counter=analytc", ("*--roofline-counter / ini roofline_counter: no plugin provides a counter named "
                                   "'analytc' (built-in: analytic, declared, ncu, auto;*")),
])
def test_a_bad_option_value_is_a_usage_error_before_any_test(
        option: str, expected: str, pytester: pytest.Pytester, machine_file: Path,
        run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_declared=DECLARED)
    result = run_roofline(machine_file, option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([expected])
    assert "test_declared" not in result.stdout.str()


def test_a_counter_from_a_conftest_below_the_rootdir_is_accepted(
        pytester: pytest.Pytester, machine_file: Path, run_roofline: Callable[..., pytest.RunResult]) -> None:
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "from pytest_roofline.counters.declared import DeclaredCounter\n"
        "def pytest_roofline_make_counter(name, config):\n"
        "    if name == 'mine':\n"
        "        return DeclaredCounter.from_user(1e6, None, name='mine')\n")
    (sub / "test_declared.py").write_text(DECLARED)
    result = run_roofline(machine_file, "--roofline-counter=mine")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()


def test_a_generator_function_is_diagnosed_as_one(pytester: pytest.Pytester, machine_file: Path,
                                                  run_roofline: Callable[..., pytest.RunResult]) -> None:
    pytester.makepyfile(test_gen="""
        import pytest

        def work():
            yield sum(range(100000))

        @pytest.mark.roofline
        def test_gen(roofline):
            roofline.declare(flops=1e9).measure(work)
    """)
    result = run_roofline(machine_file)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([("*roofline.measure(work): the function returns a generator, so calling it does "
                                 "not run its body*")])
    assert "recharacterize" not in result.stdout.str()
