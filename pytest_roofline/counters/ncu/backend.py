"""Profile one pytest node in a child process under ncu and read the kernels back.

The parent builds the ncu command (:func:`~pytest_roofline.counters.ncu.command.build_ncu_command`) around
``python -m pytest NODEID`` with ``PYTEST_ROOFLINE_NCU_CHILD=1`` in the environment (the child's
``roofline.measure`` then opens NVTX start/end ranges in the ``pytest_roofline`` domain instead of measuring),
runs it without a shell, and turns the exported ``.ncu-rep`` into per-kernel samples.

Outcomes, each with its own exception so the plugin can map it:

* :class:`NcuNotFound` -- no ncu executable (``PYTEST_ROOFLINE_NCU`` or ``ncu`` on PATH);
* :class:`NoGpu` -- no CUDA device, so nothing to profile; its subclass :class:`ProfilingNotSupported` when ncu
  says "Profiling is not supported on device N" (a chip this ncu does not support, or WSL/virtual GPUs);
* :class:`CountersNotPermitted` -- ``ERR_NVGPUCTRPERM``: a skip, not a failure; the message carries the fix;
* :class:`ProfiledChildFailed` -- the child crashed, failed or timed out; the message names the log files;
* :class:`NoKernelsInRange` -- the run finished but no kernel ran inside the NVTX range.

Nothing half-written is left: ncu exports to a temporary name in the artifact folder, renamed to the final
``.ncu-rep`` only after a clean run (the report is kept as an artifact for the Nsight Compute GUI).

ncu serializes profiling across processes with a lock file (``$TMPDIR/nsight-compute-lock``), so pytest-xdist
workers profile one at a time anyway. This module takes its own lock around each run so that a worker's timeout
counts its own run only, not the time spent waiting for another worker's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.counters.ncu.command import (
    DEFAULT_CACHE_CONTROL,
    DEFAULT_CLOCK_CONTROL,
    REPORT_SUFFIX,
    build_ncu_command,
)
from pytest_roofline.counters.ncu.kernel_report import NcuReport, load_report
from pytest_roofline.errors import (  # noqa: F401 (re-exported under its old name)
    CountersNotPermitted,
    NcuBackendError,
    NcuNotFound,
    NoGpu,
    NoKernelsInRange,
    ProfiledChildFailed,
    ProfilingNotSupported,
)
from pytest_roofline.host.process_role import CHILD_ENV
from pytest_roofline.model import KernelSample

NCU_ENV = "PYTEST_ROOFLINE_NCU"
DEFAULT_TIMEOUT_S = 1800.0
LOCK_NAME = "pytest-roofline-ncu.lock"

PERMISSION_FIX = (
    "ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM). Fixes: run as root "
    "('sudo $(which ncu) ...' keeps your PATH and venv); or allow non-admin profiling with "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/ and reload the driver or reboot "
    "(check /proc/driver/nvidia/params shows RmProfilingAdminOnly: 0); in a container add --cap-add=SYS_ADMIN "
    "or change the setting on the host. See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
_NO_GPU_PATTERNS = re.compile(
    r"(no CUDA-capable device|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|No supported GPUs? (were )?found|"
    r"Failed to find any (supported )?GPU)", re.IGNORECASE)
_NO_KERNELS_PATTERN = re.compile(r"No kernels were profiled", re.IGNORECASE)
# ncu: "==ERROR== Profiling is not supported on device 0. To find out supported GPUs refer --list-chips option."
# (and "... on device 0 as it uses the Windows Subsystem for Linux"); ncu then also warns that no kernels were
# profiled, which must not be read as an empty NVTX range.
NOT_SUPPORTED_PATTERN = re.compile(r"Profiling is not supported on device\s*(\d+)?[^\n]*", re.IGNORECASE)
NOT_SUPPORTED_FIX = (
    "this ncu cannot profile the GPU. Causes: a chip this ncu version does not support (compare "
    "'ncu --list-chips' with the GPU: Blackwell needs a 2025 ncu, Volta an ncu from CUDA 12.x or older, Pascal and "
    "older none), WSL2 on Windows 10, or a virtual GPU without profiling enabled. Install a matching Nsight Compute "
    "(or run on bare metal) and check with 'pytest-roofline doctor'"
)


@dataclass(frozen=True)
class NcuProfile:
    report: NcuReport
    report_path: Path
    ncu_log: Path
    child_log: Path
    argv: list[str]

    @property
    def samples(self) -> list[KernelSample]:
        return self.report.samples()


Runner = Callable[..., "subprocess.CompletedProcess[bytes]"]  # its output goes to a log file
ReportReader = Callable[..., NcuReport]


def missing_ncu_text() -> str:
    """What to do when no ncu executable is found (said by the profiler and by ``auto``'s fallback)."""
    return (f"Nsight Compute's 'ncu' was not found: install Nsight Compute (it comes with the CUDA toolkit) "
            f"and put ncu on PATH, or set {NCU_ENV}=/path/to/ncu")


def find_ncu(environ: Mapping[str, str] | None = None) -> str | None:
    """The ncu executable: ``$PYTEST_ROOFLINE_NCU`` when set, else ``ncu`` on PATH."""
    env = os.environ if environ is None else environ
    search = env.get("PATH") if environ is not None else None  # a given environment brings its own PATH
    configured = env.get(NCU_ENV)
    if configured:
        return configured if os.path.isfile(configured) or shutil.which(configured, path=search) else None
    return shutil.which("ncu", path=search)


def detect_compute_capability() -> tuple[int, int] | None:
    """The current CUDA device's compute capability via torch or CuPy (imported here), or None without a GPU."""
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return (int(major), int(minor))
    with contextlib.suppress(Exception):
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            text = str(cupy.cuda.Device().compute_capability)  # e.g. "89", "120"
            return (int(text[:-1]), int(text[-1]))
    return None


def child_pytest_argv(nodeid: str, python: str | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """``python -m pytest NODEID`` for the profiled child, quiet and without touching the cache."""
    return [python or sys.executable, "-m", "pytest", nodeid, "-q", "-p", "no:cacheprovider", *extra_args]


def artifact_stem(nodeid: str) -> str:
    """A file-name-safe stem for a node id: ``tests/test_a.py::test_b[x-1]`` -> ``test_a.py__test_b_x-1_``."""
    path, _, rest = nodeid.partition("::")  # parameters may hold "/" too: only the path loses its folders
    tail = path.rsplit("/", 1)[-1] + ("__" + rest.replace("::", "__") if rest else "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", tail)[:150] or "node"


@contextlib.contextmanager
def exclusive(lock_dir: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: rely on ncu's own lock
        yield
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / LOCK_NAME, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def raise_for_environment(told: str, what: str, ncu_log: Path) -> None:
    """The outcomes that concern the runner, not a test (no permission, no supported GPU), from ncu's text."""
    if "ERR_NVGPUCTRPERM" in told:
        raise CountersNotPermitted(PERMISSION_FIX)
    not_supported = NOT_SUPPORTED_PATTERN.search(told)
    if not_supported:
        raise ProfilingNotSupported(f"ncu: '{not_supported.group(0).strip()}' while profiling {what}: "
                                    f"{NOT_SUPPORTED_FIX}; log: {ncu_log}")
    if _NO_GPU_PATTERNS.search(told):
        raise NoGpu(f"ncu found no usable CUDA device while profiling {what}; log: {ncu_log}")


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def discard(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def profile_node(
    nodeid: str,
    artifact_dir: str | os.PathLike[str],
    *,
    cc: str | tuple[int, int] | None,
    ncu: str | None = None,
    python: str | None = None,
    extra_pytest_args: Sequence[str] = (),
    nvtx_range: str | None = None,
    clock_control: str = DEFAULT_CLOCK_CONTROL,
    cache_control: str = DEFAULT_CACHE_CONTROL,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    runner: Runner = subprocess.run,
    read_report: ReportReader = load_report,
    lock_dir: str | os.PathLike[str] | None = None,
) -> NcuProfile:
    """Run ``nodeid`` in a child under ncu and return its kernels; see the module docstring for the outcomes."""
    executable = ncu or find_ncu()
    if not executable:
        raise NcuNotFound(missing_ncu_text())
    if cc is None:
        raise NoGpu("no CUDA device was found, so there is nothing for ncu to profile")
    folder = Path(artifact_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = artifact_stem(nodeid)
    final_report = folder / f"{stem}{REPORT_SUFFIX}"
    partial_report = folder / f".{stem}.{uuid.uuid4().hex[:8]}.partial{REPORT_SUFFIX}"
    ncu_log = folder / f"{stem}.ncu.log"
    child_log = folder / f"{stem}.child.log"
    argv = build_ncu_command(cc, child_pytest_argv(nodeid, python, extra_pytest_args), partial_report,
                             ncu=executable, nvtx_range=nvtx_range, clock_control=clock_control,
                             cache_control=cache_control, log_file=ncu_log)
    child_env = dict(os.environ if env is None else env)
    child_env[CHILD_ENV] = "1"
    logs = [ncu_log, child_log]
    try:
        lock = exclusive(Path(lock_dir) if lock_dir else Path(tempfile.gettempdir()))
        with lock, open(child_log, "wb") as output:
            try:
                done = runner(argv, stdout=output, stderr=subprocess.STDOUT, timeout=timeout_s,
                              env=child_env, cwd=None if cwd is None else os.fspath(cwd), check=False)
            except subprocess.TimeoutExpired:
                raise ProfiledChildFailed(
                    f"profiling {nodeid} under ncu did not finish in {timeout_s:g} s; logs: "
                    f"{ncu_log}, {child_log}", logs, None, True) from None
        told = read_text(ncu_log) + "\n" + read_text(child_log)
        raise_for_environment(told, nodeid, ncu_log)
        if done.returncode != 0:
            what = (f"was killed by signal {-done.returncode}" if done.returncode < 0
                    else "failed (its test failed under ncu)" if done.returncode == 1
                    else f"exited with status {done.returncode}")
            raise ProfiledChildFailed(
                f"the profiled child for {nodeid} {what}; logs: {ncu_log}, {child_log}\n{tail(told)}",
                logs, done.returncode, False)
        if not partial_report.is_file():
            if _NO_KERNELS_PATTERN.search(told):
                raise NoKernelsInRange(_no_kernels_message(nodeid, ncu_log))
            raise ProfiledChildFailed(f"ncu exited cleanly but wrote no report for {nodeid}; logs: {ncu_log}, "
                                      f"{child_log}\n{tail(told)}", logs, done.returncode, False)
        os.replace(partial_report, final_report)
    finally:
        discard(partial_report)
    report = read_report(final_report, cc=cc, clock_control=clock_control)
    if not report.kernels:
        raise NoKernelsInRange(_no_kernels_message(nodeid, ncu_log))
    return NcuProfile(report, final_report, ncu_log, child_log, argv)


def _no_kernels_message(nodeid: str, ncu_log: Path) -> str:
    return (f"no kernel ran inside the pytest_roofline NVTX range while profiling {nodeid}: the GPU work must run "
            f"inside roofline.measure(...) (log: {ncu_log})")
