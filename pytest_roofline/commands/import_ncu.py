"""``python -m pytest_roofline import-ncu REPORT``: per-kernel roofline numbers from anyone's ncu report.

REPORT is a ``.ncu-rep`` file (read with NVIDIA's ``ncu_report`` module or ``ncu --import``) or ncu CSV output
(``--csv`` details/``--metrics`` long format, or ``--page raw``), stdout noise included.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from pytest_roofline._safe_text import printable
from pytest_roofline.counters.ncu.diagnostics import (
    diagnostics_dict,
    format_diagnostics,
    format_seconds,
    short_name,
)
from pytest_roofline.counters.ncu.kernel_report import NcuKernel, NcuReport, load_report
from pytest_roofline.counters.ncu.metrics import HALF_LANES_PER_INST, LEVELS
from pytest_roofline.counters.ncu.parse import NcuParseError
from pytest_roofline.counters.ncu.rep import ReportReaderMissing, ReportReadError
from pytest_roofline.model import Machine, MissingCeilingError, evaluate, lower_bound, sum_maps
from pytest_roofline.model.units import si


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", metavar="REPORT", help="a .ncu-rep file or ncu CSV output (details or raw page)")
    from pytest_roofline.commands import deprecated_alias

    parser.add_argument("--machine-file", dest="machine", metavar="ROOFS.json",
                        help="machine ceilings, as pinned with pytest --roofline-machine (Machine.to_dict() "
                             "layout): adds each kernel's fraction and bound")
    deprecated_alias(parser, "--machine", "--machine-file", "machine")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--plot", metavar="FILE", help="draw a hierarchical roofline (png, svg or pdf)")
    parser.add_argument("--cc", metavar="MAJOR.MINOR",
                        help="compute capability, where the report does not say (2020-era CSVs do not)")
    parser.add_argument("--half-lanes", type=int, choices=(1, 2), default=HALF_LANES_PER_INST,
                        help="FLOPs per fp16 thread instruction lane count: 2 (packed half2, ncu's current "
                             "sections; default) or 1 (NERSC scripts)")
    parser.add_argument("--top", type=int, default=5, help="kernels listed in the diagnostics (default 5)")


def _load_machine(path: str) -> Machine:
    """Roofs from a JSON file, read bounded and checked (positive finite roofs) as every file read back."""
    from pytest_roofline.record.loader import check_machine, read_json

    data = read_json(Path(path))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object of roofs")  # noqa: TRY004 - the caller reports ValueErrors
    check_machine(data)
    return Machine.from_dict(data)


def _judge(kernel: NcuKernel, machine: Machine) -> dict[str, object]:
    try:
        if kernel.time_s:
            verdict = evaluate(kernel.to_sample(), machine)
            return {"fraction": verdict.fraction, "bound": verdict.bound, "t_min_s": verdict.t_min}
        bound = lower_bound(kernel.flops, kernel.bytes, machine)
        return {"fraction": None, "bound": bound.bound, "t_min_s": bound.t_min}
    except MissingCeilingError as error:
        return {"fraction": None, "bound": None, "t_min_s": None, "error": str(error)}


def _kernel_entries(report: NcuReport, machine: Machine | None) -> list[dict[str, Any]]:
    entries = []
    for kernel in report.kernels:
        entry = kernel.to_dict()
        if machine is not None:
            entry.update(_judge(kernel, machine))
        entries.append(entry)
    return entries


def _totals(report: NcuReport) -> dict[str, object]:
    return {"time_s": report.total_time_s, "flops": sum_maps(k.flops for k in report.kernels),
            "bytes": sum_maps(k.bytes for k in report.kernels)}


def _si(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return si(value, unit, sep="")


def _table(report: NcuReport, entries: list[dict[str, Any]], machine: Machine | None) -> str:
    total_time = report.total_time_s or sum(e["time_s"] or 0.0 for e in entries) or None
    head = (f"{'time':>9} {'share':>6} {'launch':>6} {'FLOP/s':>8} {'FLOPs':>8} "
            + " ".join(f"{'AI ' + level:>8}" for level in LEVELS)
            + (f" {'fraction':>8} {'bound':<18}" if machine else "") + "  kernel")
    lines = [head]
    ordered = sorted(entries, key=lambda e: (e["time_s"] or 0.0, sum(e["flops"].values())), reverse=True)
    for entry in ordered:
        time_s = entry["time_s"]
        flops = sum(entry["flops"].values()) if entry["flops"] else None
        rate = flops / time_s if flops is not None and time_s else None
        share = f"{time_s / total_time:6.1%}" if time_s and total_time else f"{'-':>6}"
        row = (f"{format_seconds(time_s):>9} {share} {entry['launches']:>6} {_si(rate):>8} {_si(flops):>8} "
               + " ".join(f"{_si(entry['ai'].get(level)):>8}" for level in LEVELS))
        if machine is not None:
            fraction = entry.get("fraction")
            row += f" {('-' if fraction is None else f'{fraction:.3f}'):>8} {entry.get('bound') or '-'!s:<18}"
        lines.append(row + "  " + short_name(entry["name"], 80))
    return "\n".join(lines)


def _summary(report: NcuReport) -> list[str]:
    lines = [(f"report: {report.source} ({report.format}; {report.launch_count} launches, "
             f"{len(report.kernels)} kernels)")]
    if report.devices or report.compute_capabilities:
        lines.append(f"device: {', '.join(report.devices) or '?'}; compute capability "
                     f"{', '.join(report.compute_capabilities) or 'not in the report'}")
    if report.definitions:
        lines.append("definitions: " + "; ".join(f"{k} = {v}" for k, v in report.definitions.items()))
    if report.clock_note:
        lines.append("clock: " + report.clock_note)
    return lines


def _grouped_kernel_warnings(report: NcuReport) -> list[str]:
    """One line per distinct warning, naming the kernel or counting the kernels it concerns."""
    kernels_by_warning: dict[str, list[str]] = {}
    for kernel in report.kernels:
        for warning in kernel.warnings:
            base = re.sub(r" \(\d+ launches\)$", "", warning)
            kernels_by_warning.setdefault(base, []).append(kernel.name)
    return [f"{short_name(names[0], 50)}: {warning}" if len(names) == 1 else f"{len(names)} kernels: {warning}"
            for warning, names in kernels_by_warning.items()]


def run(args: argparse.Namespace) -> int:
    try:
        machine = _load_machine(args.machine) if args.machine else None
    except (OSError, ValueError, TypeError) as error:
        print(f"import-ncu: cannot read machine file {args.machine}: {error}", file=sys.stderr)
        return 2
    try:
        report = load_report(args.report, cc=args.cc, half_lanes=args.half_lanes)
    except FileNotFoundError:
        print(f"import-ncu: no such file: {args.report}", file=sys.stderr)
        return 2
    except (NcuParseError, ReportReaderMissing, ReportReadError, ValueError, OSError) as error:
        print(printable(f"import-ncu: {error}"), file=sys.stderr)
        return 2
    refused = _refusal(report)
    if refused:
        print(printable(refused), file=sys.stderr)
        return 2
    entries = _kernel_entries(report, machine)
    if args.plot:
        from pytest_roofline.output.ncu_plot import draw_hierarchical_roofline

        draw_hierarchical_roofline(args.plot, report.kernels, machine, title=report.source)
    if args.json:
        document = report.to_dict()
        document["kernels"] = entries
        document["totals"] = _totals(report)
        document["diagnostics"] = diagnostics_dict(report.kernels, machine, args.top)
        if machine is not None:
            document["machine"] = machine.name
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    out = _summary(report)
    out += ["", _table(report, entries, machine)]
    errors = sorted({e["error"] for e in entries if e.get("error")})
    if errors:
        out += ["", "no verdict for some kernels:"] + [f"  {error}" for error in errors]
    diagnostics = format_diagnostics(report.kernels, machine, args.top)
    if diagnostics:
        out += ["", diagnostics]
    warnings = report.warnings + _grouped_kernel_warnings(report)
    if warnings:
        out += ["", "warnings:"] + [f"  {w}" for w in warnings]
    if args.plot:
        out += ["", f"roofline chart: {args.plot}"]
    print(printable("\n".join(out)))
    return 0


def _refusal(report: NcuReport, shown: int = 10) -> str | None:
    """Why nothing is imported: malformed rows or cells (by line and column), or a table without launches."""
    if report.problems:
        more = f"\n  and {len(report.problems) - shown} more" if len(report.problems) > shown else ""
        return (f"import-ncu: {report.source}: {len(report.problems)} malformed row(s) or cell(s); nothing "
                "imported:\n" + "\n".join(f"  {p}" for p in report.problems[:shown]) + more)
    if not report.kernels:
        return f"import-ncu: {report.source}: the table holds no kernel launch"
    return None
