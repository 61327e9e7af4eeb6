"""Nsight Compute (ncu) support: metric sets per compute capability, the ncu command line, report parsing,
diagnostics and the ``import-ncu``, ``ncu-metrics`` and ``doctor`` commands.

Everything here imports only the standard library and the roofline model; pandas, matplotlib and NVIDIA's
``ncu_report`` module are imported inside the functions that need them.
"""

from __future__ import annotations

from pytest_roofline.counters.ncu.command import NVTX_DOMAIN, build_ncu_command, nvtx_include_expression
from pytest_roofline.counters.ncu.kernel_report import (
    NcuKernel,
    NcuReport,
    NoKernelsError,
    load_report,
    parse_report_text,
    samples_from_report,
)
from pytest_roofline.counters.ncu.metrics import LEVELS, MetricSet, UnsupportedComputeCapability, metric_set
from pytest_roofline.counters.ncu.parse import NcuParseError, parse_csv_text
from pytest_roofline.counters.ncu.rep import ReportReaderMissing

__all__ = [
    "LEVELS",
    "NVTX_DOMAIN",
    "MetricSet",
    "NcuKernel",
    "NcuParseError",
    "NcuReport",
    "NoKernelsError",
    "ReportReaderMissing",
    "UnsupportedComputeCapability",
    "build_ncu_command",
    "load_report",
    "metric_set",
    "nvtx_include_expression",
    "parse_csv_text",
    "parse_report_text",
    "samples_from_report",
]
