"""Read a binary ``.ncu-rep`` report into launch records.

Order of preference (research §5.5, §8.2): NVIDIA's ``ncu_report`` Python module (PyPI ``ncu-report``; reads
reports without a GPU), else ``ncu --import FILE --csv --page raw`` when the ncu CLI is on PATH, else an error
that says what to install.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_roofline.counters.ncu.command import NVTX_DOMAIN
from pytest_roofline.counters.ncu.ncu_units import unit_factor
from pytest_roofline.counters.ncu.parse import FORMAT_RAW, LaunchRecord, ParsedLaunches, parse_csv_text
from pytest_roofline.errors import ReportReaderMissing, ReportReadError

FORMAT_NCU_REP = "ncu-rep"
IMPORT_TIMEOUT_S = 600

# Only these metrics are read from a report (a --set full report holds thousands per launch).
_RELEVANT_RE = re.compile(
    r"^(sm__sass_thread_inst_executed_op_|smsp__sass_thread_inst_executed_op_|sm__ops_path_tensor_"
    r"|sm__inst_executed_pipe_tensor\.sum$|l1tex__t_bytes\.|lts__t_bytes\.|dram__bytes"
    r"|l1tex__lsu_writeback_active|lts__lts2xbar_cycles_active\.|gpu__time_duration\.sum$"
    r"|(sm|smsp|l1tex|lts|dram)__cycles_elapsed\.avg|device__attribute_|profiler__replayer_passes$)"
)


def find_ncu_report_module(ncu: str | None = None) -> ModuleType | None:
    """``ncu_report`` from the environment, else from the ``extras/python`` folder of the ncu install (where
    NVIDIA ships it: reading NVTX ranges needs it, the CSV page has none)."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    executable = ncu or shutil.which("ncu")
    if not executable:
        return None
    found = Path(os.path.realpath(executable)).parent
    # ncu's own folder (nsight-compute-<version>/ncu), or a CUDA toolkit's bin/ next to nsight-compute-<version>/
    folders = [found / "extras" / "python", *sorted(found.parent.glob("nsight-compute*/extras/python"), reverse=True)]
    for folder in folders:
        if (folder / "ncu_report.py").is_file():
            sys.path.append(str(folder))
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                sys.path.remove(str(folder))
    return None


def _has_value(metric: Any) -> bool:  # ncu_report.IMetric (untyped)
    """``IMetric.has_value()``; the 2020-era interface only has ``has_value(value_kind)`` (NvRules API 2020.1.2)."""
    check = getattr(metric, "has_value", None)
    if check is None:
        return True
    try:
        return bool(check())
    except TypeError:
        kind = metric.kind() if hasattr(metric, "kind") else None
        return kind is not None and bool(check(kind))


def _raw_value(metric: Any) -> Any:  # ncu_report.IMetric; its value: a number or a string, untyped
    """``value()`` where it exists; the 2020-era interface has only the typed ``as_double``/``as_string``."""
    if hasattr(metric, "value"):
        return metric.value()
    try:
        return metric.as_double()
    except (TypeError, ValueError, RuntimeError):
        return metric.as_string()


def _metric_value(metric: Any) -> tuple[float | None, str | None]:  # ncu_report.IMetric
    """(SI number, None) or (None, text) or (None, None) when the metric has no value."""
    if not _has_value(metric):
        return None, None
    value = _raw_value(metric)
    if value is None:
        return None, None
    if isinstance(value, str):
        return None, value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None, str(value)
    factor, _ = unit_factor((metric.unit() if hasattr(metric, "unit") else _base_unit(metric)) or "")
    return number * factor, None


def _base_unit(metric: Any) -> str:  # ncu_report.IMetric
    """No ``unit()`` on the 2020-era interface: values are in ncu's base units, nanoseconds for durations."""
    return "nsecond" if str(metric.name()).startswith("gpu__time_duration") else ""


def nvtx_ranges(action: Any, domain: str = NVTX_DOMAIN) -> tuple[str, ...]:  # ncu_report.IAction
    """The start/end ranges of ``domain`` an action (launch) ran in: ``IAction.nvtx_state()`` ->
    ``INvtxState.domains()`` -> ``domain_by_id(i).name()`` / ``.start_end_ranges()``. Checked against the
    H100 report of docs/gpu.md: its four launches hold ``region-0``."""
    try:
        state = action.nvtx_state()
        if state is None:
            return ()
        for index in state.domains():
            info = state.domain_by_id(index)
            if str(info.name()) == domain:
                return tuple(str(name) for name in info.start_end_ranges())
    except (AttributeError, RuntimeError, TypeError):  # an older reader without NVTX access
        return ()
    return ()


def read_with_module(path: str | os.PathLike[str], module: ModuleType) -> ParsedLaunches:
    context = module.load_report(os.fspath(path))
    launches: list[LaunchRecord] = []
    demangled = getattr(getattr(module, "IAction", None), "NameBase_DEMANGLED", None)
    for range_index in range(context.num_ranges()):
        profile_range = context.range_by_idx(range_index)
        for action_index in range(profile_range.num_actions()):
            action = profile_range.action_by_idx(action_index)
            name = action.name(demangled) if demangled is not None else action.name()
            launch = LaunchRecord(launch_id=f"{range_index}:{action_index}", kernel=str(name),
                                  ranges=nvtx_ranges(action))
            for metric_name in action.metric_names():
                if not _RELEVANT_RE.match(metric_name):
                    continue
                number, text = _metric_value(action.metric_by_name(metric_name))
                if text is not None:
                    launch.text[metric_name] = text
                else:
                    launch.metrics[metric_name] = number
            launch.finish()
            launches.append(launch)
    return ParsedLaunches(FORMAT_NCU_REP, launches, [], 0)


def read_with_cli(path: str | os.PathLike[str], ncu: str) -> ParsedLaunches:
    argv = [ncu, "--import", os.fspath(path), "--csv", "--page", "raw"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise ReportReadError(f"'{' '.join(argv)}' did not finish in {IMPORT_TIMEOUT_S} s") from error
    if done.returncode != 0:
        raise ReportReadError(
            f"'{' '.join(argv)}' exited with {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}"
        )
    parsed = parse_csv_text(done.stdout)
    parsed.format = FORMAT_RAW
    return parsed


def read_ncu_rep(path: str | os.PathLike[str], ncu: str | None = None) -> ParsedLaunches:
    """Launch records of a ``.ncu-rep`` file, by whichever reader is available."""
    module = find_ncu_report_module(ncu) if ncu else find_ncu_report_module()
    if module is not None:
        return read_with_module(path, module)
    executable = ncu or shutil.which("ncu")
    if executable:
        return read_with_cli(path, executable)
    raise ReportReaderMissing(
        f"cannot read {os.fspath(path)!r}: reading a .ncu-rep file needs NVIDIA's ncu_report Python module "
        "(pip install ncu-report, or pip install 'pytest-roofline[ncu]'; no GPU needed) or the Nsight Compute "
        "CLI 'ncu' on PATH. Alternatively export it where ncu exists with "
        "'ncu --import FILE.ncu-rep --csv --page raw > FILE.csv' and import the CSV."
    )
