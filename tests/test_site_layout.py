"""The history site's layout: one shared plotly.js, the baseline band from the gate's sessions, names that
wrap between their parts, trajectory labels placed apart."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("plotly", reason="the site needs the 'site' extra: pip install -e '.[site]'")
pytest.importorskip("ruptures", reason="the site needs the 'site' extra: pip install -e '.[site]'")

from pytest_roofline.site import label_layout, pages
from pytest_roofline.site.generate import build_site
from pytest_roofline.site.history_reader import read_history
from pytest_roofline.site.model import history_frame, summarize

# 12 nightly sessions: the first five scattered (0.40-0.85), then a steady 0.80, then a drop to 0.40; the last
# session ran the baseline gate against sessions 6-10 (median 0.80), as `--roofline-baseline` records it.
FRACTIONS = [0.40, 0.85, 0.55, 0.70, 0.45, 0.80, 0.79, 0.81, 0.80, 0.80, 0.41, 0.40]
GATE_SESSIONS = ["s06", "s07", "s08", "s09", "s10"]


def _history(directory: Path, gate: bool = True, nodeid: str = "suite/test_a.py::test_a[fp32]") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for day, fraction in enumerate(FRACTIONS, start=1):
        record: dict[str, Any] = {"nodeid": nodeid, "fraction": fraction, "min_fraction": 0.3,
                                  "bound": "memory:DRAM", "outcome": "passed", "time_s": 0.01 / fraction,
                                  "flops": 1e6, "ai": {"DRAM": 1.0}}
        if gate and day == len(FRACTIONS):
            record["baseline"] = {"verdict": "regressed", "explanation": "time ×2.0 since the baseline",
                                  "statistic": "time ×2.0", "fraction": 0.80, "sessions": GATE_SESSIONS,
                                  "commits": [None] * 5}
        document = {"format": "pytest-roofline-history", "schema": 1,
                    "session": {"id": f"s{day:02d}", "start": f"2026-01-{day:02d}T02:00:00+00:00",
                                "git": {"commit": f"{day:040x}"}},
                    "machine": {"key": "m", "peak_flops": {"fp32": 1e9}, "bandwidth": {"DRAM": 1e8}},
                    "tests": [record]}
        (directory / f"s{day:02d}.json").write_text(json.dumps(document))
    return directory


def _figures(page: Path) -> list[dict[str, Any]]:
    text = page.read_text(encoding="utf-8")
    return [json.loads(body.replace("<\\/", "</")) for body in
            re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', text, re.DOTALL)]


def test_the_band_is_drawn_from_the_baseline_sessions_the_gate_used(tmp_path: Path) -> None:
    history = _history(tmp_path / "h")
    summary = summarize("m", "suite/test_a.py::test_a[fp32]", history_frame(read_history(history)))
    # the gate's reference median 0.80 and the range of sessions 6-10 (0.79-0.81), not the first five's
    # 0.40-0.85 that would swallow the drop to 0.40
    assert summary.baseline == (0.80, 0.79, 0.81)
    assert summary.baseline_sessions == tuple(GATE_SESSIONS) and summary.baseline_gate == "s12"
    assert summary.baseline_change == pytest.approx(0.41 / 0.80 - 1)  # now: the median of 0.80, 0.41, 0.40
    build_site(history, tmp_path / "out")
    page = next((tmp_path / "out").glob("m/*/t/*.html"))
    fraction = _figures(page)[0]
    band = next(s for s in fraction["layout"]["shapes"] if s["type"] == "rect" and s.get("yref") != "paper")
    assert (band["y0"], band["y1"]) == (0.79, 0.81)
    assert band["xref"] == "x" and band["x0"] == "2026-01-06 02:00:00" and band["x1"] == "2026-01-12 02:00:00"
    ringed = next(trace for trace in fraction["data"] if trace["name"] == "baseline sessions")
    assert ringed["y"] == [0.80, 0.79, 0.81, 0.80, 0.80]
    assert "5 baseline sessions the gate compared this test with in session s12" in page.read_text()


def test_without_a_gate_record_the_band_is_the_first_sessions(tmp_path: Path) -> None:
    history = _history(tmp_path / "h", gate=False)
    summary = summarize("m", "suite/test_a.py::test_a[fp32]", history_frame(read_history(history)))
    assert summary.baseline == (0.55, 0.40, 0.85) and summary.baseline_gate is None
    assert summary.baseline_sessions == ("s01", "s02", "s03", "s04", "s05")


def test_every_page_loads_the_one_shared_plotly(tmp_path: Path) -> None:
    from plotly.offline import get_plotlyjs

    history = _history(tmp_path / "h")
    out = tmp_path / "out"
    result = build_site(history, out)
    scripts = {}
    for page in out.rglob("*.html"):
        sources = re.findall(r'<script src="([^"]*plotly[^"]*)"', page.read_text(encoding="utf-8"))
        assert len(sources) == 1, page  # loaded once, never inlined
        scripts[page] = (page.parent / sources[0]).resolve()
        assert page.stat().st_size < 100_000  # no page carries plotly.js (4.8 MB) itself
    assert len(scripts) == 3 and set(scripts.values()) == {(out / "plotly.min.js").resolve()}
    copies = [p for p in out.rglob("*.js") if "plotly" in p.name]
    assert copies == [out / "plotly.min.js"]
    plotly_size = (out / "plotly.min.js").stat().st_size
    assert plotly_size == len(get_plotlyjs().encode())
    assert result.size_bytes - plotly_size < 200_000  # the pages themselves: small beside plotly

    # --plotly-js: the pages load a copy outside the site (shared by several sites); none is written
    shared = build_site(history, tmp_path / "shared", plotly_js="../plotly.min.js")
    assert not list((tmp_path / "shared").rglob("plotly*.js"))
    assert shared.size_bytes < result.size_bytes - plotly_size + 20_000
    for page in (tmp_path / "shared").rglob("*.html"):
        (source,) = re.findall(r'<script src="([^"]*plotly[^"]*)"', page.read_text(encoding="utf-8"))
        assert (page.parent / source).resolve() == (tmp_path / "plotly.min.js").resolve()
    url = build_site(history, tmp_path / "url", plotly_js="https://example.org/plotly-2.35.2.min.js")
    assert abs(url.size_bytes - shared.size_bytes) < 1_000  # the pages alone (the src differs in length)
    assert '<script src="https://example.org/plotly-2.35.2.min.js">' in (tmp_path / "url/index.html").read_text()


def test_test_names_wrap_between_their_parts_not_inside_words() -> None:
    cell = pages.test_name("example_suite/test_deepcam.py::test_block_forward[aspp-fp32]")
    assert cell == ('<span class="path">example_suite/<wbr>test_deepcam.py::<wbr></span>'
                    "test_block_forward[<wbr>aspp-fp32]")
    assert pages.wrappable("a<b>::c") == "a&lt;b&gt;::<wbr>c"  # escaped first, then the breaks
    css = (Path(pages.__file__).parent / "assets" / "site.css").read_text()
    assert "anywhere" not in css and "break-all" not in css


def test_trajectory_labels_are_placed_apart() -> None:
    # five points a few pixels apart along a line, labelled by batch: "top left" for all would stack them
    points = [(1.0 * 1.05 ** i, 1e9 * 1.05 ** i, str(2 ** i)) for i in range(5)]
    x_range, y_range = [-1.0, 2.0], [8.0, 11.0]
    positions = label_layout.text_positions(points, x_range, y_range)
    assert len(set(positions)) > 1

    def boxes(chosen: list[str]) -> list[tuple[float, float, float, float]]:
        out = []
        for (x, y, text), position in zip(points, chosen):
            px = (label_layout.math.log10(x) - x_range[0]) / 3 * 1000
            py = (label_layout.math.log10(y) - y_range[0]) / 3 * 400
            out.append(label_layout._box(px, py, label_layout.CHAR_PX * len(text), position))
        return out

    from pytest_roofline.output.label_place import overlap

    placed = boxes(positions)
    stacked = boxes(["top left"] * len(points))
    assert sum(overlap(a, b) for i, a in enumerate(stacked) for b in stacked[i + 1:]) > 0
    assert all(overlap(a, b) == 0 for i, a in enumerate(placed) for b in placed[i + 1:])


def test_site_roofline_draws_each_distinct_roof_once() -> None:
    from pytest_roofline.site import charts

    # the first H100 record's roofs (../shared/gpu-h100/characterize.json): 11 names, 6 distinct values
    peaks = {"fp64": 64.56e12, "fp32": 62.18e12, "fp16": 749.4e12, "bf16": 783.5e12, "fp64_tensor": 64.56e12,
             "tf32_tensor": 411.0e12, "tf32": 411.0e12, "fp16_tensor": 749.4e12, "bf16_tensor": 783.5e12,
             "fp8_tensor": 1421.8e12, "fp8": 1421.8e12}
    traces = charts.roof_traces(charts.Roofs(peaks, {"L1": 7.54e12, "L2": 7.61e12, "HBM": 2.82e12}), (0.1, 1e4))
    flat = [t for t in traces if t["y"][0] == t["y"][1]]
    assert [t["name"] for t in flat] == [
        "fp8 / fp8_tensor 1.42 PFLOP/s", "bf16 / bf16_tensor 784 TFLOP/s", "fp16 / fp16_tensor 749 TFLOP/s",
        "tf32 / tf32_tensor 411 TFLOP/s", "fp64 / fp64_tensor 64.6 TFLOP/s", "fp32 62.2 TFLOP/s"]
    assert [t["line"]["dash"] for t in flat] == ["dash"] * 5 + ["solid"]
