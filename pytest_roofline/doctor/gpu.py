"""``pytest-roofline doctor``: will ``--roofline`` work here? The CPU path on any machine
(:mod:`pytest_roofline.doctor.cpu_checks`), then, with the ncu counter on a GPU runner:

Checks, one line each, with the fix for each failure:

1. ``ncu``: found (``$PYTEST_ROOFLINE_NCU`` or ``PATH``) and its version (``ncu --version``);
2. ``driver``: ``nvidia-smi`` answers, and the driver version;
3. ``gpus``: each GPU's name and compute capability, and whether the metric lists cover it;
4. ``ncu version``: old enough / new enough for each GPU's architecture;
5. ``counters``: ncu profiles a tiny kernel (``probe.py``) with one metric: this is where ``ERR_NVGPUCTRPERM`` and
   "Profiling is not supported on device" show up;
6. ``metrics CC X.Y``: ncu profiles the tiny kernel with exactly the list ``--roofline`` asks for on that CC
   (ncu fails the run on a name the chip lacks: "==ERROR== Failed to find metric ...").

Exit status of ``doctor``: 0 when every check passed (warnings allowed), also on a machine without an NVIDIA GPU
whose CPU path is ready (``--roofline-counter auto`` uses the analytic counter there); 1 when one failed.
:attr:`Diagnosis.exit_code` of the GPU checks alone is 3 (``EXIT_NO_GPU``) without a GPU.
Everything runs as subprocesses without a shell; nothing is imported from CUDA libraries in this process.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.counters.ncu.backend import (
    NCU_ENV,
    NOT_SUPPORTED_FIX,
    NOT_SUPPORTED_PATTERN,
    PERMISSION_FIX,
    find_ncu,
)
from pytest_roofline.counters.ncu.metrics import (
    TIME_METRIC,
    VOLTA_CC,
    UnsupportedComputeCapability,
    format_cc,
    metric_set,
    parse_cc,
)
from pytest_roofline.counters.ncu.parse import NcuParseError, parse_csv_text
from pytest_roofline.doctor.checks import FAIL, OK, SKIP, WARN, Check

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_NO_GPU = 3
RUN_TIMEOUT_S = 180.0
PROBE = Path(__file__).parent.parent / "counters" / "ncu" / "probe.py"  # the kernel ncu profiles


# Architecture support by ncu version, from NVIDIA's GPU support tables: ncu 2024.1 lists Volta .. GH100 and no
# Blackwell (GB10x/GB11x/GB20x appear in the 2025 releases); the current table lists Volta as unsupported (dropped
# with CUDA 13's ncu, 2025.3). The lists here were checked against a 2025-era section (``metrics.py``).
FIRST_BLACKWELL_NCU = (2025, 1)
FIRST_NCU_WITHOUT_VOLTA = (2025, 3)
CHECKED_AGAINST_NCU = (2025, 1)

_VERSION_RE = re.compile(r"Version\s+(\d{4})\.(\d+)(?:\.(\d+))?")
# "==ERROR== Failed to find metric regex:^flop_count_sp\.(sum|min|max|avg|pct|ratio|max_rate)$"
_MISSING_METRIC_RE = re.compile(r"Failed to find metric\s+(?:regex:)?\^?(\S+)")
_NO_DEVICE_RE = re.compile(r"(couldn't communicate with the NVIDIA driver|No devices were found)", re.IGNORECASE)

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    cc: tuple[int, int] | None
    driver: str


@dataclass
class Diagnosis:
    checks: list[Check]
    no_gpu: bool = False

    @property
    def exit_code(self) -> int:
        if self.no_gpu:
            return EXIT_NO_GPU
        return EXIT_FAIL if any(c.status == FAIL for c in self.checks) else EXIT_OK

    def verdict(self) -> str:
        if self.no_gpu:
            return ("verdict: no NVIDIA GPU here: --roofline-counter auto uses the analytic counter on this machine; "
                    f"nothing to check for ncu (exit {EXIT_NO_GPU})")
        failed = [c.name for c in self.checks if c.status == FAIL]
        if failed:
            return f"verdict: --roofline with the ncu counter will NOT work here (failed: {', '.join(failed)})"
        return "verdict: --roofline with the ncu counter will work here"


def _run(run: Runner, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float
         ) -> tuple[int | None, str]:
    """(exit status, stdout + stderr); status None when it could not start or timed out."""
    try:
        done = run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                   env=None if env is None else dict(env))
    except subprocess.TimeoutExpired:
        return None, f"'{' '.join(argv)}' did not finish in {timeout:g} s"
    except OSError as error:
        return None, str(error)
    return done.returncode, (done.stdout or "") + (done.stderr or "")


def parse_ncu_version(text: str) -> tuple[int, int, int] | None:
    """``"Version 2025.3.1.0 (build 36398880) (public-release)"`` -> ``(2025, 3, 1)``."""
    match = _VERSION_RE.search(text)
    return None if match is None else (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def check_ncu(env: Mapping[str, str], run: Runner, timeout: float) -> tuple[Check, str | None, tuple[int, ...] | None]:
    path = find_ncu(env)
    if path is None:
        configured = env.get(NCU_ENV)
        where = f"{NCU_ENV}={configured} is not an executable" if configured else "'ncu' is not on PATH"
        return (Check("ncu", FAIL, f"Nsight Compute CLI not found ({where})",
                      f"install Nsight Compute (CUDA toolkit or the standalone package) and put ncu on PATH, or "
                      f"set {NCU_ENV}=/path/to/ncu"), None, None)
    status, output = _run(run, [path, "--version"], env, timeout)
    version = parse_ncu_version(output) if status == 0 else None
    if version is None:
        return (Check("ncu", FAIL, f"{path} --version did not answer with a version: {_tail(output)}",
                      "reinstall Nsight Compute; the file found is not a working ncu"), path, None)
    return Check("ncu", OK, f"{path}, version {'.'.join(map(str, version))}"), path, version


def query_gpus(env: Mapping[str, str], run: Runner, timeout: float) -> tuple[list[Check], list[Gpu], bool]:
    """(driver and gpus checks, GPUs, no_gpu)."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return [Check("driver", SKIP, "nvidia-smi not found: no NVIDIA driver on this machine")], [], True
    argv = [smi, "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"]
    status, output = _run(run, argv, env, timeout)
    if status is None:
        return [Check("driver", SKIP, "nvidia-smi not found: no NVIDIA driver on this machine")], [], True
    if status != 0 and _NO_DEVICE_RE.search(output):
        return [Check("driver", SKIP, f"nvidia-smi: {_tail(output, 1)}")], [], True
    if status != 0:  # e.g. 'Field "compute_cap" is not a valid field to query.' from an old driver's nvidia-smi
        failed = Check("driver", FAIL, f"nvidia-smi failed ({status}): {_tail(output, 2)}",
                       "update the NVIDIA driver: one too old to report compute_cap is too old for a current ncu")
        return [failed], [], False
    gpus: list[Gpu] = []
    for line in output.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        try:
            cc = parse_cc(fields[2])
        except ValueError:
            cc = None
        gpus.append(Gpu(int(fields[0]), fields[1], cc, fields[3]))
    if not gpus:
        return [Check("driver", SKIP, "nvidia-smi lists no GPU")], [], True
    drivers = sorted({g.driver for g in gpus})
    checks = [Check("driver", OK, f"NVIDIA driver {', '.join(drivers)}")]
    listed = "; ".join(f"{g.index}: {g.name}, CC {format_cc(g.cc) or '?'}" for g in gpus)
    problems = []
    for gpu in gpus:
        if gpu.cc is None:
            problems.append(f"GPU {gpu.index} reports no compute capability")
            continue
        try:
            chosen = metric_set(gpu.cc)
        except UnsupportedComputeCapability as error:
            problems.append(str(error))
            continue
        if not chosen.checked:
            checks.append(Check(f"gpu {gpu.index}", WARN,
                                f"CC {format_cc(gpu.cc)} is not in the stock section the metric lists were checked "
                                f"against; CC {format_cc(chosen.names_from)}'s names are used",
                                "the 'metrics' check below tells whether ncu accepts them"))
    if problems:
        checks.insert(1, Check("gpus", FAIL, f"{listed}; {'; '.join(problems)}",
                               "ncu (and so the ncu counter) supports compute capability 7.0 and newer only"))
    else:
        checks.insert(1, Check("gpus", OK, listed))
    return checks, gpus, False


def check_version_for(version: tuple[int, ...] | None, gpus: Sequence[Gpu]) -> Check:
    if version is None:
        return Check("ncu version", SKIP, "no ncu version to compare")
    shown = ".".join(map(str, version))
    ccs = sorted({g.cc for g in gpus if g.cc is not None})
    blackwell = [c for c in ccs if c >= (10, 0)]
    if blackwell and version[:2] < FIRST_BLACKWELL_NCU:
        return Check("ncu version", FAIL,
                     f"ncu {shown} is too old for CC {', '.join(str(format_cc(c)) for c in blackwell)} (Blackwell)",
                     f"install Nsight Compute {FIRST_BLACKWELL_NCU[0]}.{FIRST_BLACKWELL_NCU[1]} or newer "
                     "(CUDA 12.8+; B300, Thor and DGX Spark need the newest release)")
    volta = [c for c in ccs if c in VOLTA_CC]
    if volta and version[:2] >= FIRST_NCU_WITHOUT_VOLTA:
        return Check("ncu version", FAIL, f"ncu {shown} no longer supports Volta (CC 7.0/7.2)",
                     "use the Nsight Compute of a CUDA 12.x toolkit on V100/Xavier")
    if version[:2] < CHECKED_AGAINST_NCU:
        return Check("ncu version", WARN,
                     f"ncu {shown} is older than the 2025 ncu whose sections the metric lists were checked against",
                     "the 'metrics' check below decides; a newer ncu avoids unknown names")
    return Check("ncu version", OK, f"ncu {shown} supports CC {', '.join(str(format_cc(c)) for c in ccs)}")


def _profile_argv(ncu: str, python: str, metrics: Sequence[str]) -> list[str]:
    # --clock-control none as the plugin uses (locking clocks fails on some virtualized GPUs)
    return [ncu, "--target-processes", "all", "--clock-control", "none", "--metrics", ",".join(metrics),
            "--csv", "--print-units", "base", python, str(PROBE)]


def _shown(ncu: str, python: str, gpu: Gpu, cc: tuple[int, int] | None) -> str:
    """The profiling command as a user can paste it (the full metric list through ``ncu-metrics``)."""
    metrics = (TIME_METRIC if cc is None
               else f'"$(pytest-roofline ncu-metrics --cc {format_cc(cc)} | paste -sd, -)"')
    argv = _profile_argv(ncu, python, ["METRICS"])
    command = " ".join(shlex.quote(arg) for arg in argv).replace("METRICS", metrics)
    return f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={gpu.index} {command}"


def _device_env(env: Mapping[str, str], index: int) -> dict[str, str]:
    child = dict(env)
    child["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA numbers GPUs as nvidia-smi does
    child["CUDA_VISIBLE_DEVICES"] = str(index)
    return child


def _failure(name: str, status: int | None, output: str) -> Check | None:
    """The check failing for a known reason in ncu's output, or None."""
    if "ERR_NVGPUCTRPERM" in output:
        return Check(name, FAIL, "ERR_NVGPUCTRPERM: no permission to read the GPU performance counters",
                     PERMISSION_FIX)
    not_supported = NOT_SUPPORTED_PATTERN.search(output)
    if not_supported:
        return Check(name, FAIL, f"ncu: '{not_supported.group(0).strip()}'", NOT_SUPPORTED_FIX)
    if status is None:
        return Check(name, FAIL, output, "see the message; run the ncu command by hand to see more")
    return None


def _launches(output: str) -> int:
    try:
        return len(parse_csv_text(output).launches)
    except NcuParseError:
        return 0


def check_counters(ncu: str, python: str, gpu: Gpu, env: Mapping[str, str], run: Runner, timeout: float) -> Check:
    name = "counters"
    status, output = _run(run, _profile_argv(ncu, python, [TIME_METRIC]), _device_env(env, gpu.index), timeout)
    known = _failure(name, status, output)
    if known is not None:
        return known
    if status != 0 or _launches(output) == 0:
        return Check(name, FAIL, f"ncu could not profile the probe kernel on GPU {gpu.index} (exit {status}): "
                                 f"{_tail(output)}",
                     f"run {_shown(ncu, python, gpu, None)} by hand; a CUDA error from 'probe:' means the driver "
                     "or GPU is not usable from this process")
    return Check(name, OK, f"ncu profiled a probe kernel on GPU {gpu.index} ({gpu.name})")


def check_metrics(ncu: str, python: str, gpu: Gpu, env: Mapping[str, str], run: Runner, timeout: float) -> Check:
    chosen = metric_set(gpu.cc or (0, 0))
    name = f"metrics CC {format_cc(chosen.cc)}"
    status, output = _run(run, _profile_argv(ncu, python, chosen.names), _device_env(env, gpu.index), timeout)
    missing = _MISSING_METRIC_RE.search(output)
    if missing:
        metric = missing.group(1).split("\\.(")[0].rstrip("$").replace("\\.", ".")
        return Check(name, FAIL, f"ncu does not know {metric} on this GPU ({len(chosen.names)} names asked)",
                     "report it with the output of 'ncu --query-metrics' for this GPU; a newer ncu may know it")
    known = _failure(name, status, output)
    if known is not None:
        return known
    if status != 0:
        return Check(name, FAIL, f"ncu exited with {status}: {_tail(output)}",
                     f"run {_shown(ncu, python, gpu, chosen.cc)} by hand")
    try:
        launches = parse_csv_text(output).launches
    except NcuParseError:
        launches = []
    if not launches:
        return Check(name, FAIL, f"ncu printed no result for the probe kernel: {_tail(output)}",
                     f"run {_shown(ncu, python, gpu, chosen.cc)} by hand")
    unavailable = sorted(n for n in chosen.names
                         if n in launches[0].text or launches[0].metrics.get(n, 0.0) is None)
    if unavailable:
        return Check(name, WARN, f"ncu accepted all {len(chosen.names)} names but printed n/a for: "
                                 f"{', '.join(unavailable)}",
                     "the precisions or levels these feed will be missing from results on this GPU")
    return Check(name, OK, f"ncu accepted all {len(chosen.names)} names (pytest-roofline ncu-metrics "
                           f"--cc {format_cc(chosen.cc)})")


def diagnose(env: Mapping[str, str] | None = None, python: str | None = None, run: Runner = subprocess.run,
             timeout: float = RUN_TIMEOUT_S) -> Diagnosis:
    environ = dict(os.environ if env is None else env)
    interpreter = python or sys.executable
    ncu_check, ncu, version = check_ncu(environ, run, timeout)
    checks = [ncu_check]
    gpu_checks, gpus, no_gpu = query_gpus(environ, run, timeout)
    checks += gpu_checks
    if no_gpu:  # without a GPU ncu is never used: its absence is no failure
        if ncu_check.status == FAIL:
            checks[0] = Check("ncu", SKIP, f"{ncu_check.detail}; not needed without an NVIDIA GPU")
        return Diagnosis(checks, no_gpu=True)
    if not gpus or any(c.status == FAIL for c in gpu_checks):
        return Diagnosis(checks)
    checks.append(check_version_for(version, gpus))
    if ncu is None or version is None:
        checks.append(Check("counters", SKIP, "no working ncu"))
        return Diagnosis(checks)
    first = gpus[0]
    counters = check_counters(ncu, interpreter, first, environ, run, timeout)
    checks.append(counters)
    if counters.status == FAIL:
        checks.append(Check("metrics", SKIP, "ncu cannot profile here yet (see 'counters')"))
        return Diagnosis(checks)
    seen: set[tuple[int, int] | None] = set()
    for gpu in gpus:  # one run per distinct CC: the list depends on the CC only
        if gpu.cc in seen:
            continue
        seen.add(gpu.cc)
        checks.append(check_metrics(ncu, interpreter, gpu, environ, run, timeout))
    return Diagnosis(checks)


def _tail(text: str, lines: int = 3) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "no output"
