"""The site shows the verdict the baseline gate gave (one statistic), and the time per call beside the fraction."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("plotly", reason="the site needs the 'site' extra: pip install -e '.[site]'")
pytest.importorskip("ruptures", reason="the site needs the 'site' extra: pip install -e '.[site]'")

from pytest_roofline.site.generate import build_site

EXPLANATION = "time ×2.00 since the baseline: work ×2.00 at the same fraction (0.80)"
GATE = {"verdict": "regressed", "failed_on": ["time"], "fail_on": ["time", "fraction"], "explanation": EXPLANATION,
        "statistic": "time ratio now/baseline 2.000, 95% CI [1.960, 2.041]; fraction ratio now/baseline 1.000"}


def _session(folder: Path, day: int, tests: list[dict[str, Any]]) -> None:
    document = {"format": "pytest-roofline-history", "schema": 1,
                "session": {"id": f"s{day}", "start": f"2026-01-{day:02d}T02:00:00+00:00",
                            "git": {"commit": f"{day:02d}" * 20}},
                "machine": {"key": "m", "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
                "tests": tests}
    (folder / f"{day}.json").write_text(json.dumps(document))


def _mm(time_s: float, gate: dict[str, Any] | None = None) -> dict[str, Any]:
    """A matmul at fraction 0.8 whatever its time: twice the work in twice the time keeps the fraction."""
    record = {"nodeid": "t.py::test_mm", "fraction": 0.8, "time_s": time_s, "min_fraction": 0.5,
              "bound": "compute:fp32", "outcome": "failed" if gate else "passed"}
    return {**record, "baseline": gate} if gate else record


def _figures(page: Path) -> list[dict[str, Any]]:
    text = page.read_text(encoding="utf-8")
    return [json.loads(body.replace("<\\/", "</")) for body in
            re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', text, re.DOTALL)]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """Ten sessions of test_mm at 1 ms, then one at 2 ms the gate found regressed; test_add without any gate
    record, its fraction stepping from 0.5 to 0.4 (the trend finds it regressed)."""
    for day in range(1, 12):
        add = {"nodeid": "t.py::test_add", "fraction": 0.5 if day <= 6 else 0.4, "time_s": 1e-3,
               "bound": "memory:DRAM", "outcome": "passed"}
        _session(tmp_path, day, [_mm(1e-3 if day < 11 else 2e-3, GATE if day == 11 else None), add])
    build_site(tmp_path, tmp_path / "out")
    return tmp_path / "out"


def test_the_index_shows_the_gates_verdict_and_explanation(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    row = re.search(r'<tr data-test="t.py::test_mm".*?</tr>', index, re.DOTALL)
    assert row is not None
    # The fraction held at 0.8, so the trend alone would say steady: the gate judged the time.
    assert 'data-verdict="regressed"' in row.group(0)
    assert f'<span class="verdict regressed" title="{EXPLANATION}">regressed</span>' in row.group(0)
    assert f'<div class="why">{EXPLANATION}</div>' in row.group(0)
    add = re.search(r'<tr data-test="t.py::test_add".*?</tr>', index, re.DOTALL)
    assert add is not None and 'data-verdict="regressed"' in add.group(0)
    assert '>regressed</span> <span class="muted">trend</span>' in add.group(0)


def test_the_test_page_shows_the_gates_verdict_and_the_time_per_call(site: Path) -> None:
    page = next(site.glob("m/*/t/test_mm-*.html"))
    text = page.read_text(encoding="utf-8")
    assert ("Verdict of the baseline gate in this test's latest session (s11, commit <code>111111111111</code>): "
            f"<b>regressed</b>: {EXPLANATION}. Statistic: time ratio now/baseline 2.000") in text.replace("&#x27;", "'")
    assert "Mann-Whitney" not in text  # one statistic: the trend is not shown where the gate ran
    fraction = _figures(page)[0]
    time = next(trace for trace in fraction["data"] if trace["name"] == "time per call")
    assert time["yaxis"] == "y2" and time["y"] == [0.001] * 10 + [0.002]
    assert fraction["layout"]["yaxis2"]["overlaying"] == "y"
    hover = fraction["data"][0]["customdata"]
    assert [h[4] for h in hover] == ["not run"] * 10 + ["regressed"]
    import plotly.graph_objects as go

    go.Figure(fraction)  # the second axis is valid for plotly


def test_the_trend_is_labelled_where_the_latest_session_ran_no_gate(site: Path) -> None:
    text = next(site.glob("m/*/t/test_add-*.html")).read_text(encoding="utf-8").replace("&#x27;", "'")
    assert "Verdict: the trend (this test's latest session ran no baseline gate): median 0.4 vs 0.5" in text
    assert "Verdict of the baseline gate" not in text


def test_an_older_gate_record_does_not_stand_for_the_latest_session(tmp_path: Path) -> None:
    contended = {**GATE, "excused": "contended"}
    for day in range(1, 4):
        _session(tmp_path, day, [_mm(1e-3, contended if day == 2 else None)])
    build_site(tmp_path, tmp_path / "out")
    index = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert 'data-verdict="new"' in index and '<span class="muted">trend</span>' in index
    _session(tmp_path, 4, [_mm(1e-3, contended)])
    build_site(tmp_path, tmp_path / "out")
    index = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert f'<div class="why">{EXPLANATION} (contended: not failed)</div>' in index
