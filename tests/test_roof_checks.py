"""Roofs checked before they are cached or used (issue 16 items 1-3, 6) and reduced-precision roofs (issue 7)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.characterize import build, precision, validate
from pytest_roofline.characterize import ceiling_cache as cache
from pytest_roofline.characterize import machine as machine_api
from pytest_roofline.model import KernelSample, Machine, evaluate
from pytest_roofline.output.session_output import impossible_fraction_message, machine_line, roof_notes

# A 2-core AVX-512 CPU at 2.3 GHz: fp64 bound 2 x 4.6e9 x 8 lanes x 4 = 294 GFLOP/s, bandwidth 2 x 4.6e9 x 256 B.
FIELDS: dict[str, Any] = {"device": "cpu", "cpu_model": "Test CPU", "machine": "x86_64", "cores": [0, 1],
                          "core_count": 2, "isa": ["avx", "avx2", "avx512f"], "threads": 2}
CLOCK = (4.6e9, "test clock")
BOUNDS = validate.physical_bounds(FIELDS, CLOCK)


def _good(**info: Any) -> Machine:
    return Machine("box", {"fp64": 100e9, "fp32": 200e9}, {"L1": 400e9, "L2": 200e9, "L3": 100e9, "DRAM": 20e9},
                   {"method": "ert", "gemm_flops": {"fp64": 90e9, "fp32": 180e9}, **info})


# --- the checks, one roof at a time --------------------------------------------------------------------------

def test_a_consistent_record_passes() -> None:
    assert validate.check_machine(_good(), BOUNDS) == []


def test_peak_far_below_its_own_gemm_is_named() -> None:
    # The disturbed record: fp32 peak 9.5 GFLOP/s while the same run's fp32 GEMM did 94.9.
    record = Machine("box", {"fp32": 9.5e9}, {"DRAM": 20e9}, {"gemm_flops": {"fp32": 94.9e9}})
    problems = validate.check_machine(record, BOUNDS)
    assert [p.key for p in problems] == ["peak_flops.fp32"]
    assert "94.9 GFLOP/s" in problems[0].message


def test_bandwidth_rising_from_a_cache_level_to_a_farther_one_is_named() -> None:
    record = Machine("box", {"fp64": 100e9}, {"L1": 467e9, "L2": 0.37e9, "L3": 360e9, "DRAM": 20e9})
    assert [p.key for p in validate.check_order(record)] == ["bandwidth.L2"]
    # Within noise (L3 25 % above L2 at most) is accepted.
    assert validate.check_order(Machine("b", {}, {"L2": 100e9, "L3": 124e9})) == []


@pytest.mark.parametrize(("table", "key", "value"), [
    ("peak_flops", "fp32", 1e-3), ("bandwidth", "DRAM", 1.0), ("peak_flops", "fp64", 1e300),
    ("bandwidth", "L1", 1e300)])
def test_absurd_values_are_outside_the_plausible_range(table: str, key: str, value: float) -> None:
    data = _good().to_dict()
    data[table][key] = value
    assert f"{table}.{key}" in [p.key for p in validate.check_machine(Machine.from_dict(data))]


def test_physical_bounds_from_cores_clock_and_vector_width() -> None:
    assert BOUNDS is not None
    assert BOUNDS.fp64 == pytest.approx(2 * 4.6e9 * 8 * 4)  # 294.4 GFLOP/s
    assert BOUNDS.flops("fp32") == pytest.approx(2 * BOUNDS.fp64)
    assert BOUNDS.bandwidth == pytest.approx(2 * 4.6e9 * 4 * 64)
    too_fast = Machine("box", {"fp64": 400e9}, {"L1": 3e12})
    assert {p.key for p in validate.check_physical(too_fast, BOUNDS)} == {"peak_flops.fp64", "bandwidth.L1"}
    zen3 = validate.physical_bounds({**FIELDS, "isa": ["avx", "avx2", "fma"]}, CLOCK)
    assert zen3 is not None and zen3.vector_bits == 256 and not zen3.matrix_units
    assert validate.physical_bounds({"device": "cuda:0"}) is None


def test_clock_from_cpuinfo_or_cpufreq() -> None:
    assert validate.cpu_clock_hz("cpu MHz\t\t: 2300.000\n", "")[0] == pytest.approx(4.6e9)
    assert validate.cpu_clock_hz("model name : X @ 3.50GHz\ncpu MHz : 1200.0\n", "")[0] == pytest.approx(7e9)
    assert validate.cpu_clock_hz("", "3900000\n")[0] == pytest.approx(7.8e9)
    assert validate.cpu_clock_hz("", "")[0] == validate.UNKNOWN_CLOCK_HZ


@pytest.mark.parametrize(("raw", "expected"), [({"L2": 4194304}, {"L2": 4194304.0}),
                                               ({"L1": "48 KiB", "L3": "105M"}, {"L1": 49152.0, "L3": 105e6})])
def test_capacities_accept_numbers_and_unit_strings(raw: dict[str, Any], expected: dict[str, float]) -> None:
    assert validate.parse_capacities(raw) == (expected, [])


@pytest.mark.parametrize(("raw", "key"), [({"L2": "big"}, "info.capacities.L2"), ({"L2": -1}, "info.capacities.L2"),
                                          ({"L9": 1 << 20}, "info.capacities.L9"), ("4 MiB", "info.capacities")])
def test_bad_capacities_name_the_key(raw: Any, key: str) -> None:
    assert [p.key for p in validate.parse_capacities(raw)[1]] == [key]


# --- reduced precisions: never below the units that compute them exactly -----------------------------------

ZEN3 = Machine("zen3", {"fp64": 101e9, "fp32": 203e9, "bf16": 1.0e9, "fp16": 1.3e9}, {"DRAM": 20e9},
               {"sources": {"peak_flops.fp32": "ert-fma-256bit", "peak_flops.bf16": "torch-gemm",
                            "peak_flops.fp16": "torch-gemm"},
                "gemm_flops": {"bf16": 1.0e9, "fp16": 1.3e9}, "method": "ert"})


def test_emulated_precision_gets_the_fp32_roof_and_is_recorded() -> None:
    fixed = validate.reconcile(ZEN3, native=set())
    assert fixed.peak_flops["bf16"] == fixed.peak_flops["fp16"] == 203e9
    assert fixed.info["emulated"]["bf16"] == {"measured_flops": 1.0e9, "roof_from": "fp32",
                                              "measured_source": "torch-gemm"}
    assert "emulated" in fixed.info["sources"]["peak_flops.bf16"]
    line = machine_line(fixed)
    assert "bf16 203 GFLOP/s [emulated: measured 1 , judged on the fp32 roof]".replace(" ,", ",") in line
    assert "fp32 203 GFLOP/s [ert-fma-256bit]" in line


def test_a_bf16_gemm_on_an_emulating_cpu_reads_a_tiny_fraction_with_a_note() -> None:
    fixed = validate.reconcile(ZEN3, native=set())
    n = 1024
    gemm = KernelSample("mm", {"bf16": 2.0 * n**3}, {"DRAM": 3 * 2 * n * n})
    seconds = 2.0 * n**3 / 1.0e9  # what the emulated GEMM takes at 1 GFLOP/s
    verdict = evaluate(gemm, fixed, seconds)
    assert verdict.fraction == pytest.approx(1.0 / 203)  # against the old 1 GFLOP/s roof it read 1.0
    assert evaluate(gemm, ZEN3, seconds).fraction == pytest.approx(1.0)
    assert ["bf16 is emulated" in note for note in roof_notes(fixed, verdict.flops)] == [True]


def test_a_native_but_slower_precision_is_raised_not_called_emulated() -> None:
    # avx512_bf16 without AMX: torch's bf16 GEMM ran at 79 GFLOP/s below the 233 GFLOP/s fp32 FMA roof.
    slow = Machine("spr", {"fp32": 233e9, "bf16": 79e9}, {"DRAM": 20e9})
    fixed = validate.reconcile(slow, native={"bf16"})
    assert fixed.peak_flops["bf16"] == 233e9 and "emulated" not in fixed.info


def test_peak_taken_from_a_faster_gemm_with_its_source() -> None:
    record = Machine("b", {"fp32": 150e9}, {"DRAM": 20e9},
                     {"gemm_flops": {"fp32": 160e9}, "gemm": {"fp32": {"source": "torch-gemm"}},
                      "sources": {"peak_flops.fp32": "ert-fma-512bit"}})
    fixed = validate.reconcile(record)
    assert fixed.peak_flops["fp32"] == 160e9
    assert fixed.info["sources"]["peak_flops.fp32"] == "torch-gemm (above ert-fma-512bit 150 GFLOP/s)"


@pytest.mark.parametrize(("flags", "native"), [
    ("fpu avx avx2 fma", set()),                                   # AMD Zen 3
    ("avx512f avx512_bf16 avx512_fp16", {"bf16", "fp16"}),         # this VM (Sapphire Rapids, AMX hidden)
    ("avx512f amx_bf16 amx_tile", {"bf16"}),
    ("avx512f avx512_bf16", {"bf16"}),                             # AMD Zen 4
])
def test_native_precisions_from_x86_flags(flags: str, native: set[str]) -> None:
    text = f"processor : 0\nflags\t\t: {flags}\n\nprocessor : 1\nflags : other\n"
    assert precision.native_precisions(precision.cpuinfo_flags(text)) == native


def test_native_precisions_from_arm_features() -> None:
    neoverse_v1 = "processor : 0\nFeatures\t: fp asimd fphp asimdhp sve bf16 i8mm\n"
    assert precision.native_precisions(precision.cpuinfo_flags(neoverse_v1)) == {"bf16", "fp16"}
    cortex_a72 = "processor : 0\nFeatures\t: fp asimd evtstrm crc32\n"
    assert precision.native_precisions(precision.cpuinfo_flags(cortex_a72)) == set()


def test_skip_reason_names_what_the_cpu_lacks() -> None:
    reason = precision.missing_path_reason("bf16", ["avx", "avx2", "fma"])
    assert reason == ("this CPU has no native bf16 path (none of amx_bf16, avx512_bf16, bf16, sme, sve_bf16 in "
                      "/proc/cpuinfo), so PyTorch emulates bf16 in software")
    assert precision.missing_path_reason("bf16", ["avx512_bf16"]) is None


# --- characterize(): retries, flagged records, cache checks ------------------------------------------------

@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[Machine]:
    """characterize() with a fake fingerprint and a queue of measurement results (the last one repeats)."""
    queue: list[Machine] = []
    calls: list[int] = []

    def measure(kind: str, index: int, fields: dict[str, Any], digest: str, report: Any, cache_dir: Path) -> Machine:
        calls.append(1)
        return queue[min(len(calls), len(queue)) - 1]

    monkeypatch.setattr(machine_api, "fingerprint", lambda device="cpu": dict(FIELDS))
    monkeypatch.setattr(machine_api, "_measure", measure)
    monkeypatch.setattr(validate, "cpu_clock_hz", lambda *a: CLOCK)
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    queue.append(_good())
    fake_calls.clear()
    fake_calls.append(calls)
    return queue


fake_calls: list[list[int]] = []


def test_an_inconsistent_measurement_is_retried_merged_and_not_reused(tmp_path: Path, fake: list[Machine]) -> None:
    low_l2 = _good().to_dict()
    low_l2["bandwidth"]["L2"] = 0.37e9
    low_fp32 = _good().to_dict()
    low_fp32["peak_flops"]["fp32"] = 9.5e9
    fake[:] = [Machine.from_dict(low_l2), Machine.from_dict(low_fp32)]
    messages: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the merge is clean: no warning
        result = machine_api.characterize(cache_dir=tmp_path, progress=messages.append)
    assert len(fake_calls[0]) == machine_api.MAX_ATTEMPTS
    assert any("attempt 1 of 2 is not clean: bandwidth.L2" in m for m in messages)
    # Merged roof by roof: L2 from the second attempt, fp32 from the first; both attempts are recorded.
    assert result.bandwidth["L2"] == 200e9 and result.peak_flops["fp32"] == 200e9
    assert [a["problems"][0].split(":")[0] for a in result.info["attempts"]] == ["bandwidth.L2", "peak_flops.fp32"]
    assert "inconsistent" not in result.info  # the merge is consistent ...
    fake[:] = [_good()]
    machine_api.characterize(cache_dir=tmp_path)  # ... and clean: cached and reused
    assert len(fake_calls[0]) == machine_api.MAX_ATTEMPTS


def test_a_record_that_stays_inconsistent_is_not_reused_by_the_next_session(tmp_path: Path,
                                                                              fake: list[Machine]) -> None:
    bad = _good().to_dict()
    bad["bandwidth"]["L2"] = 0.37e9
    fake[:] = [Machine.from_dict(bad)]
    with pytest.warns(machine_api.DisturbedCharacterizationWarning):
        first = machine_api.characterize(cache_dir=tmp_path)
    assert first.info["inconsistent"].startswith("bandwidth.L2")
    fake[:] = [_good()]
    second = machine_api.characterize(cache_dir=tmp_path)
    assert len(fake_calls[0]) == machine_api.MAX_ATTEMPTS + 1 and "inconsistent" not in second.info


def _write_cache(tmp_path: Path, machine: Machine) -> Path:
    path = machine_api.cache_file_for("cpu", tmp_path)
    cache.write_cached(path, dict(FIELDS), machine)
    return path


@pytest.mark.parametrize(("change", "key"), [
    (lambda d: d["peak_flops"].update(fp32=9.5e9), "peak_flops.fp32"),        # below its own GEMM
    (lambda d: d["peak_flops"].update(fp64=1e-3), "peak_flops.fp64"),         # absurd
    (lambda d: d["bandwidth"].update(L1=1e13), "bandwidth.L1"),               # above the physical bound
    (lambda d: d["info"].update(capacities={"L2": "big"}), "info.capacities.L2"),
])
def test_a_bad_cached_record_is_replaced_naming_file_and_key(tmp_path: Path, fake: list[Machine], change: Any,
                                                             key: str) -> None:
    data = _good().to_dict()
    change(data)
    path = _write_cache(tmp_path, Machine.from_dict(data))
    with pytest.warns(cache.CacheWarning) as caught:
        result = machine_api.characterize(cache_dir=tmp_path)
    text = str(caught[0].message)
    assert str(path) in text and key in text
    assert len(fake_calls[0]) == 1 and result.to_dict()["bandwidth"] == _good().to_dict()["bandwidth"]


def test_a_degraded_characterization_is_tried_again_next_session(tmp_path: Path, fake: list[Machine]) -> None:
    fallback = Machine("box", {"fp64": 90e9}, {"DRAM": 20e9},
                       {"method": "blas-fallback", "fallback_reason": "kernel build failed: No space left on device"})
    fake[:] = [fallback]
    with pytest.warns(machine_api.DisturbedCharacterizationWarning, match="degraded"):
        first = machine_api.characterize(cache_dir=tmp_path)
    assert len(fake_calls[0]) == 1  # a failed build is not retried within the session
    assert "No space left" in first.info["degraded"]
    missing_l2 = Machine("box", {"fp64": 90e9}, {"L1": 400e9, "DRAM": 20e9},
                         {"method": "ert", "capacities": {"L1": 98304, "L2": 4 << 20}})
    fake[:] = [missing_l2]
    with pytest.warns(machine_api.DisturbedCharacterizationWarning, match="no bandwidth roof for L2"):
        machine_api.characterize(cache_dir=tmp_path)
    assert len(fake_calls[0]) == 2
    fake[:] = [_good()]
    assert "degraded" not in machine_api.characterize(cache_dir=tmp_path).info
    assert len(fake_calls[0]) == 3


def test_the_failure_message_names_the_roof_that_must_be_wrong() -> None:
    low = Machine("box", {"fp32": 9.5e9}, {"DRAM": 20e9}, {"sources": {"peak_flops.fp32": "ert-fma-512bit"}})
    verdict = evaluate(KernelSample("mm", {"fp32": 2e9}, {"DRAM": 1e6}), low, 2e9 / 140e9)  # ran at 140 GFLOP/s
    message = impossible_fraction_message(verdict, low, "pinned file box.toml")
    assert message is not None and "14.7" in message
    assert "peak_flops.fp32 = 9.5 GFLOP/s (ert-fma-512bit) from pinned file box.toml" in message
    assert impossible_fraction_message(evaluate(KernelSample("k", {"fp32": 1e9}, {}), low, 1e9 / 11e9), low, "x") \
        is None  # 1.16: timing noise, not a wrong roof


# --- the cache directory ----------------------------------------------------------------------------------------

def test_xdg_cache_home_is_honored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PYTEST_ROOFLINE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.default_cache_dir() == tmp_path / "pytest-roofline"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored, as the spec says
    assert cache.default_cache_dir() == Path.home() / ".cache" / "pytest-roofline"


def test_stale_temp_files_are_removed(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    old_record = tmp_path / ".machine-cpu-abc.json.k2j4x9q1.tmp"
    fresh_record = tmp_path / ".machine-cpu-abc.json.a8d7f6e5.tmp"
    dead_build = tmp_path / "build" / f".ert_kernel-0123.so.{dead}.tmp"
    live_build = tmp_path / "build" / f".ert_kernel-0123.so.{os.getpid()}.tmp"
    for path in (old_record, fresh_record, dead_build, live_build):
        path.write_text("x")
    os.utime(old_record, (time.time() - 3600, time.time() - 3600))
    removed = cache.remove_stale_temp_files(tmp_path)
    assert sorted(removed) == sorted([old_record, dead_build])
    assert fresh_record.exists() and live_build.exists()


def test_an_interrupted_build_leaves_no_compiler_running(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    compiler = tmp_path / "fakecc"
    # A compiler driver that starts a child (like cc1) and waits for it.
    compiler.write_text(f"#!/bin/sh\nsleep 60 &\necho $! >> {pids}\nwait\n")
    compiler.chmod(0o755)
    monkeypatch.setattr(build, "find_compiler", lambda: str(compiler))
    monkeypatch.setattr(build, "compiler_identity", lambda: "fakecc 1")
    monkeypatch.setattr(build, "_accepts_flag", lambda c, f: True)
    started = build._start_in_own_group

    def start(command: list[str]) -> subprocess.Popen[str]:
        process = started(command)

        def interrupted(timeout: float | None = None) -> tuple[str, str]:
            while not pids.exists():
                time.sleep(0.01)
            raise KeyboardInterrupt
        process.communicate = interrupted  # type: ignore[method-assign]
        return process

    monkeypatch.setattr(build, "_start_in_own_group", start)
    source = tmp_path / "k.c"
    source.write_text("int x;\n")
    with pytest.raises(KeyboardInterrupt):
        build.build_shared_libraries(source, [{"A": 1}], (), tmp_path / "out")
    child = int(pids.read_text().split()[0])
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child)
    assert not list((tmp_path / "out").glob(".*.tmp"))


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.split(") ", 1)[1][:1] != "Z"


# --- one validation for pinned files, a usage error before any test runs ----------------------------------------

@pytest.mark.parametrize(("machine", "key"), [
    ({"peak_flops": {"fp32": "0.001 FLOP/s"}, "bandwidth": {"DRAM": 2e10}}, "peak_flops.fp32"),
    ({"peak_flops": {"fp32": 2e11}, "bandwidth": {"DRAM": "1 B/s"}}, "bandwidth.DRAM"),
    ({"peak_flops": {"fp32": 1e300}, "bandwidth": {"DRAM": 2e10}}, "peak_flops.fp32"),
    ({"peak_flops": {"fp32": 2e11}, "bandwidth": {"DRAM": 2e10}, "info": {"capacities": {"L2": "big"}}},
     "info.capacities.L2"),
    ({"peak_flops": {"fp32": 2e11}, "bandwidth": {"L2": 1e9, "DRAM": 2e10}}, "bandwidth.L2"),
])
def test_absurd_pinned_roofs_are_a_usage_error_naming_file_and_key(pytester: pytest.Pytester,
                                                                   machine: dict[str, Any], key: str,
                                                                   write_machine: Callable[..., Path],
                                                                   fast_args: tuple[str, ...]) -> None:
    path = write_machine(machine)
    pytester.makepyfile("import pytest\n@pytest.mark.roofline\ndef test_x(roofline):\n    pass\n")
    result = pytester.runpytest("--roofline", "--roofline-machine", str(path), *fast_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{path}*{key}*"])
    result.stdout.no_fnmatch_line("*test_x*PASSED*")


def test_pinned_capacities_with_units_are_used(tmp_path: Path) -> None:
    from pytest_roofline.characterize.machine import load_machine_file

    path = tmp_path / "m.json"
    path.write_text(json.dumps({"peak_flops": {"fp32": 2e11}, "bandwidth": {"L2": 1e11, "DRAM": 2e10},
                                "info": {"capacities": {"L2": "4 MiB"}}}))
    assert load_machine_file(path).info["capacities"] == {"L2": 4 * 2**20}


def test_a_fraction_above_1_2_is_an_error_naming_the_roof(pytester: pytest.Pytester,
                                                          write_machine: Callable[..., Path],
                                                          fast_args: tuple[str, ...]) -> None:
    # fp32 roof of 10 MFLOP/s... no: 20 MFLOP/s is plausible for the range check, and a sleep-free GEMM beats it.
    path = write_machine({"peak_flops": {"fp32": 2e7}, "bandwidth": {"DRAM": 1e15}})
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.roofline(min_fraction=1.0)\n"
        "def test_fast(roofline):\n"
        "    roofline.declare(flops=2e6, bytes=8, precision='fp32').measure(lambda: None)\n")
    result = pytester.runpytest("--roofline", "--roofline-machine", str(path), *fast_args)
    result.assert_outcomes(errors=1)  # counted once: as the error of its teardown, not also as a pass
    text = " ".join(" ".join(result.outlines).split())  # the message is wrapped to 120 columns
    assert re.search(r"is above 1\.2.*peak_flops\.fp32 = 0\.02 GFLOP/s.*pinned file.*machine\.json", text)
    # The record keeps the cause, and the roofline section says it: no log needed to know why it errored.
    record = json.loads((pytester.path / ".roofline" / "results.json").read_text())["tests"][0]
    assert record["outcome"] == "error" and record["failure"]["when"] == "teardown"
    assert record["failure"]["message"].startswith("roofline: attained fraction") and "is above 1.2" in record[
        "failure"]["message"]
    assert re.search(r"error in test_a_fraction_above_1_2_is_an_error_naming_the_roof\.py::test_fast \(teardown"
                     r"(, [^)]*)?\): roofline: attained fraction", text)
