"""The typed test record (``record/tests.py``): read, written back unchanged, migrated, refused when newer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_roofline.record import tests as record_module
from pytest_roofline.record.tests import SCHEMA, TestRecord, migrate, threads_of

H100 = Path(__file__).parent / "fixtures" / "gpu-h100"


@pytest.mark.parametrize("name", ["conv2d_forward_fp32_analytic.results.json", "conv2d_forward_fp32_ncu.results.json"])
def test_a_recorded_results_json_reads_typed_and_writes_back_unchanged(name: str) -> None:
    document = json.loads((H100 / name).read_text())
    (raw,) = document["tests"]
    record = TestRecord.from_dict(raw, document["schema"])
    assert record.to_dict() == raw  # every field kept, typed or in extra
    assert record.nodeid == raw["nodeid"] and record.fraction == raw["fraction"] and record.bound == raw["bound"]
    assert record.flops == raw["flops"] and dict(record.bytes) == raw["bytes"]
    assert len(record.kernels) == len(raw["kernels"]) and "clock_policy" in record.extra
    assert json.loads(json.dumps(record.to_dict())) == raw


def test_fields_of_the_wrong_type_read_as_unset_and_the_rest_is_kept() -> None:
    record = TestRecord.from_dict({"nodeid": "t.py::t[a]", "fraction": "high", "time_s": True, "bytes": {"L1": 64,
                                   "L2": "x"}, "outcome": 3, "confirmed": {"first": 0.4}})
    assert (record.fraction, record.time_s, record.outcome) == (None, None, "not run")
    assert dict(record.bytes) == {"L1": 64.0} and record.extra == {"confirmed": {"first": 0.4}}
    assert record.test_function == "t.py::t" and not record.measured
    with pytest.raises(ValueError, match="nodeid"):
        TestRecord.from_dict({"fraction": 0.5})


def test_every_record_has_the_fields_a_reader_expects_and_optional_ones_only_when_set() -> None:
    written = TestRecord("t", fraction=0.25).to_dict()
    assert written == {"nodeid": "t", "outcome": "not run", "min_fraction": None, "artifacts": [], "counter": None,
                       "fraction": 0.25, "bound": None, "time_s": None, "flops": None, "bytes": {}, "kernels": [],
                       "regions": []}


def test_threads_are_the_most_cores_a_call_site_ran_on() -> None:
    regions = ({"cores": {"count": 2}}, {"cores": {"count": 4}}, {"cores": {"count": True}}, {"cores": None})
    assert threads_of(regions) == 4 and TestRecord("t", regions=regions).threads == 4
    assert TestRecord("t").threads is None


def test_a_newer_schema_is_refused_and_an_older_one_is_migrated(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=f"newer than this package's {SCHEMA}"):
        migrate({"nodeid": "t"}, SCHEMA + 1)
    with pytest.raises(ValueError, match="not a positive integer"):
        migrate({"nodeid": "t"}, 0)
    # a step from schema 1 to 2: a renamed field; a schema-1 record read by a schema-2 reader takes it
    monkeypatch.setattr(record_module, "SCHEMA", 2)
    monkeypatch.setitem(record_module.MIGRATIONS, 1,
                        lambda r: {**{k: v for k, v in r.items() if k != "seconds"}, "time_s": r.get("seconds")})
    assert TestRecord.from_dict({"nodeid": "t", "seconds": 2e-3}, 1).time_s == 2e-3
    assert TestRecord.from_dict({"nodeid": "t", "time_s": 3e-3}, 2).time_s == 3e-3


def test_the_baseline_block_reads_typed_and_writes_back_unchanged() -> None:
    from pytest_roofline.record.baseline_record import BaselineRecord

    block = {"verdict": "regressed", "fraction": 0.5, "drop": 0.2, "statistic": "99% CI [0.7, 0.9]",
             "explanation": "time x1.25", "excused": "contended", "sessions": ["s1", "s2"],
             "changes": {"time": {"ratio": 1.25}}, "max_drop": 0.1, "future_field": [1, 2]}
    record = TestRecord.from_dict({"nodeid": "t.py::test", "baseline": block})
    assert record.baseline is not None
    assert (record.baseline.verdict, record.baseline.fraction, record.baseline.drop) == ("regressed", 0.5, 0.2)
    assert record.baseline.time_ratio == 1.25 and record.baseline.sessions == ("s1", "s2")
    assert record.baseline.excused == "contended" and record.baseline.explanation == "time x1.25"
    assert record.to_dict()["baseline"] == block  # every field as written, unknown ones too
    # a field of the wrong type reads as unset, never as a verdict
    odd = BaselineRecord.from_dict({"verdict": 3, "drop": "x", "sessions": "s1", "changes": {"time": 5}})
    assert odd is not None and (odd.verdict, odd.drop, odd.sessions, odd.time_ratio) == (None, None, (), None)
    assert BaselineRecord.from_dict(None) is None and BaselineRecord.from_dict([1]) is None


def test_the_contended_block_reads_typed_and_writes_back_unchanged() -> None:
    block = {"remeasured": True, "still_contended": False, "failed_when_remeasured": True, "message": "below",
             "judged": True, "spread": 0.031}
    record = TestRecord.from_dict({"nodeid": "t.py::test", "contended": block})
    assert record.contended is not None and record.contended.remeasured and not record.contended.still_contended
    assert record.contended.failed_when_remeasured and record.contended.message == "below"
    assert record.contended.judged and record.contended.spread == 0.031
    assert record.to_dict()["contended"] == block
    # only true is true: a forged "yes" does not report a test again
    forged = TestRecord.from_dict({"nodeid": "t.py::test", "contended": {"remeasured": "yes"}}).contended
    assert forged is not None and not forged.remeasured
