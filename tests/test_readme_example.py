"""The README's failure example is the message a real run prints, modulo numbers and the session's folder."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# The README's example: 8.4 MFLOP and 17.8 MB at L2 in a call that sleeps 5 ms (far below 0.5 of its roof).
INEFFICIENT = """
import time, pytest

def row_by_row():
    time.sleep(0.005)

@pytest.mark.roofline(min_fraction=0.5)
def test_row_by_row_matmul(roofline):
    roofline.declare(flops=8.4e6, bytes={"L2": 17.8e6}).measure(row_by_row)
"""
MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"L2": 139e9, "DRAM": 10e9}}
OPTIONAL = ("spread:", "note:", "ops:", "lost most:", "op note:")  # lines a run adds when its timing calls for them


def normalized(line: str) -> str:
    line = re.sub(r"sessions/[^/\s]+/", "sessions/SESSION/", line)
    line = re.sub(r"-[0-9a-f]{10}\.", "-HASH.", line)
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line).rstrip()


def readme_block() -> list[str]:
    text = README.read_text()
    block = text[text.index("```\nroofline: attained fraction") + 4:]
    return block[:block.index("```")].splitlines()


def message_lines(out: str) -> list[str]:
    """The failure message as pytest printed it, its wrapped continuation lines joined back."""
    start = out.index("roofline: attained fraction")
    lines: list[str] = []
    for line in out[start:].splitlines():
        if line.startswith("="):
            break
        if line.startswith("      ") and lines:  # a wrapped line continues
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def test_the_readme_failure_example_matches_a_real_run(pytester: pytest.Pytester,
                                                        write_machine: Callable[..., Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makepyfile(test_inefficient=INEFFICIENT)
    machine = write_machine(MACHINE)
    result = pytester.runpytest("--roofline", f"--roofline-machine={machine}", "--roofline-max-time", "0.2",
                                "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    real = [normalized(line) for line in message_lines(result.stdout.str())
            if not line.strip().startswith(OPTIONAL)]
    assert [normalized(line) for line in readme_block()] == real
    for line in real:  # the artifacts are where the message says
        if line.strip().startswith("artifact:"):
            assert line.split()[-1].startswith(".roofline/sessions/SESSION/test_inefficient.py__")
    assert len(list((pytester.path / ".roofline" / "sessions").glob("*/test_inefficient.py__*.png"))) == 1
