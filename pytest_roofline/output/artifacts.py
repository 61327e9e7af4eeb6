"""Files a session leaves behind: ``results.json``, and per failing test a chart and a kernel table.

Names come from pytest node ids but are reduced to a safe alphabet, so no id (``/``, ``..``, ``[``, ``::``,
unicode, thousands of characters) can place a file outside the artifact directory.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Sequence
from pathlib import Path

from pytest_roofline._atomic import write_text_atomic
from pytest_roofline._safe_text import csv_row
from pytest_roofline.model import KernelSample, Machine, lower_bound
from pytest_roofline.output.kernel_view import by_time, is_tensor_kernel, kernel_seconds

# One cell of the kernel table: a number (a bool for ``tensor_core``), a name, or "" where not known.
KernelRow = dict[str, float | str]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_STEM = 80


def safe_stem(nodeid: str) -> str:
    """A file-name stem for a node id: readable prefix plus a hash of the full id (unique, bounded)."""
    readable = _UNSAFE.sub("_", nodeid.replace("::", "__")).strip("._-") or "test"
    readable = re.sub(r"\.{2,}", ".", readable)[:_MAX_STEM].rstrip("._-")
    digest = hashlib.sha1(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{readable}-{digest}"


def artifact_path(directory: Path, nodeid: str, suffix: str) -> Path:
    """Where a test's artifact goes; guaranteed to be a direct child of ``directory``."""
    path = directory / f"{safe_stem(nodeid)}{suffix}"
    if path.resolve().parent != directory.resolve():  # belt and braces: the stem has no separators
        raise ValueError(f"artifact name for {nodeid!r} escapes {directory}")
    return path


def kernel_rows(kernels: Sequence[KernelSample], machine: Machine) -> list[KernelRow]:
    """One row per kernel, the longest first: its share of the kernels' time, whether it ran on Tensor Cores,
    its FLOPs per precision, bytes and intensity per level, attained fraction and bound."""
    precisions = sorted({p for k in kernels for p in k.flops})
    levels = sorted({lv for k in kernels for lv in k.bytes})
    total = sum(kernel_seconds(k, machine) for k in kernels)
    rows: list[KernelRow] = []
    for kernel in by_time(kernels, machine):
        bound = lower_bound(kernel.flops, kernel.bytes, machine)
        row: KernelRow = {
            "name": kernel.name,
            "launches": kernel.launches,
            "time_share": kernel_seconds(kernel, machine) / total if total > 0 else "",
            "tensor_core": is_tensor_kernel(kernel),
            "time_s": "" if kernel.time_s is None else kernel.time_s,
            "t_min_s": bound.t_min,
            "bound": bound.bound,
            "fraction": "" if kernel.time_s is None else bound.t_min / kernel.time_s,
            "lost_s": "" if kernel.time_s is None else kernel.time_s - bound.t_min,
            "flops": kernel.total_flops,
        }
        row.update({f"flops_{p}": kernel.flops.get(p, 0.0) for p in precisions})
        row.update({f"bytes_{lv}": kernel.bytes.get(lv, 0.0) for lv in levels})
        row.update({f"ai_{lv}": (kernel.total_flops / kernel.bytes[lv]) if kernel.bytes.get(lv) else ""
                    for lv in levels})
        rows.append(row)
    return rows


def write_kernels_csv(path: Path, kernels: Sequence[KernelSample], machine: Machine) -> Path:
    rows = kernel_rows(kernels, machine)
    buffer = io.StringIO()
    if rows:
        safe = [csv_row(row) for row in rows]  # kernel names are untrusted: no cell may run as a formula
        writer = csv.DictWriter(buffer, fieldnames=list(safe[0]))
        writer.writeheader()
        writer.writerows(safe)
    return write_text_atomic(path, buffer.getvalue())
