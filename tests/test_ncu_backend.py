"""The ncu child-process orchestration, with a recorded report standing in for the ncu run."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.counters.ncu import backend, metric_set
from pytest_roofline.counters.ncu.backend import (
    CHILD_ENV,
    CountersNotPermitted,
    NcuNotFound,
    NoGpu,
    NoKernelsInRange,
    ProfiledChildFailed,
    ProfilingNotSupported,
    artifact_stem,
    find_ncu,
    profile_node,
)
from pytest_roofline.counters.ncu.kernel_report import parse_report_text

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "ncu-samples"
NODE = "tests/test_gemm.py::test_gemm[fp16-1024]"


def read_csv_report(path: Path, **options: Any):
    """The recorded reports here are CSV text saved under the .ncu-rep name ncu would write."""
    return parse_report_text(Path(path).read_text(), str(path), **options)


class FakeNcu:
    """Stands in for subprocess.run: writes a recorded report where ncu would export, and a log."""

    def __init__(self, report_text: str | None = None, log: str = "==PROF== Disconnected\n", returncode: int = 0,
                 report_file: Path | None = None, raise_timeout: bool = False) -> None:
        self.report_text, self.log, self.returncode = report_text, log, returncode
        self.report_file, self.raise_timeout = report_file, raise_timeout
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        self.calls.append((list(argv), kwargs))
        export = Path(argv[argv.index("--export") + 1])
        Path(argv[argv.index("--log-file") + 1]).write_text(self.log)
        kwargs["stdout"].write(b"child pytest output\n")
        if self.report_text is not None:
            export.write_text(self.report_text)
        if self.report_file is not None:
            shutil.copyfile(self.report_file, export)
        if self.raise_timeout:
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        return subprocess.CompletedProcess(argv, self.returncode)


def profile(tmp_path: Path, fake: FakeNcu, **options: Any):
    defaults: dict[str, Any] = {"cc": "8.0", "ncu": "/opt/ncu/ncu", "python": "/venv/bin/python",
                                "runner": fake, "read_report": read_csv_report, "lock_dir": tmp_path / "lock",
                                "env": {"PATH": "/usr/bin"}}
    defaults.update(options)
    return profile_node(NODE, tmp_path / "artifacts", **defaults)


def leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "artifacts").iterdir() if "partial" in p.name)


def test_success_reads_the_report_and_keeps_it(tmp_path: Path) -> None:
    fake = FakeNcu((FIXTURES / "raw_page.csv").read_text())
    result = profile(tmp_path, fake, timeout_s=60)
    (argv, kwargs), = fake.calls
    stem = "test_gemm.py__test_gemm_fp16-1024_"
    partial = argv[argv.index("--export") + 1]
    assert Path(partial).name.startswith(f".{stem}.") and partial.endswith(".partial.ncu-rep")
    assert argv == [
        "/opt/ncu/ncu", "--target-processes", "all", "--nvtx", "--nvtx-include", "regex:pytest_roofline@.+",
        "--metrics", ",".join(metric_set("8.0").names),  # exact per-CC lists: test_ncu_command.py
        "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
        "--export", partial, "--force-overwrite", "--log-file", str(tmp_path / "artifacts" / f"{stem}.ncu.log"),
        "/venv/bin/python", "-m", "pytest", NODE, "-q", "-p", "no:cacheprovider",
    ]
    assert "shell" not in kwargs and kwargs["timeout"] == 60 and kwargs["check"] is False
    assert kwargs["env"] == {"PATH": "/usr/bin", CHILD_ENV: "1"}
    assert result.report_path == tmp_path / "artifacts" / f"{stem}.ncu-rep" and result.report_path.is_file()
    assert leftovers(tmp_path) == []
    assert result.report.clock_control == "none"
    assert [(s.name, s.launches) for s in result.samples] == [
        ("void attn_fwd<cutlass::bfloat16_t, 64>(Params const&, int)", 2),
        ("elementwise_add(float*, float const*, int)", 1),
    ]
    assert result.child_log.read_bytes() == b"child pytest output\n"


def test_missing_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend.shutil, "which", lambda name, path=None: None)
    assert find_ncu({}) is None
    with pytest.raises(NcuNotFound, match="PYTEST_ROOFLINE_NCU"):
        profile(tmp_path, FakeNcu(), ncu=None)


def test_find_ncu_honours_the_environment(tmp_path: Path) -> None:
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    assert find_ncu({"PYTEST_ROOFLINE_NCU": str(fake)}) == str(fake)
    assert find_ncu({"PYTEST_ROOFLINE_NCU": str(tmp_path / "nope")}) is None


def test_no_gpu(tmp_path: Path) -> None:
    with pytest.raises(NoGpu):
        profile(tmp_path, FakeNcu(), cc=None)
    fake = FakeNcu(log="==ERROR== cudaErrorNoDevice: no CUDA-capable device is detected\n", returncode=1)
    with pytest.raises(NoGpu):
        profile(tmp_path, fake)


def test_counter_permission_is_a_skip_with_the_fix(tmp_path: Path) -> None:
    fake = FakeNcu(log="==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                       "Performance Counters on the target device 0.\n", returncode=1)
    with pytest.raises(CountersNotPermitted, match="NVreg_RestrictProfilingToAdminUsers=0") as caught:
        profile(tmp_path, fake)
    assert "sudo" in str(caught.value)
    assert leftovers(tmp_path) == []


def test_profiling_not_supported_is_not_an_empty_range(tmp_path: Path) -> None:
    # ncu's words on a chip it does not support (or WSL2 / a virtual GPU); the child itself exits cleanly and ncu
    # adds "No kernels were profiled", which used to end as "no kernel ran inside the NVTX range"
    log = ("==PROF== Connected to process 4613 (/usr/bin/python3.12)\n"
           "==ERROR== Profiling is not supported on device 0. To find out supported GPUs refer --list-chips option.\n"
           "==PROF== Disconnected from process 4613\n"
           "==WARNING== No kernels were profiled.\n")
    with pytest.raises(ProfilingNotSupported, match="--list-chips") as caught:
        profile(tmp_path, FakeNcu(log=log))
    assert "Profiling is not supported on device 0" in str(caught.value)
    assert isinstance(caught.value, NoGpu)  # the plugin maps it as a missing GPU (auto: analytic counter)
    assert leftovers(tmp_path) == []


def test_crash_leaves_no_half_written_report(tmp_path: Path) -> None:
    fake = FakeNcu("half a report", returncode=-11)
    with pytest.raises(ProfiledChildFailed, match="killed by signal 11") as caught:
        profile(tmp_path, fake)
    assert caught.value.returncode == -11 and not caught.value.timed_out
    assert any(str(p).endswith(".child.log") for p in caught.value.log_paths)
    assert leftovers(tmp_path) == [] and not list((tmp_path / "artifacts").glob("*.ncu-rep"))


def test_failing_test_in_the_child(tmp_path: Path) -> None:
    with pytest.raises(ProfiledChildFailed, match="its test failed under ncu"):
        profile(tmp_path, FakeNcu((FIXTURES / "raw_page.csv").read_text(), returncode=1))
    assert leftovers(tmp_path) == []


def test_timeout_names_the_logs(tmp_path: Path) -> None:
    with pytest.raises(ProfiledChildFailed, match=r"did not finish in 5 s; logs: .*\.ncu\.log") as caught:
        profile(tmp_path, FakeNcu("partial", raise_timeout=True), timeout_s=5)
    assert caught.value.timed_out and leftovers(tmp_path) == []


def test_no_kernel_in_range(tmp_path: Path) -> None:
    with pytest.raises(NoKernelsInRange, match="inside roofline.measure"):
        profile(tmp_path, FakeNcu(log="==WARNING== No kernels were profiled.\n"))
    header = next(line for line in (FIXTURES / "raw_page.csv").read_text().splitlines() if line.startswith('"ID"'))
    with pytest.raises(NoKernelsInRange):
        profile(tmp_path, FakeNcu(header + "\n"))


def test_clean_exit_without_report(tmp_path: Path) -> None:
    with pytest.raises(ProfiledChildFailed, match="wrote no report"):
        profile(tmp_path, FakeNcu(log="==PROF== Disconnected\n"))


def test_artifact_stem() -> None:
    assert artifact_stem("tests/a/test_x.py::TestK::test_y[a/b c]") == "test_x.py__TestK__test_y_a_b_c_"


@pytest.mark.skipif(importlib.util.find_spec("ncu_report") is None or not SAMPLES.is_dir(),
                    reason="needs the ncu_report module (pip install ncu-report) and ../shared/ncu-samples")
def test_recorded_binary_report_through_the_default_reader(tmp_path: Path) -> None:
    recorded = next(SAMPLES.rglob("09_*.ncu-rep"))
    result = profile(tmp_path, FakeNcu(report_file=recorded), read_report=backend.load_report, cc="7.0")
    assert result.report.devices == ["Tesla V100-SXM2-16GB"]
    assert sorted(k.launches for k in result.report.kernels) == [4, 4]
    assert sum(k.bytes["HBM"] for k in result.report.kernels) == 2_763_836_448 + 3_567_507_840


def test_live_run_falls_back_to_dram_read_plus_write(tmp_path: Path) -> None:
    # The live list now asks for dram__bytes_read/write too; where dram__bytes.sum prints n/a, HBM = read + write.
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum"} <= set(metric_set("9.0").names)
    report = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","CC",'
        '"dram__bytes.sum","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"\n'
        '"","","","","","","","","byte","Mbyte","Mbyte","usecond"\n'
        '"0","77","python3.12","runner","copy_kernel","1","7","9.0","n/a","3","1","10"\n'
    )
    result = profile(tmp_path, FakeNcu(report), cc="9.0")
    (kernel,) = result.report.kernels
    assert kernel.bytes == {"HBM": 3e6 + 1e6}
    assert kernel.definitions["HBM"] == "dram__bytes_read.sum + dram__bytes_write.sum"
