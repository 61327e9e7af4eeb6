"""The characterization's progress: one updating line on a terminal, no sweep points in a log."""

from __future__ import annotations

from pytest_roofline.output.progress import Progress

MESSAGES = ["characterizing cpu (fingerprint abc)", "bandwidth sweep: 60 working sets, 16 KiB .. 256 MiB",
            *(f"  update sweep {i}/60: {i * 0.5:8.2f} MiB ->    0.5 GB/s" for i in range(1, 61)),
            "  L1:   307.0 GB/s (update, 32 KiB)", "fp64:    59.0 GFLOP/s peak", "done in 48.3 s"]


def test_a_log_gets_a_few_lines_without_sweep_points() -> None:
    lines: list[str] = []
    progress = Progress(lines.append, None)
    for message in MESSAGES:
        progress(message)
    progress.finish()
    assert lines == ["roofline: characterizing cpu (fingerprint abc)",
                     "roofline: bandwidth sweep: 60 working sets, 16 KiB .. 256 MiB",
                     "roofline: L1:   307.0 GB/s (update, 32 KiB)", "roofline: fp64:    59.0 GFLOP/s peak",
                     "roofline: done in 48.3 s"]


def test_a_terminal_gets_one_updating_line_and_keeps_done() -> None:
    lines: list[str] = []
    rewritten: list[str] = []
    progress = Progress(lines.append, rewritten.append, width=60)
    for message in MESSAGES:
        progress(message)
    assert lines == ["roofline: done in 48.3 s"]  # everything else replaced the line before it
    assert len(rewritten) > 60 and all(len(r) <= 59 for r in rewritten)
    assert rewritten[-1] == ""  # the updating line was cleared before done was written
