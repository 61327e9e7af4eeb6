"""The ncu command line that profiles one child process (an argv list, never a shell string).

Choices, with the reason for each (research §6, §8):

* ``--target-processes all``: the profiled code runs in a child Python; the default was ``application-only``
  up to ncu 2022.3.
* ``--nvtx --nvtx-include regex:pytest_roofline@.+`` (or ``pytest_roofline@<range>``): only kernels inside the
  start/end ranges that ``roofline.measure`` opens in the ``pytest_roofline`` domain are profiled, so warm-up and
  setup are not. Start/end ranges (not push/pop) are process-wide, which keeps kernels that autograd launches
  from its backward thread inside the range.
* ``--clock-control none`` (our default; ncu's own default is ``base``, ``NCU_DEFAULT_CLOCK_CONTROL``, checked
  against the official ncu 2022.3 CLI manual and Profiling Guide, and against recent ``ncu --help`` texts as users
  transcribed them, ``--clock-control arg (=base)``; the current manual itself could not be read here. We always
  pass the option, so ncu's default never applies to our runs): ncu would otherwise lock the GPU to base clocks
  (sample 05 ran at 0.88–1.0 GHz on an A100 whose boost clock is 1.41 GHz), while the roofs are measured at the
  clocks the GPU normally runs. With ``none`` the measured times are comparable to the roofs; the price is some
  run-to-run clock variation. The policy is recorded in every result (``clock_control``).
* ``--cache-control all`` (ncu's default): caches are flushed before each replay pass, so bytes are those of the
  kernel run in isolation and repeatable; times are cold-cache times.
* ``--replay-mode kernel`` (default): one kernel is replayed pass after pass; ``application`` re-runs the child
  once per pass and needs deterministic kernel order. ``range`` would give per-range, not per-kernel, metrics and
  is refused.
* ``--export FILE.ncu-rep --force-overwrite``: the report is read back by the parent and kept as an artifact.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pytest_roofline.counters.ncu.metrics import metric_set

NVTX_DOMAIN = "pytest_roofline"
REPORT_SUFFIX = ".ncu-rep"
CLOCK_CONTROLS = ("none", "base")
CACHE_CONTROLS = ("all", "none")
REPLAY_MODES = ("kernel", "application")
DEFAULT_CLOCK_CONTROL = "none"
NCU_DEFAULT_CLOCK_CONTROL = "base"  # what ncu does when not told (see the module docstring for the versions)
DEFAULT_CACHE_CONTROL = "all"
DEFAULT_REPLAY_MODE = "kernel"

# The ncu CLI manual's NVTX Filtering tables reserve, for start/end ranges, "," (between range names) and "@" (after
# the domain); for push/pop ranges "/" (between ranges), "[" (bottom of the stack), "]" (top of the stack), "+"
# (exactly one range between two others) and "*" (any number of ranges between). A leading "regex:" switches to
# regular expressions, and "\\" escapes a delimiter (ncu 2020.1.1 fixed "escaped domain delimiters"). A range name
# with any of them would be read as filter syntax, so it is refused rather than escaped.
NVTX_RESERVED = ",@/[]+*\\"
_REGEX_PREFIX = "regex:"


def nvtx_include_expression(range_name: str | None = None) -> str:
    """The ``--nvtx-include`` value: every range of our domain, or one named start/end range in it."""
    if range_name is None:
        return f"{_REGEX_PREFIX}{NVTX_DOMAIN}@.+"
    if (not range_name or set(range_name) & set(NVTX_RESERVED) or range_name != range_name.strip()
            or range_name.startswith(_REGEX_PREFIX)):
        raise ValueError(
            f"NVTX range name {range_name!r} cannot be used in an ncu filter: it must be non-empty, "
            f"without surrounding spaces, not start with '{_REGEX_PREFIX}' and have none of "
            f"{' '.join(NVTX_RESERVED)} (ncu's NVTX filter syntax)"
        )
    return f"{NVTX_DOMAIN}@{range_name}"


def report_path(export_path: str | os.PathLike[str]) -> str:
    """The file ncu writes for ``--export export_path`` (it appends ``.ncu-rep`` when missing)."""
    text = os.fspath(export_path)
    return text if text.endswith(REPORT_SUFFIX) else text + REPORT_SUFFIX


def build_ncu_command(
    cc: str | float | tuple[int, int],
    child_argv: Sequence[str],
    export_path: str | os.PathLike[str],
    *,
    ncu: str = "ncu",
    nvtx_range: str | None = None,
    clock_control: str = DEFAULT_CLOCK_CONTROL,
    cache_control: str = DEFAULT_CACHE_CONTROL,
    replay_mode: str = DEFAULT_REPLAY_MODE,
    log_file: str | os.PathLike[str] | None = None,
    extra_metrics: Sequence[str] = (),
) -> list[str]:
    """argv that runs ``child_argv`` under ncu, collecting the roofline metrics for compute capability ``cc``."""
    argv_list = [str(arg) for arg in child_argv]
    if not argv_list:
        raise ValueError("child_argv must name the program to profile")
    if clock_control not in CLOCK_CONTROLS:
        raise ValueError(f"clock_control must be one of {CLOCK_CONTROLS}, got {clock_control!r}")
    if cache_control not in CACHE_CONTROLS:
        raise ValueError(f"cache_control must be one of {CACHE_CONTROLS}, got {cache_control!r}")
    if replay_mode not in REPLAY_MODES:
        raise ValueError(f"replay_mode must be one of {REPLAY_MODES} (range replay has no per-kernel metrics), "
                         f"got {replay_mode!r}")
    names = metric_set(cc).names
    for extra in extra_metrics:
        if extra not in names:
            names.append(extra)
    command = [
        ncu,
        "--target-processes", "all",
        "--nvtx",
        "--nvtx-include", nvtx_include_expression(nvtx_range),
        "--metrics", ",".join(names),
        "--clock-control", clock_control,
        "--cache-control", cache_control,
        "--replay-mode", replay_mode,
        "--export", report_path(export_path),
        "--force-overwrite",
    ]
    if log_file is not None:
        command += ["--log-file", os.fspath(log_file)]
    return command + argv_list
