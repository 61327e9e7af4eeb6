"""pytest-xdist: the workers' records travel to the controller, which writes one results.json for the session.

The end-to-end test is a real ``-n 2`` run in a subprocess on the CPU, with declared work and a pinned machine
(no characterization); a fake ``nvidia-smi`` on PATH says the machine has two GPUs, so each worker gets its
own ``CUDA_VISIBLE_DEVICES`` (nothing here initializes CUDA). The joining is unit-tested without xdist.
"""

from __future__ import annotations

import json
import math
import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_roofline.output.summary import compact_row
from pytest_roofline.output.table import Row
from pytest_roofline.output.worker_records import merge_payloads, plain, worker_payload
from pytest_roofline.record.tests import TestRecord

MACHINE = {"name": "pinned-test-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}

# 1e8 FLOPs at 100 GFLOP/s = 1 ms; a 2 ms sleep reads about 0.5.
SUITE = """
import os, time, pytest

def sleep_2ms():
    time.sleep(0.002)

@pytest.mark.roofline(min_fraction=0.05)
@pytest.mark.parametrize("case", range(5))
def test_fast(roofline, case):
    roofline.declare(flops=1e8).measure(sleep_2ms)

@pytest.mark.roofline(min_fraction=0.99)
def test_below(roofline):
    roofline.declare(flops=1e8).measure(sleep_2ms)

def test_plain():
    assert os.environ["CUDA_VISIBLE_DEVICES"] == os.environ["PYTEST_XDIST_WORKER"][2:]
"""

FAKE_SMI = """#!/bin/sh
echo "GPU 0: NVIDIA Fake (UUID: GPU-0)"
echo "GPU 1: NVIDIA Fake (UUID: GPU-1)"
"""


def test_two_workers_write_one_complete_results_file(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    write_machine: Callable[..., Path]) -> None:
    pytest.importorskip("xdist")
    if Path("/proc/driver/nvidia/gpus").is_dir():
        pytest.skip("a real NVIDIA driver is loaded: the GPU count would not be the fake one")
    machine_file = write_machine(MACHINE)
    bin_dir = pytester.path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_suite=SUITE)

    result = pytester.runpytest_subprocess(
        "-n", "2", "--roofline", "--roofline-machine", str(machine_file), "--roofline-max-time", "0.05",
        "--roofline-confirm", "off", "-p", "no:cacheprovider", "--junitxml", "junit.xml")

    result.assert_outcomes(passed=6, failed=1)
    top = pytester.path / ".roofline" / "results.json"
    document = json.loads(top.read_text())
    tests = {t["nodeid"]: t for t in document["tests"]}
    expected = [f"test_suite.py::test_fast[{i}]" for i in range(5)] + ["test_suite.py::test_below"]
    assert list(tests) == expected  # every roofline test once, in collection order
    for nodeid in expected:
        # a 2 ms sleep against a 1 ms t_min: at most 0.5 however busy the host, above 0 (any lower bound would
        # time this host)
        assert 0 < tests[nodeid]["fraction"] <= 0.5 and tests[nodeid]["regions"], nodeid
        assert tests[nodeid]["worker"] in ("gw0", "gw1")
    assert tests["test_suite.py::test_below"]["outcome"] == "failed"
    assert document["machine"]["name"] == "pinned-test-machine"
    session = document["session"]
    assert session["exit_status"] == 1
    workers = session["workers"]
    assert sorted(workers) == ["gw0", "gw1"] and sum(w["tests"] for w in workers.values()) == 6
    for name, worker in workers.items():
        assert worker["gpu"] == {"worker": name, "cuda_visible_devices": name[2:], "gpu_set_by": "pytest-roofline"}
    # one session folder: the controller's, holding its results.json and the workers' artifacts
    sessions = list((pytester.path / ".roofline" / "sessions").iterdir())
    assert [s.name for s in sessions] == [session["id"]]
    assert json.loads((sessions[0] / "results.json").read_text()) == document
    chart = Path(tests["test_suite.py::test_below"]["artifacts"][0])
    assert chart.suffix == ".png" and (pytester.path / chart).is_file() and chart.parent.name == session["id"]
    # the controller's summary, the step summary written once, the JUnit properties through the reports
    result.stdout.fnmatch_lines(["*= roofline =*", "*test_below * failed (below min)",
                                 "xdist: tests measured per worker: gw0 *, gw1 *"])
    text = summary.read_text()
    assert text.count("### pytest-roofline") == 1 and "**6 roofline tests, 1 failed**" in text
    first_row = next(line for line in text.splitlines() if line.startswith("| ❌"))
    assert "test_suite.py::test_below" in first_row
    cases = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert cases["test_below"]["roofline_min_fraction"] == "0.99"
    assert math.isclose(float(cases["test_below"]["roofline_fraction"]), tests["test_suite.py::test_below"]["fraction"],
                        rel_tol=1e-5)
    assert cases["test_plain"] == {}
    # one history entry for the session, with every worker's tests and their parametrize arguments
    entries = list((pytester.path / ".roofline" / "history").glob("*/*.json"))
    assert len(entries) == 1
    history = json.loads(entries[0].read_text())
    assert sorted(t["nodeid"] for t in history["tests"]) == sorted(tests)
    assert {t["function"] for t in history["tests"]} >= {"test_suite.py::test_fast", "test_suite.py::test_below"}


def _payload(worker: str, nodeids: list[str], machine: dict | None = None, failed_late: bool = False) -> dict:
    return worker_payload(worker, [{"nodeid": n, "outcome": "passed", "fraction": 0.5} for n in nodeids], machine,
                          failed_late)


def test_merge_in_collection_order_one_record_per_test() -> None:
    cpu = {"name": "cpu", "peak_flops": {"fp32": 1.0}, "bandwidth": {}, "info": {"fingerprint_hash": "aaa"}}
    merged = merge_payloads([_payload("gw1", ["t::b", "t::d"], cpu), _payload("gw0", ["t::c", "t::a"], cpu)],
                            order=["t::a", "t::b", "t::c", "t::d"])
    assert [t.nodeid for t in merged.tests] == ["t::a", "t::b", "t::c", "t::d"]
    assert [t.extra["worker"] for t in merged.tests] == ["gw0", "gw1", "gw0", "gw1"]
    assert merged.machine == cpu and merged.machines == (cpu,)
    assert {name: w.to_dict() for name, w in merged.workers.items()} == {
        "gw0": {"tests": 2, "gpu": None, "machine": "aaa"}, "gw1": {"tests": 2, "gpu": None, "machine": "aaa"}}
    assert merged.failed_late is False


def test_merge_keeps_the_last_run_of_a_rescheduled_test_and_every_machine() -> None:
    h100 = {"name": "H100", "peak_flops": {"fp32": 6e13}, "bandwidth": {}, "info": {"fingerprint_hash": "h"}}
    a100 = {"name": "A100", "peak_flops": {"fp32": 2e13}, "bandwidth": {}, "info": {"fingerprint_hash": "a"}}
    merged = merge_payloads([_payload("gw10", ["t::x"], a100, failed_late=True), _payload("gw2", ["t::x"], h100)])
    assert [t.extra["worker"] for t in merged.tests] == ["gw10"]  # gw2 before gw10 (by number): gw10's is kept
    assert merged.machine == h100 and merged.machines == (h100, a100)
    assert merged.failed_late is True


def test_payload_is_plain_values() -> None:
    payload = worker_payload("gw0", [{"nodeid": "t", "shape": (2, 3)}], None, False, gpu=None)
    assert payload["tests"] == [{"nodeid": "t", "shape": [2, 3], "worker": "gw0"}]
    with pytest.raises(ValueError):
        plain({"fraction": math.nan})  # results.json forbids NaN too; the worker reports it as an error


def row_from_result(record: dict) -> Row:
    return compact_row(TestRecord.from_dict(record))


def test_summary_row_from_a_record() -> None:
    record = {"nodeid": "t::x", "outcome": "passed", "fraction": 0.25, "min_fraction": 0.1, "time_s": 0.002,
              "bound": "memory:DRAM", "flops": 1e6, "bytes": {"DRAM": 4e6, "L2": 8e6}, "ai": {"DRAM": 0.25}}
    row = row_from_result(record)
    assert (row.fraction, row.bound, row.time_s, row.verdict, row.marks) == (0.25, "memory:DRAM", 0.002, "passed", "")
    assert row_from_result({**record, "fraction": 0.05}).verdict == "passed (below min)"
    assert row_from_result({**record, "min_fraction": None}).verdict == "passed (no gate)"
    assert math.isclose(row.gflops, 0.5) and math.isclose(row.gbytes, 2.0)  # 1e6 / 2 ms; 4e6 B / 2 ms
    compute = row_from_result({**record, "bound": "compute:fp32"})
    assert math.isclose(compute.gbytes, 4.0)  # not memory-bound: the level that moved the most bytes (L2)
    skipped = row_from_result({"nodeid": "t::y", "outcome": "skipped", "fraction": None})
    assert skipped.verdict == "skipped (not measured)"
    faulting = {**record, "regions": [{"timing": {"faults_per_call": 12.0}}], "fraction": 1.2}
    assert row_from_result(faulting).marks == "f!"  # faults per call, and a fraction above 1


def test_without_xdist_a_session_still_writes_its_files(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        write_machine: Callable[..., Path]) -> None:
    """The plugin never imports xdist: with it disabled (as when it is not installed) a session is serial."""
    machine_file = write_machine(MACHINE)
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_suite=SUITE.replace('os.environ["PYTEST_XDIST_WORKER"][2:]', "None")
                        .replace('os.environ["CUDA_VISIBLE_DEVICES"]', 'os.environ.get("CUDA_VISIBLE_DEVICES")'))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--roofline", "--roofline-machine", str(machine_file), "--roofline-max-time", "0.05",
        "--roofline-confirm", "off", "-p", "no:cacheprovider", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=6, failed=1)
    document = json.loads((pytester.path / ".roofline" / "results.json").read_text())
    assert len(document["tests"]) == 6 and "workers" not in document["session"]
    assert all("worker" not in t for t in document["tests"])
    assert summary.read_text().count("### pytest-roofline") == 1
    assert "roofline_fraction" in (pytester.path / "junit.xml").read_text()


def test_controller_writes_the_workers_records_and_fails_late_failures(tmp_path: Path) -> None:
    """The controller's hooks called as xdist calls them, with fake nodes: no worker process needed."""
    from types import SimpleNamespace

    from pytest_roofline.output.worker_records import OUTPUT_KEY, SESSION_KEY
    from pytest_roofline.plugin.xdist import XdistController
    from pytest_roofline.session.settings import Settings
    from pytest_roofline.session.state import RooflineState

    state = RooflineState(Settings(enabled=True, directory=tmp_path / ".roofline", machine_file=None,
                                   counter="analytic", device="cpu", max_time_s=0.05, recharacterize=False,
                                   malloc="default"))
    controller = XdistController(state)
    nodes = [SimpleNamespace(workerinput={}) for _ in range(3)]
    for node in nodes:
        controller.pytest_configure_node(node)
    assert [n.workerinput[SESSION_KEY] for n in nodes] == [state.session_id] * 3
    controller.pytest_xdist_node_collection_finished(nodes[0], ["t::a", "t::b"])
    nodes[0].workeroutput = {OUTPUT_KEY: _payload("gw0", ["t::b"], MACHINE, failed_late=True)}
    nodes[1].workeroutput = {OUTPUT_KEY: {"worker": "gw1", "tests": [], "machine": None, "failed_late": False,
                                          "error": "could not send its records: NaN"}}
    controller.pytest_testnodedown(nodes[0], None)
    controller.pytest_testnodedown(nodes[1], None)
    controller.pytest_testnodedown(nodes[2], "crashed")  # no workeroutput: nothing to collect
    config = SimpleNamespace(invocation_params=SimpleNamespace(args=("--roofline", "-n", "3")), rootpath=tmp_path)
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK, config=config)
    controller.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED  # a test failed when re-measured in gw0
    document = json.loads((tmp_path / ".roofline" / "results.json").read_text())
    assert [t["nodeid"] for t in document["tests"]] == ["t::b"]
    assert document["session"]["exit_status"] == 1 and document["session"]["id"] == state.session_id
    assert document["session"]["worker_errors"] == ["gw1: could not send its records: NaN"]
    assert document["machine"]["name"] == "pinned-test-machine"
    assert state.write_error == "roofline: worker gw1: could not send its records: NaN"
