"""The ncu parser on the real Nsight Compute outputs in ../shared/ncu-samples (provenance in each .source.txt).

Every expected number below was read from the sample file by hand; the comment next to it says which kernel,
which metric rows, the raw values with their units, and the arithmetic.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from pytest_roofline.counters.ncu import load_report
from pytest_roofline.counters.ncu.kernel_report import NcuReport
from pytest_roofline.counters.ncu.metrics import launch_work

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "ncu-samples"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"shared ncu samples not found at {SAMPLES}")

HAVE_REP_READER = importlib.util.find_spec("ncu_report") is not None or shutil.which("ncu") is not None
needs_rep_reader = pytest.mark.skipif(
    not HAVE_REP_READER, reason="reading .ncu-rep needs the ncu_report module (pip install ncu-report) or ncu"
)

IJ_DERIV = ("ij_deriv_kernel(int, int, int, thrust::complex<double> const*, int, double const*, "
            "thrust::complex<double> const*, thrust::complex<double>*)")
ADD_I_COL = ("add_i_col_times_ij_block_kernel(int, int, int, int, double*, double*, thrust::complex<double>*, "
             "thrust::complex<double>*)")


def sample(prefix: str) -> Path:
    matches = sorted(SAMPLES.rglob(f"{prefix}*"))
    matches = [m for m in matches if not m.name.endswith(".source.txt")]
    assert len(matches) == 1, matches
    return matches[0]


def kernel(report: NcuReport, name: str):
    found = [k for k in report.kernels if k.name == name]
    assert len(found) == 1, [k.name for k in report.kernels]
    return found[0]


def all_samples() -> list[Path]:
    if not SAMPLES.is_dir():
        return []
    return sorted(p for p in SAMPLES.rglob("*") if p.is_file() and not p.name.endswith(".source.txt"))


@pytest.mark.parametrize("path", all_samples(), ids=lambda p: p.name[:40])
def test_every_shared_sample_parses(path: Path) -> None:
    if path.suffix == ".ncu-rep" and not HAVE_REP_READER:
        pytest.skip("reading .ncu-rep needs the ncu_report module (pip install ncu-report) or the ncu CLI")
    report = load_report(path)
    assert report.kernels and report.launch_count >= len(report.kernels)
    for sample_kernel in report.kernels:
        assert sample_kernel.launches >= 1
        assert sample_kernel.flops or sample_kernel.bytes or sample_kernel.time_s
        sample_kernel.to_sample()  # the model accepts it (non-negative, finite)


def test_01_v100_gene_dp_flops_and_cycle_time() -> None:
    report = load_report(sample("01_"))
    assert report.format == "details" and report.launch_count == 8 and len(report.kernels) == 2
    ij = kernel(report, IJ_DERIV)
    # ij_deriv_kernel, IDs 0, 2, 4, 6 (4 launches), rows sm__sass_thread_inst_executed_op_{dadd,dmul,dfma}_pred_on.sum
    # (unit inst): dadd "0", dmul "55,050,240", dfma "137,625,600" in each launch:
    # 4 x (0 + 55,050,240 + 2 x 137,625,600) = 4 x 330,301,440 = 1,321,205,760 FP64 FLOPs.
    assert ij.launches == 4
    assert ij.flops == {"fp64": 1_321_205_760.0}
    # Time = sum over launches of sm__cycles_elapsed.avg (cycle) / sm__cycles_elapsed.avg.per_second (cycle/second):
    expected_time = (179_638_319.62 / 1_312_168_927.90 + 185_523_016.75 / 1_312_171_062.55
                     + 187_295_887.82 / 1_311_374_866.25 + 185_940_802.12 / 1_312_167_140.64)
    assert ij.time_s == pytest.approx(expected_time, rel=1e-12)
    assert ij.time_s == pytest.approx(0.56282, rel=1e-4)
    add = kernel(report, ADD_I_COL)
    # add_i_col_times_ij_block_kernel, IDs 1, 3, 5, 7: dadd = dmul = dfma = "27,525,120" inst in each launch:
    # 4 x (27,525,120 x 4) = 440,401,920 FP64 FLOPs.
    assert add.flops == {"fp64": 440_401_920.0}
    assert add.bytes == {}  # no byte counter in this run: absent, not zero
    assert add.ai == {}
    assert report.definitions["time"] == "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second"


def test_02_v100_gene_dram_bytes() -> None:
    report = load_report(sample("02_"))
    ij = kernel(report, IJ_DERIV)
    # ij_deriv_kernel rows dram__bytes.sum (byte), IDs 0/2/4/6:
    # 690,930,080 + 690,957,152 + 690,995,968 + 690,970,656 = 2,763,853,856 bytes.
    assert ij.bytes == {"HBM": 2_763_853_856.0}
    # IDs 0/2/4/6 sm__cycles_elapsed.avg / .per_second (cycle/second):
    expected_time = (1_209_387.62 / 1_310_358_618.72 + 1_210_486.18 / 1_310_458_427.52
                     + 1_211_802.23 / 1_310_339_776.17 + 1_210_196.68 / 1_310_417_397.57)
    assert ij.time_s == pytest.approx(expected_time, rel=1e-12)
    add = kernel(report, ADD_I_COL)
    # add_i_col_times_ij_block_kernel dram__bytes.sum, IDs 1/3/5/7:
    # 891,791,968 + 891,820,704 + 891,777,696 + 891,771,360 = 3,567,161,728 bytes.
    assert add.bytes == {"HBM": 3_567_161_728.0}
    assert add.flops == {}


def test_03_v100_deepcam_tensor_instructions_with_stdout_prelude() -> None:
    report = load_report(sample("03_"))
    # 40 lines of application output and ==PROF== lines precede the header; IDs 0..558.
    assert report.launch_count == 559 and len(report.kernels) == 49
    assert report.messages[0].startswith("==PROF== Connected to process 34810")
    assert report.messages[-1].startswith("==PROF== Disconnected from process 34810")
    gemm = kernel(report, "Volta_hmma_implicit_gemm_fprop_fp32_nhwc_128x128x64x1_1x3x3x0x1")
    # Its 8 launches (IDs 193, 211, 229, 247, 508, 514, 538, 541), sm__inst_executed_pipe_tensor.sum (inst):
    # 15925248 x 4 + 318504960 + 254803968 + 6115295232 + 4076863488 = 10,829,168,640 HMMA instructions;
    # x 512 FLOPs per V100 HMMA = 5,544,534,343,680 Tensor Core FLOPs.
    assert gemm.launches == 8
    assert gemm.tensor_instructions == 10_829_168_640.0
    assert gemm.flops == {"fp16_tensor": 5_544_534_343_680.0}
    assert gemm.time_s is None  # no time metric in this run
    # The CSV has no CC column: the V100 multiplier is assumed and the result says so.
    assert any("compute capability unknown" in w for w in gemm.warnings)
    # Passing the compute capability (the source file says V100) removes the guess.
    exact = load_report(sample("03_"), cc="7.0")
    assert not any(k.warnings for k in exact.kernels)
    # The most launched kernel: SwapDimension1And2InTensor3UsingTiles<Eigen::half, ...>, 112 launches, all "0".
    swap = max(report.kernels, key=lambda k: k.launches)
    assert swap.launches == 112 and swap.tensor_flops == 0.0
    total_instructions = sum(k.tensor_instructions or 0.0 for k in report.kernels)
    assert total_instructions == 18_259_099_648.0  # sum of all 559 sm__inst_executed_pipe_tensor.sum rows


def test_04_ada_full_nersc_set() -> None:
    report = load_report(sample("04_"))
    assert report.compute_capabilities == ["8.9"] and report.launch_count == 1
    gpp = kernel(report, "sigma_gpp_gpu_34")
    # ID 0, sm__sass_thread_inst_executed_op_{dadd,dmul,dfma}_pred_on.sum (inst):
    # 158,180,752,242 + 803,017,623,077 + 2 x 817,773,953,820 = 2,596,746,282,959 FP64 FLOPs;
    # the f* and h* rows are all "0".
    assert gpp.flops == {"fp64": 2_596_746_282_959.0, "fp32": 0.0, "fp16": 0.0}
    # l1tex__t_bytes.sum "1,288,549,677,760", lts__t_bytes.sum "640,889,913,632", dram__bytes.sum
    # "516,327,794,816" (byte).
    assert gpp.bytes == {"L1": 1_288_549_677_760.0, "L2": 640_889_913_632.0, "HBM": 516_327_794_816.0}
    # sm__cycles_elapsed.avg "49,398,007,062.67" cycle / sm__cycles_elapsed.avg.per_second "1,619,999,997.89" hz.
    assert gpp.time_s == pytest.approx(49_398_007_062.67 / 1_619_999_997.89, rel=1e-12)
    assert gpp.time_s == pytest.approx(30.4926, rel=1e-5)
    # sm__inst_executed_pipe_tensor.sum = 0 on CC 8.9: known zero Tensor Core FLOPs, no fp16_tensor guess.
    assert gpp.tensor_flops == 0.0 and "fp16_tensor" not in gpp.flops
    # AI at HBM = 2,596,746,282,959 / 516,327,794,816 = 5.0293
    assert gpp.ai["HBM"] == pytest.approx(5.02925, rel=1e-5)
    assert gpp.definitions["cache_bytes"] == "t_bytes"
    assert report.definitions["L1"] == "l1tex__t_bytes.sum"


def test_05_a100_bert_ragged_rule_rows_and_half_lanes() -> None:
    path = sample("05_")
    report = load_report(path)
    assert report.launch_count == 10 and len(report.kernels) == 7
    cutlass = next(k for k in report.kernels if "cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2" in k.name)
    # ID 5: ffma "49,152", fmul "49,152", fadd "0" (inst): fp32 = 0 + 49,152 + 2 x 49,152 = 147,456.
    # hadd "49,152", hmul "0", hfma "0": fp16 = 2 lanes x 49,152 = 98,304.
    assert cutlass.flops["fp32"] == 147_456.0
    assert cutlass.flops["fp16"] == 98_304.0
    # l1tex__t_bytes.sum "1,354,752", lts__t_bytes.sum "2,319,200", dram__bytes.sum "415,488" (byte).
    assert cutlass.bytes == {"L1": 1_354_752.0, "L2": 2_319_200.0, "HBM": 415_488.0}
    # sm__cycles_elapsed.avg "7,219.93" cycle / .per_second "932,325,145.39" cycle/second (base-clock lock).
    assert cutlass.time_s == pytest.approx(7_219.93 / 932_325_145.39, rel=1e-12)
    # sm__inst_executed_pipe_tensor.sum "6,144": the file has no CC column, so the V100 x512 is assumed...
    assert cutlass.flops["fp16_tensor"] == 512 * 6_144.0
    # ...but this is an A100 (source.txt): with CC 8.0 the instruction count has no known FLOPs per instruction.
    a100 = kernel(load_report(path, cc="8.0"), cutlass.name)
    assert "fp16_tensor" not in a100.flops and a100.tensor_flops is None
    assert a100.tensor_instructions == 6_144.0
    assert any("Tensor Core FLOPs are unknown" in w for w in a100.warnings)
    # The NERSC convention (1 FLOP per half instruction lane pair) halves the fp16 count.
    assert kernel(load_report(path, half_lanes=1), cutlass.name).flops["fp16"] == 49_152.0
    # IDs 0..3 are four launches of the uniform_and_transform distribution kernel.
    uniform = next(k for k in report.kernels if "uniform_and_transform" in k.name)
    assert uniform.launches == 4
    # dram__bytes.sum over IDs 0..3: 384 + 0 + 128 + 0 = 512 bytes.
    assert uniform.bytes["HBM"] == 512.0


def test_05_rule_rows_are_skipped() -> None:
    from pytest_roofline.counters.ncu.parse import parse_csv_text

    parsed = parse_csv_text(sample("05_").read_text())
    # 18 rows carry a Rule Name with empty Metric Name/Unit/Value (15 fields); 600 metric rows have 13 fields.
    assert parsed.rule_rows == 18
    assert parsed.skipped_lines == 0


def test_06_blackwell_ops_path_auto_units_and_na() -> None:
    report = load_report(sample("06_"))
    assert report.compute_capabilities == ["12.0"]
    gemm = report.kernels[0]
    assert gemm.name == "void Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)"
    # sm__ops_path_tensor_src_bf16_dst_fp32.sum "1,275,068,416" (no unit); ..._src_bf16_dst_bf16.sum and
    # flop_count_{hp,sp}.sum are "n/a": absent, so the bf16 Tensor Core count is exactly the one value.
    assert gemm.flops == {"bf16_tensor": 1_275_068_416.0}
    # gpu__time_duration.sum "23.42" us.
    assert gemm.time_s == pytest.approx(23.42e-6, rel=1e-12)
    # dram__bytes_read.sum "3.35" Mbyte + dram__bytes_write.sum "0" byte = 3,350,000 bytes.
    assert gemm.bytes == {"HBM": 3_350_000.0}
    assert gemm.definitions["HBM"] == "dram__bytes_read.sum + dram__bytes_write.sum"
    # 1,275,068,416 / 3,350,000 = 380.62 FLOP/byte at HBM.
    assert gemm.ai["HBM"] == pytest.approx(380.617, rel=1e-5)


def test_07_b200_raw_page_sixteen_launches() -> None:
    report = load_report(sample("07_"))
    assert report.format == "raw" and report.launch_count == 16 and len(report.kernels) == 1
    assert report.devices == ["NVIDIA B200"] and report.compute_capabilities == ["10.0"]
    assert len(report.messages) == 2  # the ==PROF== Connected/Disconnected lines before the header
    flash = report.kernels[0]
    # gpu__time_duration.sum column (unit row "ns"), IDs 0..15:
    durations_ns = [687488, 685792, 687968, 687648, 687808, 690336, 688928, 684992, 686464, 686496, 687200,
                    686784, 689824, 686752, 686048, 687872]
    assert sum(durations_ns) == 10_998_400
    assert flash.time_s == pytest.approx(10_998_400e-9, rel=1e-12)
    assert flash.launches == 16
    assert flash.replay_passes == 11  # profiler__replayer_passes column, unit "pass"
    assert flash.flops == {} and flash.bytes == {}  # this run collected no FLOP or byte counters


@needs_rep_reader
def test_08_rtx4060_ncu_rep_rates_become_totals() -> None:
    report = load_report(sample("08_"))
    assert report.format in ("ncu-rep", "raw")
    assert report.devices == ["NVIDIA GeForce RTX 4060 Laptop GPU"] and report.compute_capabilities == ["8.9"]
    gpp = report.kernels[0]
    assert gpp.name == "sigma_gpp_gpu_39" and gpp.launches == 4 and gpp.replay_passes == 3
    # gpu__time_duration.sum (ns) of the 4 launches: 12525498112 + 100480 + 12588455200 + 100416.
    assert gpp.time_s == pytest.approx(25.114154208, rel=1e-12)
    # The Hierarchical Double Roofline section stores rates only. Launch 0:
    # (dadd 2.4877397879914467 + dmul 15.573999533318943 + 2 x dfma 18.336906255679587) inst/cycle
    # x smsp__cycles_elapsed.avg.per_second 1619868978.4024029 hz x 12.525498112 s.
    from pytest_roofline.counters.ncu.rep import read_ncu_rep

    launch0 = read_ncu_rep(sample("08_")).launches[0]
    work = launch_work(launch0.metrics, launch0.cc)
    expected = (2.4877397879914467 + 15.573999533318943 + 2 * 18.336906255679587) * 1619868978.4024029 * 12.525498112
    assert work.flops["fp64"] == pytest.approx(expected, rel=1e-9)
    # L1: l1tex__lsu_writeback_active_mem_lg.sum.per_second 468040840.9772949 x 12.525498112 s x 128 B;
    # L2: lts__lts2xbar_cycles_active.sum.per_second 628362895.4013131 x 12.525498112 s x 32 B;
    # HBM: dram__bytes.sum.per_second 3442340137.730085 B/s x 12.525498112 s.
    assert work.bytes["L1"] == pytest.approx(468040840.9772949 * 12.525498112 * 128, rel=1e-9)
    assert work.bytes["L2"] == pytest.approx(628362895.4013131 * 12.525498112 * 32, rel=1e-9)
    assert work.bytes["HBM"] == pytest.approx(3442340137.730085 * 12.525498112, rel=1e-9)
    assert gpp.definitions["cache_bytes"] == "returned_to_sm"
    # SM clock ~1.62 GHz vs the device's 2.01 GHz maximum (device__attribute_clock_rate 2010000 kHz).
    assert report.clock_note is not None and "81%" in report.clock_note


@needs_rep_reader
def test_09_v100_ncu_rep_matches_its_csv_kind() -> None:
    report = load_report(sample("09_"))
    assert report.devices == ["Tesla V100-SXM2-16GB"] and report.compute_capabilities == ["7.0"]
    ij = kernel(report, IJ_DERIV)
    # dram__bytes.sum of the 4 ij_deriv_kernel launches (rank 0 of the run that made sample 02):
    # 690974304 + 690909440 + 690954112 + 690998592 = 2,763,836,448 bytes.
    assert ij.bytes == {"HBM": 2_763_836_448.0}
    add = kernel(report, ADD_I_COL)
    # 891811744 + 891985120 + 891844576 + 891866400 = 3,567,507,840 bytes.
    assert add.bytes == {"HBM": 3_567_507_840.0}
    assert ij.replay_passes == 1
