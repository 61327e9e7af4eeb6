"""Uncounted work is visible: the row is marked, a line names the ops, and uncounted=fail fails the test."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

# See test_plugin.py: torch and the modules that import it are imported once, here, not inside pytester runs
# (importing them in one in-process run and again in the next crashes).
torch = pytest.importorskip("torch")
import pytest_roofline.counters.analytic  # noqa: F401

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": "100 GFLOP/s"},
           "bandwidth": {"DRAM": "10 GB/s"}, "info": {"source": "test"}}

# An FFT does FLOPs, and the analytic counter has no rule for aten._fft_r2c (torch 2.13).
SOURCE = """
import pytest
import torch

x = torch.rand(4096)

def uncounted():
    return torch.fft.fft(x)

@pytest.mark.roofline{marker}
def test_uncounted(roofline):
    roofline.measure(uncounted)
"""


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary's lines are matched whole here; at 80 columns it wraps them."""
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def machine_file(pytester: pytest.Pytester, write_machine: Callable[..., Path]) -> Path:
    return write_machine(MACHINE)


def test_uncounted_ops_are_named_in_the_summary(pytester: pytest.Pytester, machine_file: Path,
                                                fast_args: tuple[str, ...]) -> None:
    pytester.makepyfile(SOURCE.format(marker=""))
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine_file), "--roofline-cores", "all",
                                "--roofline-counter", "analytic", *fast_args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_uncounted*passed (no gate) [[]u]",
                                 "[[]u] uncounted ops: FLOP-bearing ops without a counting rule ran*",
                                 "uncounted FLOPs in *test_uncounted: aten._fft_r2c* of the bytes)*"])
    (test,) = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"]
    assert list(test["regions"][0]["uncounted_ops"]) == ["aten._fft_r2c.default"]


@pytest.mark.parametrize(("marker", "option"), [("(uncounted='fail')", "warn"), ("", "fail")])
def test_uncounted_fail_fails_the_test(pytester: pytest.Pytester, machine_file: Path, marker: str,
                                       option: str, fast_args: tuple[str, ...]) -> None:
    pytester.makepyfile(SOURCE.format(marker=marker))
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine_file), "--roofline-cores", "all",
                                "--roofline-counter", "analytic", "--roofline-uncounted", option, *fast_args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FLOP-bearing ops without a counting rule ran (aten._fft_r2c*"])


def test_marker_warn_overrides_a_failing_session_setting(pytester: pytest.Pytester, machine_file: Path,
                                                         fast_args: tuple[str, ...]) -> None:
    pytester.makepyfile(SOURCE.format(marker="(uncounted='warn')"))
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine_file), "--roofline-cores", "all",
                                "--roofline-counter", "analytic", "--roofline-uncounted", "fail", *fast_args)
    result.assert_outcomes(passed=1)
