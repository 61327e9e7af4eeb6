"""``doctor`` against fake ``ncu`` and ``nvidia-smi`` executables on PATH that print the real messages.

The messages are ncu's and nvidia-smi's own words, as users recorded them (public issue threads and notes):
ERR_NVGPUCTRPERM, "Profiling is not supported on device 0. To find out supported GPUs refer --list-chips option.",
"Failed to find metric regex:^...", nvidia-smi's "couldn't communicate with the NVIDIA driver", and the three-line
``ncu --version`` banner.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from pytest_roofline.doctor import gpu as doctor
from pytest_roofline.doctor.gpu import EXIT_FAIL, EXIT_NO_GPU, EXIT_OK, diagnose, parse_ncu_version

H100 = "0, NVIDIA H100 80GB HBM3, 9.0, 570.124.06"
B200 = "0, NVIDIA B200, 10.0, 570.124.06"
B300 = "0, NVIDIA B300 SXM6 AC, 10.3, 580.65.06"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.")
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
PROFILED = f"""==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "roofline_probe" - 0: 0%....50%....100% - 1 pass
probe: roofline_probe ran
==PROF== Disconnected from process 4242
{HEADER}
"0","4242","python3.12","127.0.0.1","roofline_probe","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0",\
"Command line profiler metrics","gpu__time_duration.sum","ns","2336"
"""
NO_PERMISSION = """==PROF== Connected to process 1234 (/usr/bin/python3.12)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on \
the target device 0. For instructions on enabling permissions and to get more information see \
https://developer.nvidia.com/ERR_NVGPUCTRPERM
probe: roofline_probe ran
==PROF== Disconnected from process 1234
==WARNING== No kernels were profiled."""
NOT_SUPPORTED = """==PROF== Connected to process 4613 (/usr/bin/python3.12)
==ERROR== Profiling is not supported on device 0. To find out supported GPUs refer --list-chips option.
probe: roofline_probe ran
==PROF== Disconnected from process 4613
==WARNING== No kernels were profiled."""
UNKNOWN_METRIC = r"""==PROF== Connected to process 5150 (/usr/bin/python3.12)
==ERROR== Failed to find metric regex:^sm__ops_path_tensor_src_fp4_fp6_dst_fp16\.sum\.(sum|min|max|avg)$"""


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fake_ncu(bin_dir: Path, *, version: str = "2025.3.1.0", output: str = PROFILED, status: int = 0,
             metrics_output: str | None = None, metrics_status: int = 1) -> None:
    """An ncu that answers --version with the real banner and any profiling run with ``output``.

    ``metrics_output`` answers the run that asks for the full list (recognised by a Tensor Core name in it).
    """
    full_list = "" if metrics_output is None else (
        f"case \"$*\" in *sm__ops_path_tensor_*) cat <<'EOF'\n{metrics_output}\nEOF\nexit {metrics_status};; esac\n")
    _script(bin_dir / "ncu", (
        'if [ "$1" = "--version" ]; then\n'
        '  echo "NVIDIA (R) Nsight Compute Command Line Profiler"\n'
        '  echo "Copyright (c) 2018-2025 NVIDIA Corporation"\n'
        f'  echo "Version {version} (build 36398880) (public-release)"\n'
        "  exit 0\nfi\n"
        + full_list
        + f"cat <<'EOF'\n{output}\nEOF\nexit {status}\n"
    ))


def fake_smi(bin_dir: Path, lines: str = H100, status: int = 0) -> None:
    _script(bin_dir / "nvidia-smi", f"cat <<'EOF'\n{lines}\nEOF\nexit {status}\n")


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    return folder


@pytest.fixture
def no_system_gpu(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide this machine's own nvidia-smi (in /usr/bin on a GPU host): only a fake one in ``bin_dir`` counts."""
    import shutil

    real_which = shutil.which

    def which(name: str, mode: int = os.F_OK | os.X_OK, path: str | None = None) -> str | None:
        if name == "nvidia-smi":
            return real_which(name, mode, str(bin_dir))
        return real_which(name, mode, path)

    monkeypatch.setattr(shutil, "which", which)


def env_for(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}


def run(bin_dir: Path) -> doctor.Diagnosis:
    return diagnose(env=env_for(bin_dir), python=sys.executable, timeout=30)


def by_name(diagnosis: doctor.Diagnosis) -> dict[str, doctor.Check]:
    return {check.name: check for check in diagnosis.checks}


def test_parse_ncu_version() -> None:
    assert parse_ncu_version("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA "
                             "Corporation\nVersion 2025.3.1.0 (build 36398880) (public-release)\n") == (2025, 3, 1)
    assert parse_ncu_version("Version 2020.1.2 (build 1)") == (2020, 1, 2)
    assert parse_ncu_version("ncu: command not found") is None


def test_everything_works(bin_dir: Path) -> None:
    fake_ncu(bin_dir)
    fake_smi(bin_dir)
    diagnosis = run(bin_dir)
    checks = by_name(diagnosis)
    assert [c.status for c in diagnosis.checks] == ["ok"] * 6
    assert list(checks) == ["ncu", "driver", "gpus", "ncu version", "counters", "metrics CC 9.0"]
    assert checks["ncu"].detail == f"{bin_dir / 'ncu'}, version 2025.3.1"
    assert checks["driver"].detail == "NVIDIA driver 570.124.06"
    assert checks["gpus"].detail == "0: NVIDIA H100 80GB HBM3, CC 9.0"
    assert diagnosis.exit_code == EXIT_OK
    assert diagnosis.verdict() == "verdict: --roofline with the ncu counter will work here"


def test_counter_permission(bin_dir: Path) -> None:
    fake_ncu(bin_dir, output=NO_PERMISSION)
    fake_smi(bin_dir)
    diagnosis = run(bin_dir)
    counters = by_name(diagnosis)["counters"]
    assert counters.status == "FAIL" and "ERR_NVGPUCTRPERM" in counters.detail
    assert counters.fix is not None and "NVreg_RestrictProfilingToAdminUsers=0" in counters.fix
    assert "-- fix: " in counters.line()
    assert by_name(diagnosis)["metrics"].status == "skip"
    assert diagnosis.exit_code == EXIT_FAIL
    assert "will NOT work" in diagnosis.verdict() and "counters" in diagnosis.verdict()


def test_profiling_not_supported(bin_dir: Path) -> None:
    fake_ncu(bin_dir, output=NOT_SUPPORTED)
    fake_smi(bin_dir)
    diagnosis = run(bin_dir)
    counters = by_name(diagnosis)["counters"]
    assert counters.status == "FAIL"
    assert "Profiling is not supported on device 0" in counters.detail
    assert counters.fix is not None and "--list-chips" in counters.fix
    assert diagnosis.exit_code == EXIT_FAIL


def test_missing_ncu(bin_dir: Path) -> None:
    fake_smi(bin_dir)
    diagnosis = run(bin_dir)
    ncu = by_name(diagnosis)["ncu"]
    assert ncu.status == "FAIL" and "'ncu' is not on PATH" in ncu.detail
    assert ncu.fix is not None and "PYTEST_ROOFLINE_NCU" in ncu.fix
    assert by_name(diagnosis)["counters"].status == "skip"
    assert diagnosis.exit_code == EXIT_FAIL


def test_old_ncu_on_blackwell(bin_dir: Path) -> None:
    fake_ncu(bin_dir, version="2024.3.2.0", output=NOT_SUPPORTED)
    fake_smi(bin_dir, B200)
    diagnosis = run(bin_dir)
    version = by_name(diagnosis)["ncu version"]
    assert version.status == "FAIL" and version.detail == "ncu 2024.3.2 is too old for CC 10.0 (Blackwell)"
    assert version.fix is not None and "2025.1 or newer" in version.fix
    assert diagnosis.exit_code == EXIT_FAIL


def test_new_ncu_on_volta(bin_dir: Path) -> None:
    fake_ncu(bin_dir, version="2025.3.1.0")
    fake_smi(bin_dir, "0, Tesla V100-SXM2-16GB, 7.0, 535.104.05")
    assert by_name(run(bin_dir))["ncu version"].status == "FAIL"


def test_metric_the_chip_does_not_have(bin_dir: Path) -> None:
    fake_ncu(bin_dir, metrics_output=UNKNOWN_METRIC)
    fake_smi(bin_dir, B300)
    diagnosis = run(bin_dir)
    metrics = by_name(diagnosis)["metrics CC 10.3"]
    assert metrics.status == "FAIL"
    assert metrics.detail.startswith("ncu does not know sm__ops_path_tensor_src_fp4_fp6_dst_fp16.sum on this GPU")
    assert diagnosis.exit_code == EXIT_FAIL


def test_one_metric_run_per_distinct_cc(bin_dir: Path) -> None:
    fake_ncu(bin_dir)
    fake_smi(bin_dir, f"{H100}\n1, NVIDIA H100 80GB HBM3, 9.0, 570.124.06\n2, NVIDIA L40S, 8.9, 570.124.06")
    names = [c.name for c in run(bin_dir).checks]
    assert names.count("metrics CC 9.0") == 1 and names.count("metrics CC 8.9") == 1


@pytest.mark.usefixtures("no_system_gpu")
@pytest.mark.parametrize("smi", ["missing", "no driver"])
def test_no_gpu_has_its_own_exit_code(bin_dir: Path, smi: str) -> None:
    fake_ncu(bin_dir)
    if smi == "no driver":
        fake_smi(bin_dir, NO_DRIVER, status=9)
    diagnosis = run(bin_dir)
    assert diagnosis.no_gpu and diagnosis.exit_code == EXIT_NO_GPU
    assert by_name(diagnosis)["driver"].status == "skip"
    assert "no NVIDIA GPU" in diagnosis.verdict()


def test_command_line_prints_one_line_per_check(bin_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.commands import main

    fake_ncu(bin_dir, output=NO_PERMISSION)
    fake_smi(bin_dir)
    monkeypatch.setenv("PATH", env_for(bin_dir)["PATH"])
    monkeypatch.delenv("PYTEST_ROOFLINE_NCU", raising=False)
    assert main(["doctor", "--timeout", "30"]) == EXIT_FAIL
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "CPU path (any machine):"
    assert [line.split(":")[0] for line in lines[1:6]] == ["[ok  ] compiler", "[ok  ] cache dir",
                                                          "[ok  ] characterization", "[ok  ] allocator",
                                                          lines[5].split(":")[0]]  # THP: this host's mode
    gpu = lines[lines.index("GPU path (the ncu counter):") + 1:]
    assert [line.split("]")[0] for line in gpu[:-1]] == ["[ok  ", "[ok  ", "[ok  ", "[ok  ", "[FAIL", "[skip"]
    assert gpu[-1].startswith("verdict: --roofline with the ncu counter will NOT work here")


@pytest.mark.usefixtures("no_system_gpu")
def test_without_a_gpu_the_cpu_path_is_checked_and_ncu_is_not_a_failure(
        bin_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.commands import main

    monkeypatch.setenv("PATH", env_for(bin_dir)["PATH"])  # neither ncu nor nvidia-smi there
    monkeypatch.delenv("PYTEST_ROOFLINE_NCU", raising=False)
    assert main(["doctor", "--timeout", "30"]) == EXIT_OK  # the CPU path is ready: nothing failed
    out = capsys.readouterr().out
    assert "[FAIL]" not in out and "[skip] ncu: Nsight Compute CLI not found" in out
    assert "[ok  ] compiler: " in out and "[ok  ] cache dir: " in out
    assert out.splitlines()[-1].startswith("verdict: the CPU path is ready; no NVIDIA GPU here")


def test_cpu_checks_name_what_is_missing_and_the_fix(tmp_path: Path) -> None:
    import datetime as dt
    import os

    from pytest_roofline.doctor import cpu_checks as cpu_doctor

    missing = cpu_doctor.check_compiler(find=lambda: None)
    assert missing.status == "FAIL" and missing.fix is not None and "$CC" in missing.fix
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert cpu_doctor.check_cache_dir(blocked / "cache").status == "FAIL"  # under a file: not creatable
    assert cpu_doctor.check_cache_dir(tmp_path / "cache").status == "ok"
    cached = tmp_path / "machine-cpu.json"
    assert cpu_doctor.check_characterization(cached).detail.startswith("none cached for this machine yet")
    cached.write_text("{}")
    old = dt.datetime.now(dt.timezone.utc).timestamp() - 200 * 86400
    os.utime(cached, (old, old))
    aged = cpu_doctor.check_characterization(cached)
    assert aged.status == "warn" and "measured 200 day(s) ago" in aged.detail and "--recharacterize" in aged.fix
    assert cpu_doctor.check_allocator(lambda: None).status == "warn"
    assert cpu_doctor.check_thp("never").status == "warn" and cpu_doctor.check_thp("madvise").status == "ok"


def test_probe_without_a_driver_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.counters.ncu import probe

    monkeypatch.setattr(probe, "_load_driver", lambda: None)
    assert probe.main() == probe.EXIT_NO_DRIVER
    assert "no CUDA driver" in capsys.readouterr().err


def test_unexplained_failure_gives_the_command_to_rerun(bin_dir: Path) -> None:
    fake_ncu(bin_dir, output="==ERROR== The application returned an error code (4).", status=1)
    fake_smi(bin_dir)
    counters = by_name(run(bin_dir))["counters"]
    assert counters.status == "FAIL" and "The application returned an error code (4)" in counters.detail
    assert counters.fix is not None
    assert f"CUDA_VISIBLE_DEVICES=0 {bin_dir / 'ncu'} --target-processes all" in counters.fix
    assert "--metrics gpu__time_duration.sum" in counters.fix and "probe.py" in counters.fix


def test_names_printed_na_are_a_warning(bin_dir: Path) -> None:
    na_row = ('"0","4242","python3.12","127.0.0.1","roofline_probe","1","7","(32, 1, 1)","(1, 1, 1)","0","10.0",'
              '"Command line profiler metrics","sm__sass_thread_inst_executed_op_ffma2_pred_on.sum","","n/a"')
    fake_ncu(bin_dir, metrics_output=f"{PROFILED}{na_row}", metrics_status=0)
    fake_smi(bin_dir, B200)
    diagnosis = run(bin_dir)
    metrics = by_name(diagnosis)["metrics CC 10.0"]
    assert metrics.status == "warn"
    assert metrics.detail == ("ncu accepted all 28 names but printed n/a for: "
                              "sm__sass_thread_inst_executed_op_ffma2_pred_on.sum")
    assert diagnosis.exit_code == EXIT_OK


def test_driver_too_old_to_report_compute_capability(bin_dir: Path) -> None:
    fake_ncu(bin_dir)
    fake_smi(bin_dir, 'Field "compute_cap" is not a valid field to query.', status=2)
    diagnosis = run(bin_dir)
    driver = by_name(diagnosis)["driver"]
    assert driver.status == "FAIL" and 'Field "compute_cap" is not a valid field to query.' in driver.detail
    assert driver.fix is not None and "update the NVIDIA driver" in driver.fix
    assert not diagnosis.no_gpu and diagnosis.exit_code == EXIT_FAIL
