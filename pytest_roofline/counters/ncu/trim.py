"""Trimmed reports: one small CSV per test with only what the counter reads, for CI artifacts.

A ``.ncu-rep`` embeds each kernel's SASS (the cubin) and ~350 metric values per launch although the counter
asks for about 24 (megabytes for a few launches of cuDNN/PyTorch kernels: docs/gpu.md).
The trimmed report is ncu's raw-page layout (one header row, one units row, one row per launch) with:

* ``ID``, ``Process ID``, ``Kernel Name`` and ``NVTX Range`` (the launch's ``pytest_roofline`` ranges);
* the metrics of the compute capability's list (:func:`~pytest_roofline.counters.ncu.metrics.metric_set`) plus
  the few device attributes and the replay pass count the report reader uses,

values in SI units with the unit in the units row, so :func:`~pytest_roofline.counters.ncu.parse.parse_csv_text`
(and ``python -m pytest_roofline import-ncu FILE.csv``) reads it back to the same numbers. The full
``.ncu-rep`` is kept instead only with ``--roofline-ncu-full``.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_roofline._atomic import write_text_atomic
from pytest_roofline.counters.ncu.parse import RANGE_COLUMN, LaunchRecord

TRIMMED_SUFFIX = ".ncu.csv"
# Read by parse/kernel_report besides the metric list: CC, device name, max clock, passes.
_ALWAYS = (
    "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor",
    "device__attribute_display_name",
    "device__attribute_clock_rate",
    "profiler__replayer_passes",
)


def _unit(name: str) -> str:
    if name.startswith("gpu__time_duration"):
        return "second"
    if ".per_second" in name:
        return "hz"
    if "bytes" in name:
        return "byte"
    return ""


def kept_metrics(wanted: Iterable[str], launches: Sequence[LaunchRecord]) -> list[str]:
    """The metric columns of a trimmed report: the wanted names and the always-kept ones that a launch has."""
    present = {name for launch in launches for name in (*launch.metrics, *launch.text)}
    names: list[str] = []
    for name in (*wanted, *_ALWAYS):
        if name in present and name not in names:
            names.append(name)
    return names


def _cell(launch: LaunchRecord, name: str) -> str:
    if name in launch.text:
        return launch.text[name]
    value = launch.metrics.get(name)
    return "n/a" if value is None else repr(float(value))


def trimmed_csv(launches: Sequence[LaunchRecord], wanted: Iterable[str]) -> str:
    """The trimmed raw-page CSV text of ``launches`` (see the module docstring)."""
    names = kept_metrics(wanted, launches)
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(["ID", "Process ID", "Kernel Name", RANGE_COLUMN, *names])
    writer.writerow(["", "", "", "", *(_unit(name) for name in names)])
    for number, launch in enumerate(launches):  # renumbered: one test's launches, in profiling order
        writer.writerow([str(number), "", launch.kernel, ";".join(launch.ranges),
                         *(_cell(launch, name) for name in names)])
    return out.getvalue()


def write_trimmed(path: str | os.PathLike[str], launches: Sequence[LaunchRecord], wanted: Iterable[str]) -> Path:
    """Write the trimmed report atomically (temp file, then rename) and return its path."""
    target = Path(path)
    write_text_atomic(target, trimmed_csv(launches, wanted))
    return target
