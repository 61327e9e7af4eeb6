"""The profiler's own log lines never reach file descriptor 2; everything else written there meanwhile does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pytest_roofline.host.quiet_stderr import foreign_lines


def test_foreign_lines_drops_only_the_profilers_lines() -> None:
    data = (b"USDT:2026-11-25 18:21:56 15934:15934 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
            b"a warning of the measured code\n"
            b"STAGE:2024-01-01 10:00:00.123 7:7 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n")
    assert foreign_lines(data) == b"a warning of the measured code\n"


def test_the_profiled_pass_leaves_no_profiler_line_on_stderr() -> None:
    pytest.importorskip("torch")
    script = textwrap.dedent("""
        import os
        import torch
        from pytest_roofline.measure.ops.profile import dispatch_cost_s, profile_calls

        x = torch.ones(64)

        def fn():
            os.write(2, b"written by the measured code\\n")
            return x + x

        profiled = profile_calls(fn, (), {}, calls=3, prepare=lambda: ((), {}), synchronize=lambda: None)
        assert len(profiled.calls) == 3, profiled
        assert dispatch_cost_s() > 0
        os.write(2, b"after\\n")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stderr.decode().splitlines()
    assert not [line for line in lines if "profiler_st" in line or "ActivityProfiler" in line], lines
    # the measured code's own line: once per bare call and once per profiled call, then the line after
    assert lines.count("written by the measured code") == 6
    assert lines[-1] == "after"
