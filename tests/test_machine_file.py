"""load_machine_file(): pinned ceilings from JSON or TOML, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_roofline.characterize.machine import load_machine_file
from pytest_roofline.model import Machine


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_json_in_to_dict_layout_round_trips(tmp_path: Path) -> None:
    original = Machine("box", {"fp64": 113.3e9, "fp32": 225.6e9}, {"L1": 536e9, "DRAM": 31.6e9}, {"note": "x"})
    loaded = load_machine_file(_write(tmp_path, "box.json", json.dumps(original.to_dict())))
    assert loaded.name == "box"
    assert dict(loaded.peak_flops) == {"fp64": 113.3e9, "fp32": 225.6e9}
    assert dict(loaded.bandwidth) == {"L1": 536e9, "DRAM": 31.6e9}
    assert loaded.info["note"] == "x" and loaded.info["source"] == "pinned"


def test_toml_with_explicit_units(tmp_path: Path) -> None:
    text = """
name = "pinned-box"
[peak_flops]
fp64 = 1.0e11
fp32 = "225.6 GFLOP/s"
bf16_tensor = "0.5 TFLOPS"
[bandwidth]
dram = "31.5 GB/s"
L2 = "100 GiB/s"
"""
    loaded = load_machine_file(_write(tmp_path, "box.toml", text))
    assert loaded.peak_flops == {"fp64": 1.0e11, "fp32": pytest.approx(225.6e9), "bf16_tensor": 0.5e12}
    assert loaded.bandwidth == {"DRAM": pytest.approx(31.5e9), "L2": 100 * 2.0**30}


def test_cli_json_layout_with_compute_key(tmp_path: Path) -> None:
    text = json.dumps({"device": "cpu", "fingerprint": "f", "seconds": 3.0, "compute": {"fp64": 5e10},
                       "bandwidth": {"DRAM": 2e10}})
    loaded = load_machine_file(_write(tmp_path, "cli.json", text))
    assert loaded.peak_flops == {"fp64": 5e10} and loaded.name == "cli"


@pytest.mark.parametrize(("name", "text", "message"), [
    ("a.json", "{oops", "invalid JSON"),
    ("a.toml", "[peak_flops\nfp64=1", "invalid TOML"),
    ("a.json", "[1, 2]", "top level must be"),
    ("a.json", '{"peak": {"fp64": 1e9}}', "unknown key.*'peak'.*accepted: name, peak_flops"),
    ("a.json", '{"bandwidth": {"L9": 1e9}}', "unknown name 'L9'.*L1..L4, DRAM, HBM"),
    ("a.json", '{"peak_flops": {"fp128": 1e9}}', "unknown name 'fp128'"),
    ("a.json", '{"bandwidth": {"DRAM": 31.5}}', "implausibly small.*SI"),
    ("a.json", '{"bandwidth": {"DRAM": -3e9}}', "positive finite"),
    ("a.json", '{"bandwidth": {"DRAM": "31 GFLOP/s"}}', "needs B/s"),
    ("a.json", '{"peak_flops": {"fp64": "fast"}}', "cannot read 'fast'"),
    ("a.json", '{"peak_flops": {"fp64": true}}', "expected a number"),
    ("a.json", '{"name": "x"}', "no ceilings"),
    ("a.json", '{"peak_flops": [1, 2]}', "must be a table"),
    ("a.json", '{"peak_flops": {"fp64": 1e9}, "compute": {"fp32": 1e9}}', "not both"),
    ("a.cfg", "no: [valid", "neither valid JSON nor valid TOML"),
])
def test_bad_files_name_the_file_and_the_problem(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(ValueError, match=message) as caught:
        load_machine_file(path)
    assert str(path) in str(caught.value)


def test_missing_file_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        load_machine_file(tmp_path / "absent.toml")
