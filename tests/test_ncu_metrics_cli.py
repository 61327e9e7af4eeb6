"""``python -m pytest_roofline ncu-metrics --cc X.Y [--json]``."""

from __future__ import annotations

import json

import pytest

from pytest_roofline.commands import main
from pytest_roofline.counters.ncu import metric_set


@pytest.mark.parametrize("cc", ["9.0", "10.0", "10.3"])
def test_one_name_a_line(cc: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ncu-metrics", "--cc", cc]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == metric_set(cc).names
    assert captured.err == ""


def test_json_says_what_each_name_feeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ncu-metrics", "--cc", "10.3", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["compute_capability"] == "10.3" and document["checked"] is True
    entries = {e["name"]: e for e in document["metrics"]}
    ffma2 = entries["sm__sass_thread_inst_executed_op_ffma2_pred_on.sum"]
    assert (ffma2["feeds"], ffma2["formula"]) == ("fp32", "fp32 += 4 x value") and "SOLFPRoofline" in ffma2["source"]
    assert entries["sm__sass_thread_inst_executed_op_hfma_pred_on.sum"]["formula"] == "fp16 += 4 x value"
    assert entries["sm__ops_path_tensor_src_fp4_fp6_dst_fp32.sum"]["feeds"] == "fp4_fp6_tensor"
    assert entries["sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp16_sparsity_on.sum"]["feeds"] == "fp8_tensor"
    assert entries["dram__bytes.sum"]["feeds"] == "HBM" and entries["gpu__time_duration.sum"]["feeds"] == "time"
    assert list(entries) == metric_set("10.3").names


def test_unchecked_cc_is_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ncu-metrics", "--cc", "10.4"]) == 0
    captured = capsys.readouterr()
    assert "not in the stock section" in captured.err and "CC 10.3's names" in captured.err
    # 10.3's names without the packed FP32 counters, which are asked only on CC 10.0 and 10.3 exactly
    assert captured.out.splitlines() == [n for n in metric_set("10.3").names if "2_pred_on" not in n]


def test_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ncu-metrics", "--cc", "6.1"]) == 2
    assert "outside the supported range" in capsys.readouterr().err
