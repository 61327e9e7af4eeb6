"""The ncu CSV parser on small self-written fixtures (tests/fixtures/ncu), one format quirk each."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from pytest_roofline.counters.ncu import NcuParseError, load_report, parse_csv_text, parse_report_text
from pytest_roofline.counters.ncu.ncu_units import parse_number, to_si, unit_factor

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
GEMM = "void gemm<float, 2, true>(float const*, float const*, float*, int, int, int)"
SAXPY = "saxpy_kernel(float, float const*, float*)"
HGEMM = "void hgemm_kernel<__half, 128, 128>(Params, int, int)"
COPY = "void copy_kernel<float>(float const*, float*, unsigned long)"
ATTN = "void attn_fwd<cutlass::bfloat16_t, 64>(Params const&, int)"
ADD = "elementwise_add(float*, float const*, int)"


def by_name(report, name):
    return next(k for k in report.kernels if k.name == name)


@pytest.mark.parametrize(
    ("unit", "factor", "base"),
    [
        ("byte", 1.0, "byte"), ("Kbyte", 1e3, "byte"), ("Mbyte", 1e6, "byte"), ("Gbyte", 1e9, "byte"),
        ("byte/second", 1.0, "byte/second"), ("Gbyte/s", 1e9, "byte/second"), ("nsecond", 1e-9, "second"),
        ("ns", 1e-9, "second"), ("usecond", 1e-6, "second"), ("us", 1e-6, "second"), ("msecond", 1e-3, "second"),
        ("ms", 1e-3, "second"), ("second", 1.0, "second"), ("Ghz", 1e9, "hz"), ("hz", 1.0, "hz"),
        ("Mhz", 1e6, "hz"), ("cycle/second", 1.0, "hz"), ("inst", 1.0, "inst"), ("Kinst", 1e3, "inst"),
        ("%", 1.0, "%"), ("", 1.0, ""), ("pass", 1.0, "pass"), ("SM", 1.0, "SM"), ("warp", 1.0, "warp"),
        ("inst/cycle", 1.0, "inst/cycle"), ("register/thread", 1.0, "register/thread"),
    ],
)
def test_unit_factors(unit: str, factor: float, base: str) -> None:
    assert unit_factor(unit) == (pytest.approx(factor), base)


def test_numbers_thousands_separators_and_na() -> None:
    assert parse_number("1,619,999,997.89") == 1_619_999_997.89
    assert parse_number(" 516,327,794,816 ") == 516_327_794_816
    assert parse_number("n/a") is None and parse_number("N/A") is None and parse_number("") is None
    assert to_si("3.35", "Mbyte") == pytest.approx(3.35e6)
    assert to_si("n/a", "byte") is None
    with pytest.raises(ValueError):
        parse_number("(128, 1, 1)")


def test_details_with_stdout_messages_and_thousands_separators() -> None:
    report = load_report(FIXTURES / "details_stdout_mixed.csv")
    assert report.format == "details" and report.launch_count == 3
    # The two application lines: one before the header (skipped silently), one among the rows (counted).
    assert report.skipped_lines == 1
    assert [m.split(" ", 1)[0] for m in report.messages] == ["==PROF=="] * 3 + ["==WARNING==", "==PROF=="]
    gemm = by_name(report, GEMM)  # quoted demangled name with commas; launches ID 0 and ID 2
    assert gemm.launches == 2
    # ID 0: 2,000,000 cycle / 1,000,000,000 cycle/second = 2 ms; ID 2: 3,000,000 / 1,500,000,000 = 2 ms.
    assert gemm.time_s == pytest.approx(4e-3)
    # fp32 per launch: fadd 1,000 + fmul 2,000 + 2 x ffma 1,000,000 = 2,003,000; two launches.
    # The h* rows are all n/a: fp16 is absent, not zero.
    assert gemm.flops == {"fp32": 4_006_000.0}
    assert gemm.bytes == {"HBM": 100_000.0}  # 40,000 + 60,000
    saxpy = by_name(report, SAXPY)
    assert saxpy.launches == 1 and saxpy.time_s == pytest.approx(5e-7)
    assert saxpy.flops == {"fp32": 8_192.0} and saxpy.bytes == {"HBM": 49_152.0}
    # "Kernel Time" in 2020-era files is a timestamp, never a duration.
    assert "Kernel Time" not in str(report.definitions)


def test_details_rules_ragged_rows_auto_units_and_multiline_rule() -> None:
    parsed = parse_csv_text((FIXTURES / "details_rules_ragged.csv").read_text())
    assert parsed.rule_rows == 2  # SOLBottleneck and the rule whose description spans two lines
    assert parsed.skipped_lines == 0
    report = load_report(FIXTURES / "details_rules_ragged.csv")
    assert report.compute_capabilities == ["9.0"]
    hgemm = by_name(report, HGEMM)
    assert hgemm.time_s == pytest.approx(1_250.5e-6)  # "1,250.5" usecond
    # Tensor: src_fp16 "2,147,483,648"; src_bf16_dst_fp32 "n/a" (absent); src_tf32_dst_fp32 "0" (measured zero).
    # CUDA cores: hadd "2" Kinst = 2,000, hmul 0, hfma 500: 2 x 2,000 + 2 x 0 + 4 x 500 = 6,000 fp16 FLOPs.
    assert hgemm.flops == {"fp16": 6_000.0, "fp16_tensor": 2_147_483_648.0, "tf32_tensor": 0.0}
    assert hgemm.tensor_flops == 2_147_483_648.0
    # "80.5" Mbyte, "40.25" Mbyte, "8,192" Kbyte.
    assert hgemm.bytes == {"L1": 80_500_000.0, "L2": 40_250_000.0, "HBM": 8_192_000.0}
    assert hgemm.sm_clock_hz == pytest.approx(1.98e9)  # "1.98" Ghz
    copy = by_name(report, COPY)
    assert copy.time_s == pytest.approx(2e-6)  # "0.002" msecond
    assert copy.flops == {"fp32": 0.0, "fp16_tensor": 0.0} and copy.tensor_flops == 0.0
    # dram__bytes_read.sum "1.048576" Mbyte + dram__bytes_write.sum "1,048,576" byte.
    assert copy.bytes == {"HBM": 2_097_152.0}
    assert report.definitions["HBM"] == "dram__bytes.sum | dram__bytes_read.sum + dram__bytes_write.sum"


def test_section_duration_row_is_the_last_resort_for_time() -> None:
    text = (FIXTURES / "details_rules_ragged.csv").read_text().replace("gpu__time_duration.sum", "gpu__other.sum")
    hgemm = by_name(parse_report_text(text), HGEMM)
    assert hgemm.time_s == pytest.approx(1_250.5e-6)
    assert hgemm.definitions["time"] == "'GPU Speed Of Light Throughput/Duration' (section row)"


def test_raw_page_units_row_and_double_counting_guard() -> None:
    report = load_report(FIXTURES / "raw_page.csv")
    assert report.format == "raw" and report.launch_count == 3 and len(report.messages) == 2
    assert report.devices == ["NVIDIA A100-SXM4-80GB"] and report.compute_capabilities == ["8.0"]
    attn = by_name(report, ATTN)
    assert attn.launches == 2
    assert attn.time_s == pytest.approx(220e-6)  # 100 + 120 usecond
    # bf16 sparsity_off 1,000,000,000 per launch + sparsity_on 0. src_fp16_dst_fp32 500,000,000 once: its child
    # ..._sparsity_off (the same 500,000,000) is dropped because the parent is present.
    assert attn.flops["bf16_tensor"] == 2e9
    assert attn.flops["fp16_tensor"] == 5e8
    assert attn.tensor_flops == 2.5e9
    assert attn.flops["fp32"] == 2 * (100 + 2 * 200)  # fadd 100, ffma 200, fmul 0 in each launch
    assert attn.flops["fp64"] == 0.0 and "fp16" not in attn.flops  # h* columns are n/a
    # dram 2.5 Mbyte, l1tex 0.04 Gbyte, lts 10,000 Kbyte, per launch.
    assert attn.bytes == {"L1": 8e7, "L2": 2e7, "HBM": 5e6}
    assert attn.replay_passes == 5 and attn.sm_clock_hz == pytest.approx(1.41e9)
    add = by_name(report, ADD)
    assert add.flops["fp32"] == 100_000.0 and add.tensor_flops == 0.0
    assert add.bytes == {"L1": 1.2e6, "L2": 1.2e6, "HBM": 1.2e6}
    # Mean SM clock (1.41 + 1.41 + 1.35) / 3 GHz is 98.6% of the 1,410,000 kHz maximum: no lock suspected.
    assert report.device_max_clock_hz == pytest.approx(1.41e9) and report.clock_note is None


def test_rates_only_report_is_turned_into_totals() -> None:
    report = load_report(FIXTURES / "raw_rates.csv")
    gpp = report.kernels[0]
    assert gpp.time_s == pytest.approx(2e-3)  # 2 msecond
    # (dadd 1 + dmul 0.5 + 2 x dfma 2) inst/cycle x 1.5 Ghz x 2 ms = 16,500,000 FLOPs.
    assert gpp.flops["fp64"] == pytest.approx(1.65e7)
    # 100 Gbyte/s x 2 ms; 1,000,000 hz x 2 ms x 128 B; 5,000,000 hz x 2 ms x 32 B.
    assert gpp.bytes == {"HBM": pytest.approx(2e8), "L1": pytest.approx(256_000), "L2": pytest.approx(320_000)}
    assert gpp.definitions["L1"] == "l1tex__lsu_writeback_active_mem_lg.sum x 128"
    assert gpp.definitions["cache_bytes"] == "returned_to_sm"
    assert "dram__bytes.sum" in gpp.definitions["derived_from_rate"]


def test_no_kernels_profiled_is_a_clear_error() -> None:
    with pytest.raises(NcuParseError, match="No kernels were profiled"):
        load_report(FIXTURES / "no_kernels.txt")


def test_header_without_rows_gives_no_kernels() -> None:
    text = (FIXTURES / "details_stdout_mixed.csv").read_text().splitlines()
    header = next(line for line in text if line.startswith('"ID"'))
    report = parse_report_text(header + "\n==PROF== Disconnected from process 1\n")
    assert report.kernels == [] and report.launch_count == 0


def test_samples_are_model_kernel_samples() -> None:
    from pytest_roofline.counters.ncu import samples_from_report

    samples = samples_from_report(FIXTURES / "details_stdout_mixed.csv")
    assert [(s.name, s.launches) for s in samples] == [(GEMM, 2), (SAXPY, 1)]
    assert samples[0].flops == {"fp32": 4_006_000.0} and samples[0].time_s == pytest.approx(4e-3)


def test_ncu_rep_without_any_reader_says_what_is_needed(monkeypatch, tmp_path) -> None:
    from pytest_roofline.counters.ncu import ReportReaderMissing, rep

    monkeypatch.setattr(rep, "find_ncu_report_module", lambda: None)
    monkeypatch.setattr(rep.shutil, "which", lambda name: None)
    report_file = tmp_path / "x.ncu-rep"
    report_file.write_bytes(b"\x00")
    with pytest.raises(ReportReaderMissing, match="pip install ncu-report"):
        load_report(report_file)


def test_ncu_rep_falls_back_to_ncu_import(monkeypatch, tmp_path) -> None:
    from pytest_roofline.counters.ncu import rep

    calls: list[list[str]] = []

    class Done:
        returncode = 0
        stdout = (FIXTURES / "raw_page.csv").read_text()
        stderr = ""

    def fake_run(argv, **kwargs):
        calls.append(list(argv))
        assert "shell" not in kwargs
        return Done()

    monkeypatch.setattr(rep, "find_ncu_report_module", lambda: None)
    monkeypatch.setattr(rep.shutil, "which", lambda name: "/opt/ncu/ncu")
    monkeypatch.setattr(rep.subprocess, "run", fake_run)
    report = load_report(tmp_path / "y.ncu-rep")
    assert calls == [["/opt/ncu/ncu", "--import", str(tmp_path / "y.ncu-rep"), "--csv", "--page", "raw"]]
    assert report.format == "raw" and report.launch_count == 3


def test_ncu_rep_with_a_module_shaped_like_ncu_report(tmp_path) -> None:
    """The ncu_report path, against a stand-in with the API the real module has (samples 08/09 test the real one)."""
    from pytest_roofline.counters.ncu.rep import read_with_module

    class Metric:
        def __init__(self, value, unit=""):
            self._value, self._unit = value, unit

        def has_value(self):
            return self._value is not None

        def value(self):
            return self._value

        def unit(self):
            return self._unit

    class Action:
        metrics: ClassVar[dict[str, Metric]] = {
            "gpu__time_duration.sum": Metric(1500.0, "ns"),
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": Metric(10, "inst"),
            "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": Metric(None, "inst"),
            "dram__bytes.sum": Metric(2.0, "Kbyte"),
            "device__attribute_display_name": Metric("NVIDIA H100 80GB HBM3"),
            "device__attribute_compute_capability_major": Metric(9),
            "device__attribute_compute_capability_minor": Metric(0),
            "launch__grid_size": Metric(132),
        }

        def name(self, base=None):
            return "void k<int, 2>(int, int)"

        def metric_names(self):
            return list(self.metrics)

        def metric_by_name(self, name):
            return self.metrics[name]

    class Range:
        def num_actions(self):
            return 2

        def action_by_idx(self, index):
            return Action()

    class Context:
        def num_ranges(self):
            return 1

        def range_by_idx(self, index):
            return Range()

    class Module:
        @staticmethod
        def load_report(path):
            return Context()

    parsed = read_with_module(tmp_path / "z.ncu-rep", Module)  # type: ignore[arg-type]
    assert len(parsed.launches) == 2
    launch = parsed.launches[0]
    assert launch.cc == (9, 0) and launch.device == "NVIDIA H100 80GB HBM3"
    assert launch.metrics["gpu__time_duration.sum"] == pytest.approx(1.5e-6)
    assert launch.metrics["dram__bytes.sum"] == 2000.0
    assert launch.metrics["sm__sass_thread_inst_executed_op_fadd_pred_on.sum"] is None
    assert "launch__grid_size" not in launch.metrics  # only roofline-relevant metrics are read
