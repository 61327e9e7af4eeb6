"""The ncu counter through the plugin (pytester, in-process), with a recorded report standing in for the ncu run.

``backend.profile_node`` keeps its real orchestration (argv, environment, logs, atomic report); only the
subprocess runner is replaced by one that writes the recorded CSV report where ncu would export, and
``find_ncu``/``detect_compute_capability`` are patched. pytester runs in this process, so patching the modules
here patches them for the run.

The recorded report (tests/fixtures/ncu/plugin_gemm_raw.csv, CC 8.0) holds two launches of an fp32 CUDA-core
``sgemm`` (1 ms each, 1e9 FFMA = 2e9 FLOPs in all; L1 1 GB, L2 100 MB, HBM 10 MB) and one ``copy_kernel``
(0.5 ms, no FLOPs, 8 MB at each level). Against MACHINE (fp32 0.5 TFLOP/s; L1 1 TB/s, L2 100 GB/s, HBM 10 GB/s)
the lower bounds are 4 ms (compute:fp32) + 0.8 ms (memory:HBM) = 4.8 ms.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401
import numpy  # noqa: F401
import pytest

from pytest_roofline.counters.ncu import backend, metric_set
from pytest_roofline.counters.ncu import deferred as ncu_gate
from pytest_roofline.counters.ncu.backend import CHILD_ENV
from pytest_roofline.counters.ncu.kernel_report import parse_report_text

# See test_plugin.py: heavy modules the plugin loads are imported once, here, not inside pytester runs
# (importing torch, or the analytic counter's torch submodules, in a run and again in the next one crashes).
try:
    import torch  # noqa: F401

    import pytest_roofline.counters.analytic  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="the analytic counter needs torch")

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
REPORT = FIXTURES / "plugin_gemm_raw.csv"
SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "ncu-samples"
T_MIN = 4.8e-3
MACHINE = {
    "name": "pinned-gpu",
    "peak_flops": {"fp64": 0.25e12, "fp32": 0.5e12, "fp16": 1e12, "fp16_tensor": 4e12},
    "bandwidth": {"L1": 1e12, "L2": 1e11, "HBM": 1e10},
    "info": {"source": "test"},
}
PERMISSION_LOG = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                  "Performance Counters on the target device 0.\n")

SLEEPY = """
import time
import pytest

def sleep_ms(ms):
    time.sleep(ms / 1e3)
    return ms
"""


def read_csv_report(path: Path, **options: Any):
    """The recorded reports are CSV text saved under the .ncu-rep name ncu would write."""
    return parse_report_text(Path(path).read_text(), str(path), **options)


class RecordedNcu:
    """Patches the backend so that ``profile_node`` runs for real except for the ncu subprocess."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, lock_dir: Path, *, report: Path | None = REPORT,
                 log: str = "==PROF== Disconnected\n", returncode: int = 0,
                 cc: tuple[int, int] | None = (8, 0), ncu: str | None = "/opt/nsight/ncu") -> None:
        self.report, self.log, self.returncode = report, log, returncode
        self.profiles: list[tuple[str, Path, dict[str, Any]]] = []
        self.runs: list[tuple[list[str], dict[str, Any]]] = []
        real = backend.profile_node

        def profile_node(nodeid: str, artifact_dir: Path, **kwargs: Any) -> backend.NcuProfile:
            self.profiles.append((nodeid, Path(artifact_dir), dict(kwargs)))
            return real(nodeid, artifact_dir, runner=self.run, read_report=read_csv_report, lock_dir=lock_dir,
                        **kwargs)

        monkeypatch.setattr(backend, "profile_node", profile_node)
        monkeypatch.setattr(backend, "find_ncu", lambda environ=None: ncu)
        monkeypatch.setattr(backend, "detect_compute_capability", lambda: cc)
        monkeypatch.setattr(ncu_gate, "counters_restricted", lambda *args, **kwargs: False)

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        self.runs.append((list(argv), kwargs))
        Path(argv[argv.index("--log-file") + 1]).write_text(self.log)
        kwargs["stdout"].write(b"1 passed\n")
        if self.report is not None and self.returncode == 0:
            Path(argv[argv.index("--export") + 1]).write_text(self.report.read_text())
        return subprocess.CompletedProcess(argv, self.returncode)


@pytest.fixture
def machine_file(pytester: pytest.Pytester, write_machine: Callable[..., Path]) -> Path:
    return write_machine(MACHINE)


def results(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / ".roofline" / "results.json").read_text())


def test_verdict_from_recorded_kernels_and_parent_time(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path)
    pytester.makepyfile(SLEEPY + """
@pytest.mark.roofline(min_fraction=0.1)
def test_two_sites(roofline):
    assert roofline.measure(sleep_ms, 6) == 6
    assert roofline.measure(sleep_ms, ms=4) == 4
""")
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*::test_two_sites*compute:fp32*passed", "counter: ncu"])

    (nodeid, artifact_dir, kwargs), = ncu.profiles
    assert nodeid == "test_verdict_from_recorded_kernels_and_parent_time.py::test_two_sites"
    # absolute (ncu runs from the rootdir), and the session's own folder under --roofline-dir
    assert artifact_dir.parent == pytester.path / ".roofline" / "sessions"
    assert kwargs["cc"] == (8, 0) and kwargs["ncu"] == "/opt/nsight/ncu"
    assert kwargs["cwd"] == pytester.path
    (argv, run_kwargs), = ncu.runs
    assert run_kwargs["env"][CHILD_ENV] == "1" and "shell" not in run_kwargs
    child = argv[argv.index("--log-file") + 2:]
    # With pytest-xdist installed the child is held to one in-process node whatever addopts say.
    xdist = ["-n", "0"] if importlib.util.find_spec("xdist") is not None else []
    assert child == [sys.executable, "-m", "pytest", nodeid, "-q", "-p", "no:cacheprovider",
                     "--rootdir", str(pytester.path), "--runxfail", *xdist]

    (test,) = results(pytester)["tests"]
    assert test["counter"] == "ncu" and test["outcome"] == "passed"
    assert test["clock_policy"]["ncu_clock_control"] == "none"
    assert "unprofiled" in test["clock_policy"]["time"]
    assert test["definitions"]["L1"] == "l1tex__t_bytes.sum" and test["definitions"]["cache_bytes"] == "t_bytes"
    assert test["t_min_s"] == pytest.approx(T_MIN)
    assert test["bound"] == "compute:fp32"
    assert test["bound_shares"] == pytest.approx({"compute:fp32": 4 / 4.8, "memory:HBM": 0.8 / 4.8})
    (region,) = test["regions"]
    assert region["label"] == "sleep_ms + sleep_ms" and region["counter"] == "ncu"
    parts = [part["timing"]["median_s"] for part in region["parts"]]
    assert parts[0] >= 0.006 and parts[1] >= 0.004
    assert test["time_s"] == pytest.approx(sum(parts))  # the parent's unprofiled times, not ncu's 2.5 ms
    assert test["fraction"] == pytest.approx(T_MIN / test["time_s"])
    assert {k["name"].split("(")[0]: (k["launches"], k["time_s"]) for k in test["kernels"]} == {
        "sgemm_128x64_nn": (2, pytest.approx(2e-3)), "copy_kernel": (1, pytest.approx(0.5e-3))}
    report = Path(test["ncu"]["report"])
    assert test["artifacts"] == [str(report)] and report.is_file()
    assert report.name == "test_verdict_from_recorded_kernels_and_parent_time.py__test_two_sites.ncu-rep"
    assert test["ncu"]["command"] == argv and test["ncu"]["kernel_time_s"] == pytest.approx(2.5e-3)
    assert test["ncu"]["devices"] == ["NVIDIA A100-SXM4-80GB"] and test["ncu"]["replay_passes"] == 3
    assert test["ncu"]["diagnostics"]["no_flop_time"]["share"] == pytest.approx(0.2)
    assert not [p for p in (pytester.path / ".roofline").rglob("*") if "partial" in p.name]


@pytest.mark.parametrize("cc", [(7, 0), (9, 0), (12, 0)])
def test_the_detected_compute_capability_picks_the_metrics(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    cc: tuple[int, int], run_roofline: Callable[..., pytest.RunResult],
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path, cc=cc)
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline\ndef test_a(roofline):\n    roofline.measure(sleep_ms, 10)\n")
    run_roofline(machine_file, "--roofline-counter", "ncu").assert_outcomes(passed=1)
    (argv, _), = ncu.runs
    assert argv[:6] == ["/opt/nsight/ncu", "--target-processes", "all", "--nvtx", "--nvtx-include",
                        "regex:pytest_roofline@.+"]
    assert argv[argv.index("--metrics") + 1] == ",".join(metric_set(cc).names)
    assert argv[argv.index("--clock-control") + 1] == "none"


def test_below_threshold_message_carries_the_ncu_diagnostics(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    RecordedNcu(monkeypatch, tmp_path)
    pytester.makepyfile(SLEEPY + """
@pytest.mark.roofline(min_fraction=0.99)
def test_slow(roofline):
    roofline.measure(sleep_ms, 20)  # 4.8 ms of work in >= 20 ms
""")
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "is below min_fraction 0.99" in out and "bound:      compute:fp32" in out
    assert "ncu report: " in out and "test_slow.ncu-rep (open it in Nsight Compute)" in out
    assert "ncu kernel time 2.5 ms (cold caches) vs" in out
    assert "top kernels by time:" in out and "80.0%" in out and "sgemm_128x64_nn" in out
    assert "time in kernels with no floating-point work: 20.0% (1 of 2 kernels)" in out
    assert "reuse factors (bytes at upper / lower level): L1/L2 9.33x, L2/HBM 6x" in out
    assert "compute-bound without Tensor Cores:" in out and "0 Tensor Core FLOPs" in out
    assert "Traceback" not in out
    (test,) = results(pytester)["tests"]
    assert test["outcome"] == "failed" and test["fraction"] < 0.25
    suffixes = sorted(Path(a).suffix for a in test["artifacts"])
    assert suffixes == [".csv", ".ncu-rep", ".png"]
    assert all((pytester.path / a).is_file() for a in test["artifacts"])


def test_explicit_ncu_without_ncu_is_a_usage_error(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path, ncu=None)
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline\ndef test_a(roofline):\n    roofline.measure(sleep_ms, 10)\n")
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--roofline-counter=ncu" in err and "'ncu' was not found" in err and "PYTEST_ROOFLINE_NCU" in err
    assert "Traceback" not in err and not ncu.profiles


def test_explicit_ncu_without_gpu_is_a_usage_error(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    RecordedNcu(monkeypatch, tmp_path, cc=None)
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline\ndef test_a(roofline):\n    roofline.measure(sleep_ms, 10)\n")
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--roofline-counter=ncu needs a CUDA GPU visible to PyTorch or CuPy" in result.stderr.str()


def test_explicit_ncu_without_permission_skips_with_the_fix(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path, log=PERMISSION_LOG, returncode=1)
    pytester.makepyfile(SLEEPY + """
@pytest.mark.roofline(min_fraction=0.5)
def test_a(roofline):
    roofline.measure(sleep_ms, 1)

@pytest.mark.roofline(min_fraction=0.5)
def test_b(roofline):
    roofline.measure(sleep_ms, 1)
""")
    result = run_roofline(machine_file, "--roofline-counter", "ncu", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED*ERR_NVGPUCTRPERM*NVreg_RestrictProfilingToAdminUsers=0*"])
    assert len(ncu.runs) == 1  # the second test is skipped without profiling again
    tests = results(pytester)["tests"]
    assert [t["outcome"] for t in tests] == ["skipped", "skipped"]
    assert all("ERR_NVGPUCTRPERM" in t["ncu"]["error"] and t["counter"] == "ncu" for t in tests)


@needs_torch
def test_auto_falls_back_to_analytic_once_when_counters_are_not_permitted(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path, log=PERMISSION_LOG, returncode=1)
    pytester.makepyfile(SLEEPY + """
@pytest.mark.roofline
def test_a(roofline):
    assert roofline.measure(sleep_ms, 2) == 2

@pytest.mark.roofline
def test_b(roofline):
    assert roofline.measure(sleep_ms, 2) == 2
""")
    result = run_roofline(machine_file, "-W", "always")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("RooflineWarning:") == 1  # other warnings may come from how pytest_roofline is installed
    assert "uses the analytic counter instead of ncu" in out and "NVreg_RestrictProfilingToAdminUsers=0" in out
    result.stdout.fnmatch_lines(["counter: analytic (auto)"])
    assert len(ncu.runs) == 1
    tests = results(pytester)["tests"]
    assert [t["counter"] for t in tests] == ["analytic", "analytic"]  # the first test is counted after all
    assert all(t["regions"][0]["timing"]["median_s"] >= 0.002 for t in tests)


@needs_torch
@pytest.mark.parametrize(
    ("cc", "ncu_path", "restricted", "warning"),
    [
        ((8, 0), None, False, "'ncu' was not found"),
        ((8, 0), "/opt/nsight/ncu", True, "ERR_NVGPUCTRPERM"),
        (None, None, False, None),  # no GPU: analytic without a word
    ],
)
def test_auto_decides_before_profiling(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    cc: tuple[int, int] | None, ncu_path: str | None, restricted: bool, warning: str | None,
    run_roofline: Callable[..., pytest.RunResult],
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path, cc=cc, ncu=ncu_path)
    monkeypatch.setattr(ncu_gate, "counters_restricted", lambda *args, **kwargs: restricted)
    pytester.makepyfile(SLEEPY + """
@pytest.mark.roofline
def test_a(roofline):
    roofline.measure(sleep_ms, 1)

@pytest.mark.roofline
def test_b(roofline):
    roofline.measure(sleep_ms, 1)
""")
    result = run_roofline(machine_file, "-W", "always")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("RooflineWarning:") == (0 if warning is None else 1)
    assert warning is None or warning in out
    assert not ncu.profiles
    assert [t["counter"] for t in results(pytester)["tests"]] == ["analytic", "analytic"]


def test_failing_child_is_an_error_with_the_log_paths(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    RecordedNcu(monkeypatch, tmp_path, log="==PROF== Disconnected\n", returncode=1)
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline(min_fraction=0.5)\ndef test_a(roofline):\n"
                        "    roofline.measure(sleep_ms, 1)\n")
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    result.assert_outcomes(errors=1)  # the body passed; profiling it failed in teardown: one test, one error
    out = result.stdout.str()
    assert "ERROR at teardown of test_a" in out
    assert "its test failed under ncu" in out and "test_a.ncu.log" in out and "test_a.child.log" in out
    assert "Traceback" not in out
    (test,) = results(pytester)["tests"]
    assert test["outcome"] == "error" and test["fraction"] is None and test["counter"] == "ncu"
    assert [Path(p).name for p in test["ncu"]["logs"]] == [
        "test_failing_child_is_an_error_with_the_log_paths.py__test_a.ncu.log",
        "test_failing_child_is_an_error_with_the_log_paths.py__test_a.child.log"]
    leftovers = sorted(p.name for p in (pytester.path / ".roofline").rglob("*"))
    assert not [name for name in leftovers if name.endswith(".ncu-rep")]


def test_no_kernel_in_range_is_a_clear_error(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    RecordedNcu(monkeypatch, tmp_path, report=None, log=(FIXTURES / "no_kernels.txt").read_text())
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline(min_fraction=0.5)\ndef test_a(roofline):\n"
                        "    roofline.measure(sleep_ms, 1)\n")
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    # ncu saw no kernel: the analytic counter counts the test (copies are cudaMemcpy), and a host sleep is no work
    result.assert_outcomes(errors=1)  # counted once: as the error of its teardown, not also as a pass
    result.stdout.fnmatch_lines(["*no work counted*",
                                 "*before it, ncu: no kernel ran inside the pytest_roofline NVTX range*"])
    (test,) = results(pytester)["tests"]
    assert test["outcome"] == "error" and test["counter"] == "analytic"
    assert "no kernel ran inside the pytest_roofline NVTX range" in test["ncu"]["error"]
    assert "cudaMemcpy" in test["regions"][0]["notes"][-1]


def test_a_failing_body_is_not_profiled(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    ncu = RecordedNcu(monkeypatch, tmp_path)
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline(min_fraction=0.5)\ndef test_a(roofline):\n"
                        "    roofline.measure(sleep_ms, 1)\n    assert False, 'broken'\n")
    run_roofline(machine_file, "--roofline-counter", "ncu").assert_outcomes(failed=1)
    assert not ncu.profiles
    (test,) = results(pytester)["tests"]
    assert test["outcome"] == "failed" and test["fraction"] is None


def test_declared_regions_keep_their_declaration_under_ncu(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    RecordedNcu(monkeypatch, tmp_path)
    pytester.makepyfile(SLEEPY + """
@pytest.mark.roofline
def test_mixed(roofline):
    roofline.declare(flops={"fp32": 1e9}, name="host").measure(sleep_ms, 2)
    roofline.measure(sleep_ms, 5)
""")
    run_roofline(machine_file, "--roofline-counter", "ncu").assert_outcomes(passed=1)
    (test,) = results(pytester)["tests"]
    assert test["counter"] == "declared+ncu"
    assert [r["counter"] for r in test["regions"]] == ["declared", "ncu"]
    assert test["t_min_s"] == pytest.approx(T_MIN + 1e9 / 0.5e12)


def fake_nvtx() -> types.ModuleType:
    module = types.ModuleType("nvtx")
    events: list[Any] = []

    def start_range(message: str | None = None, color: Any = None, domain: str | None = None,
                    category: Any = None, payload: Any = None) -> int:
        events.append(("start", message, domain))
        return len(events)

    def end_range(handle: int) -> None:
        events.append(("end", handle))

    module.events = events  # type: ignore[attr-defined]
    module.start_range = start_range  # type: ignore[attr-defined]
    module.end_range = end_range  # type: ignore[attr-defined]
    return module


CHILD_TEST = """
import nvtx
import pytest

def work(x):
    nvtx.events.append("call")
    return x + 1

@pytest.mark.roofline(min_fraction=0.99)
def test_child(roofline):
    assert roofline.measure(work, 1) == 2
    assert roofline.measure(work, x=10) == 11
    assert roofline.declare(flops=1e9).measure(work, 100) == 101
"""


def test_child_mode_warms_up_then_profiles_one_call_per_range(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    nvtx = fake_nvtx()
    monkeypatch.setitem(sys.modules, "nvtx", nvtx)
    monkeypatch.setenv(CHILD_ENV, "1")
    pytester.makepyfile(CHILD_TEST)
    result = run_roofline(machine_file)
    result.assert_outcomes(passed=1)
    assert nvtx.events == [  # type: ignore[attr-defined]
        "call", "call", ("start", "region-0", "pytest_roofline"), "call", ("end", 3),
        "call", "call", ("start", "region-1", "pytest_roofline"), "call", ("end", 8),
        "call",  # declared: its work is the declaration, so it runs once, outside any range
    ]
    assert not (pytester.path / ".roofline").exists()  # no results, no charts, no characterization
    assert "= roofline =" not in result.stdout.str()


def test_child_mode_without_nvtx_says_what_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import nvtx raises ImportError
    monkeypatch.setenv(CHILD_ENV, "1")
    pytester.makepyfile("def test_child(roofline):\n    roofline.measure(print, 'x')\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*NvtxMissing*pip install nvtx*"])


FAKE_NVTX_MODULE = """
import os

def _log(line):
    with open(os.environ["CALLS_LOG"], "a") as handle:
        handle.write(line + "\\n")

def start_range(message=None, color=None, domain=None, category=None, payload=None):
    _log(f"start {message} {domain}")
    return 7

def end_range(handle):
    _log(f"end {handle}")
"""

E2E_TEST = """
import os
import time
import pytest

def work(x):
    with open(os.environ["CALLS_LOG"], "a") as handle:
        handle.write("call\\n")
    time.sleep(0.005)
    return x * 2

@pytest.mark.roofline(min_fraction=0.1)
def test_e2e(roofline):
    assert roofline.measure(work, 21) == 42
"""


def test_real_child_process_resolves_the_node_and_marks_the_range(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    fast_args: tuple[str, ...]
) -> None:
    """The child pytest runs for real (only ncu is missing from the command): the argv and working folder the
    plugin gives it find the test, and the child calls ``work`` twice to warm up and once inside the range."""
    fake_dir = tmp_path / "fake_nvtx"
    fake_dir.mkdir()
    (fake_dir / "nvtx.py").write_text(FAKE_NVTX_MODULE)
    parent_log, child_log = tmp_path / "parent.log", tmp_path / "child.log"
    monkeypatch.setenv("CALLS_LOG", str(parent_log))
    ncu = RecordedNcu(monkeypatch, tmp_path)

    def run_child(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        ncu.runs.append((list(argv), kwargs))
        env = {**kwargs["env"], "CALLS_LOG": str(child_log), "PYTHONPATH": str(fake_dir)}
        child = argv[argv.index("--log-file") + 2:]
        done = subprocess.run(child, stdout=kwargs["stdout"], stderr=kwargs["stderr"], env=env,
                              cwd=kwargs["cwd"], timeout=120, check=False)
        here = Path(kwargs["cwd"])  # like ncu, resolve its file arguments from its working folder
        (here / argv[argv.index("--log-file") + 1]).write_text("==PROF== Disconnected\n")
        if done.returncode == 0:
            (here / argv[argv.index("--export") + 1]).write_text(REPORT.read_text())
        return done

    monkeypatch.setattr(ncu, "run", run_child)
    pytester.makepyfile(E2E_TEST)
    pytester.makeini("[pytest]\n")
    # Invoked from a subfolder: the child must still find the node (it runs from the rootdir, with -c).
    (pytester.path / "sub").mkdir()
    monkeypatch.chdir(pytester.path / "sub")
    result = pytester.runpytest("--roofline", "--roofline-machine", str(machine_file), "--roofline-counter", "ncu",
                                *fast_args, str(pytester.path))
    result.assert_outcomes(passed=1)
    (argv, _), = ncu.runs
    xdist = ["-n", "0"] if importlib.util.find_spec("xdist") is not None else []
    assert argv[argv.index("--log-file") + 2:][-5 - len(xdist):] == [
        "--rootdir", str(pytester.path), "-c", str(pytester.path / "tox.ini"), "--runxfail", *xdist]
    assert child_log.read_text().splitlines() == ["call", "call", "start region-0 pytest_roofline", "call",
                                                  "end 7"]
    parent_calls = parent_log.read_text().splitlines()
    assert len(parent_calls) >= 1 + 2 + 5 and set(parent_calls) == {"call"}  # count, warm-up, timed rounds
    doc = json.loads((pytester.path / "sub" / ".roofline" / "results.json").read_text())
    (test,) = doc["tests"]
    assert test["counter"] == "ncu" and test["t_min_s"] == pytest.approx(T_MIN)
    assert Path(test["ncu"]["report"]).parent.parent == pytester.path / "sub" / ".roofline" / "sessions"
    assert "1 passed" in Path(test["ncu"]["logs"][1]).read_text()


def test_counters_restricted_reads_the_driver_setting(tmp_path: Path) -> None:
    params = tmp_path / "params"
    assert not ncu_gate.counters_restricted(params, euid=1000)  # no driver file: unknown, let ncu say
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    assert ncu_gate.counters_restricted(params, euid=1000)
    assert not ncu_gate.counters_restricted(params, euid=0)
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert not ncu_gate.counters_restricted(params, euid=1000)


def test_machine_without_a_ceiling_drops_that_work_with_a_note() -> None:
    from pytest_roofline.model import KernelSample, Machine

    machine = Machine("m", {"fp32": 1e12}, {"HBM": 1e11})
    kernels = [KernelSample("k", {"fp32": 1e9, "fp8_tensor": 5e9, "fp16": 0.0}, {"L1": 1e9, "HBM": 1e8}, 1e-3)]
    kept, notes = ncu_gate.restrict_to_machine(kernels, machine)
    assert kept[0].flops == {"fp32": 1e9, "fp16": 0.0} and kept[0].bytes == {"HBM": 1e8}
    assert kept[0].time_s == 1e-3 and kept[0].name == "k"
    assert notes == [("machine 'm' has no ceiling for compute fp8_tensor, memory L1: that work is left out of the "
                      "lower bound, so the fraction is a lower estimate")]
    assert ncu_gate.restrict_to_machine(kept, machine) == (kept, [])


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="needs ../shared/ncu-samples")
def test_a_real_shared_sample_through_the_plugin(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    """Sample 05 (A100 BERT flash-attention, details page with stdout) as the profiled child's report."""
    sample = next(SAMPLES.glob("05_*.csv"))
    expected = parse_report_text(sample.read_text(), str(sample), cc="8.0", clock_control="none")
    RecordedNcu(monkeypatch, tmp_path, report=sample, cc=(8, 0))
    pytester.makepyfile(SLEEPY + "\n@pytest.mark.roofline\ndef test_a(roofline):\n    roofline.measure(sleep_ms, 5)\n")
    run_roofline(machine_file, "--roofline-counter", "ncu").assert_outcomes(passed=1)
    (test,) = results(pytester)["tests"]
    assert len(test["kernels"]) == len(expected.kernels)
    assert test["ncu"]["launches"] == expected.launch_count
    assert test["definitions"] == expected.definitions
    assert test["fraction"] == pytest.approx(test["t_min_s"] / test["time_s"])
    for level in ("L1", "L2", "HBM"):
        assert test["bytes"][level] == pytest.approx(sum(k.bytes.get(level, 0.0) for k in expected.kernels))
    for precision in ("fp64", "fp32", "fp16"):
        assert test["flops_by_precision"][precision] == pytest.approx(
            sum(k.flops.get(precision, 0.0) for k in expected.kernels))
    assert test["ncu"]["kernel_time_s"] == pytest.approx(expected.total_time_s)


BATCH_TESTS = SLEEPY + """
@pytest.mark.roofline(min_fraction=0.01)
def test_a(roofline):
    roofline.measure(sleep_ms, 12)

@pytest.mark.roofline(min_fraction=0.01)
def test_b(roofline):
    roofline.measure(sleep_ms, 12)

@pytest.mark.roofline(min_fraction=0.01)
def test_c(roofline):
    roofline.measure(sleep_ms, 12)
"""


def test_one_batched_child_whose_crash_in_test_b_names_it_and_falls_back(
    pytester: pytest.Pytester, machine_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    run_roofline: Callable[..., pytest.RunResult]
) -> None:
    """Three tests: one batched ncu run; it dies in test_b (2 of 3) after test_a ended, so test_a takes its
    kernels from the batch and test_b, test_c get a child each (the per-test path, here RecordedNcu)."""
    from pytest_roofline.counters.ncu import batch as batch_module
    from pytest_roofline.counters.ncu.child import PROGRESS_ENV
    from pytest_roofline.counters.ncu.parse import parse_csv_text
    from pytest_roofline.counters.ncu.trim import trimmed_csv

    per_test = RecordedNcu(monkeypatch, tmp_path)
    launches = parse_csv_text(REPORT.read_text()).launches
    for launch in launches:
        launch.ranges = ("t0-region-0",)
    batch_report = trimmed_csv(launches, metric_set((8, 0)).names)
    batch_runs: list[list[str]] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        nodes = argv[argv.index("pytest") + 1:argv.index("-q")]
        batch_runs.append(nodes)
        Path(argv[argv.index("--log-file") + 1]).write_text("==PROF== Connected\n")
        Path(kwargs["env"][PROGRESS_ENV]).write_text(
            f"start\t0\t{nodes[0]}\nend\t0\t{nodes[0]}\tpassed\nstart\t1\t{nodes[1]}\n")
        Path(argv[argv.index("--export") + 1]).write_text(batch_report)
        return subprocess.CompletedProcess(argv, -11)

    real = batch_module.profile_batch
    monkeypatch.setattr(batch_module, "profile_batch", lambda ids, folder, **kw: real(
        ids, folder, runner=run, reader=lambda path, ncu=None: parse_csv_text(Path(path).read_text()),
        lock_dir=tmp_path, **kw))
    monkeypatch.setattr(batch_module, "can_split", lambda ncu: True)
    pytester.makepyfile(test_batch=BATCH_TESTS)
    result = run_roofline(machine_file, "--roofline-counter", "ncu")
    result.assert_outcomes(passed=3)
    nodes = [f"test_batch.py::test_{name}" for name in "abc"]
    assert batch_runs == [nodes]  # one ncu run for the three tests
    assert [nodeid for nodeid, _, _ in per_test.profiles] == nodes[1:]  # the fallback: test_b, test_c
    tests = {t["nodeid"]: t for t in results(pytester)["tests"]}
    first = tests[nodes[0]]["ncu"]
    assert first["batch"] == {"batched": True, "note": None}
    assert Path(first["report"]).name == "test_batch.py__test_a.ncu.csv"
    assert {k["name"].split("(")[0] for k in tests[nodes[0]]["kernels"]} == {"sgemm_128x64_nn", "copy_kernel"}
    for node in nodes[1:]:
        note = tests[node]["ncu"]["batch"]["note"]
        assert f"the batched ncu child died in {nodes[1]} (test 2 of 3)" in note
        assert tests[node]["ncu"]["report"].endswith(".ncu-rep")  # its own child's report
